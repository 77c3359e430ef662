package grpcratelimit_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/grpcratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// Limit each API key to a burst of 2 and a call a minute. A server installs
// the interceptors with grpc.NewServer(grpc.UnaryInterceptor(in.Unary()),
// grpc.StreamInterceptor(in.Stream())); here the unary one is called
// directly, as a server would call it, and a denied call fails with
// RESOURCE_EXHAUSTED and the exact delay in a RetryInfo detail.
func ExampleNew() {
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1.0 / 60})
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(alg, memorystore.New[string]())
	if err != nil {
		log.Fatal(err)
	}
	in, err := grpcratelimit.New(lim, grpcratelimit.Metadata("x-api-key"))
	if err != nil {
		log.Fatal(err)
	}

	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "k-123"))
	info := &grpc.UnaryServerInfo{FullMethod: "/shop.v1.Orders/List"}
	handler := func(ctx context.Context, req any) (any, error) { return "ok", nil }
	for range 3 {
		_, err := in.Unary()(ctx, nil, info, handler)
		st := status.Convert(err)
		fmt.Print(st.Code())
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Printf(", retry in %v", ri.GetRetryDelay().AsDuration().Round(time.Second))
			}
		}
		fmt.Println()
	}
	// Output:
	// OK
	// OK
	// ResourceExhausted, retry in 1m0s
}
