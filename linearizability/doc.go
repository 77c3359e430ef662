// Package linearizability holds no code, only tests: concurrent histories
// of Limiters on a real Redis and a real Redis Cluster, checked with
// github.com/anishathalye/porcupine against each algorithm's sequential
// model, and a deliberately non-atomic limiter that the checker must
// reject.
//
// It is a module of its own, so that the library's go.mod does not
// require porcupine. Run it against the servers .ci/run starts:
//
//	cd linearizability && RATELIMIT_REDIS_ADDR=127.0.0.1:16379 \
//	RATELIMIT_REDIS_CLUSTER_ADDRS=127.0.0.1:17001,127.0.0.1:17002,127.0.0.1:17003 \
//	go test -race -count=1 ./...
//
// Without them, the histories are recorded on an embedded miniredis.
package linearizability
