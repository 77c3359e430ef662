// Package crossproc holds no code, only a test: several OS processes, each
// with go-redis and rueidis Limiters, race on one key of a real Redis (and
// a real Redis Cluster) and must admit exactly the limit between them.
//
// The test re-executes its own binary as the worker processes. It runs when
// RATELIMIT_REDIS_ADDR (and, for the cluster, RATELIMIT_REDIS_CLUSTER_ADDRS)
// is set, as .ci/run does, and skips otherwise:
//
//	RATELIMIT_REDIS_ADDR=127.0.0.1:6379 go test -race ./crossproc   (in integration/)
package crossproc
