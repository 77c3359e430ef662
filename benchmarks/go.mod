module github.com/go-ratelimit/ratelimit/benchmarks

go 1.26.0

replace github.com/go-ratelimit/ratelimit => ../

replace github.com/go-ratelimit/ratelimit/store/goredisstore => ../store/goredisstore

replace github.com/go-ratelimit/ratelimit/store/rueidisstore => ../store/rueidisstore

replace github.com/go-ratelimit/ratelimit/store/storetest => ../store/storetest

replace github.com/go-ratelimit/ratelimit/internal/redistest => ../internal/redistest

require (
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	github.com/go-ratelimit/ratelimit/internal/redistest v0.0.0-00010101000000-000000000000
	github.com/go-ratelimit/ratelimit/store/goredisstore v0.0.0-00010101000000-000000000000
	github.com/go-ratelimit/ratelimit/store/rueidisstore v0.0.0-00010101000000-000000000000
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redis/rueidis v1.0.69
	github.com/sethvargo/go-limiter v0.7.1
	github.com/throttled/throttled/v2 v2.15.0
	github.com/ulule/limiter/v3 v3.11.2
	golang.org/x/time v0.16.0
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-ratelimit/ratelimit/store/storetest v0.0.0-00010101000000-000000000000 // indirect
	github.com/hashicorp/golang-lru v0.5.4 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.34.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
