module github.com/go-ratelimit/ratelimit/cmd/ratelimit-demo

go 1.24.0

replace github.com/go-ratelimit/ratelimit => ../..

replace github.com/go-ratelimit/ratelimit/store/goredisstore => ../../store/goredisstore

replace github.com/go-ratelimit/ratelimit/store/rueidisstore => ../../store/rueidisstore

replace github.com/go-ratelimit/ratelimit/store/storetest => ../../store/storetest

replace github.com/go-ratelimit/ratelimit/internal/redistest => ../../internal/redistest

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/chromedp/cdproto v0.0.0-20250724212937-08a3db8b4327
	github.com/chromedp/chromedp v0.14.2
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	github.com/go-ratelimit/ratelimit/store/goredisstore v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.22.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/chromedp/sysutil v1.1.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20250725192818-e39067aee2d2 // indirect
	github.com/gobwas/httphead v0.1.0 // indirect
	github.com/gobwas/pool v0.2.1 // indirect
	github.com/gobwas/ws v1.4.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.34.0 // indirect
)
