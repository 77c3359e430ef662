module github.com/go-ratelimit/ratelimit/store/storetest

go 1.24.0

replace github.com/go-ratelimit/ratelimit => ../..

require (
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	pgregory.net/rapid v1.3.0
)
