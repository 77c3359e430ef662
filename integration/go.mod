module github.com/go-ratelimit/ratelimit/integration

go 1.24.0

replace github.com/go-ratelimit/ratelimit => ..

replace github.com/go-ratelimit/ratelimit/store/storetest => ../store/storetest

replace github.com/go-ratelimit/ratelimit/store/goredisstore => ../store/goredisstore

replace github.com/go-ratelimit/ratelimit/store/rueidisstore => ../store/rueidisstore

replace github.com/go-ratelimit/ratelimit/internal/redistest => ../internal/redistest

replace github.com/go-ratelimit/ratelimit/grpcratelimit => ../grpcratelimit

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	github.com/go-ratelimit/ratelimit/grpcratelimit v0.0.0-00010101000000-000000000000
	github.com/go-ratelimit/ratelimit/internal/redistest v0.0.0-00010101000000-000000000000
	github.com/go-ratelimit/ratelimit/store/goredisstore v0.0.0-00010101000000-000000000000
	github.com/go-ratelimit/ratelimit/store/rueidisstore v0.0.0-00010101000000-000000000000
	github.com/go-ratelimit/ratelimit/store/storetest v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redis/rueidis v1.0.69
	google.golang.org/grpc v1.80.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/net v0.49.0 // indirect
	golang.org/x/sys v0.40.0 // indirect
	golang.org/x/text v0.33.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260120221211-b8f7ae30c516 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
