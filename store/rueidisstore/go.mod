module github.com/go-ratelimit/ratelimit/store/rueidisstore

go 1.24.0

replace github.com/go-ratelimit/ratelimit => ../..

require (
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	github.com/redis/rueidis v1.0.69
)

require golang.org/x/sys v0.31.0 // indirect
