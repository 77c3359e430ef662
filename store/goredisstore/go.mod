module github.com/go-ratelimit/ratelimit/store/goredisstore

go 1.24.0

replace github.com/go-ratelimit/ratelimit => ../..

require (
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.22.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.31.0 // indirect
)
