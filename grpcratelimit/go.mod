module github.com/go-ratelimit/ratelimit/grpcratelimit

go 1.24.0

replace github.com/go-ratelimit/ratelimit => ../

require (
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260120221211-b8f7ae30c516
	google.golang.org/grpc v1.80.0
	google.golang.org/protobuf v1.36.11
)

require (
	golang.org/x/net v0.49.0 // indirect
	golang.org/x/sys v0.40.0 // indirect
	golang.org/x/text v0.33.0 // indirect
)
