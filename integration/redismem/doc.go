// Package redismem holds no code, only a measurement: how many bytes of
// Redis memory one limiter key costs, for every algorithm and both client
// libraries, next to an emulation of the key go-redis/redis_rate v10
// writes, and to candidate encodings of the token bucket's state.
//
// It starts a private redis-server (redistest.StartServer), so it never
// touches a shared one, and runs only when asked:
//
//	RATELIMIT_MEASURE_MEMORY=1 RATELIMIT_REDIS_ADDR=127.0.0.1:6379 \
//	  go test -v -count=1 -run TestMemoryPerKey -timeout 30m ./redismem   (in integration/)
//
// RATELIMIT_REDIS_ADDR only enables real-Redis tests; the server it names
// is not used. RATELIMIT_MEASURE_KEYS sets the number of keys (default
// 100000). The result is a markdown table on standard output.
package redismem
