// Package failover holds no code, only tests that start Redis Clusters of
// their own (three masters, a replica each) and change their topology
// under load from go-redis and rueidis Limiters:
//
//   - a manual failover (CLUSTER FAILOVER on a replica): no acknowledged
//     charge is lost and no key admits more than its limit;
//   - a master killed while its replica lags: decisions resume once the
//     replica is promoted and the clients have followed, and the
//     over-admission is measured against the acknowledged charges that had
//     not reached the replica;
//   - resharding: the slot of two hot keys is migrated under load
//     (CLUSTER SETSLOT … IMPORTING/MIGRATING, MIGRATE, SETSLOT … NODE):
//     ASK and MOVED are followed, no decision fails, and each key admits
//     exactly its limit.
//
// The clusters' nodes listen on ports of the range in
// $RATELIMIT_REDIS_SPARE_PORTS (first-last, at least six ports, each with
// port+10000 free for the cluster bus); the tests skip when it is unset.
// Pick both below the kernel's ephemeral range (32768 and up on Linux),
// where any client socket of a test running beside these may take a port
// first. .ci/run sets it:
//
//	RATELIMIT_REDIS_SPARE_PORTS=21001-21009 go test -race -v ./failover   (in integration/)
package failover
