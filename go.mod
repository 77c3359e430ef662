module github.com/go-ratelimit/ratelimit

go 1.24.0
