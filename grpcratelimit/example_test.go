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
	"github.com/go-ratelimit/ratelimit/clock"
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

// ExampleNewResolver limits two methods, each with a policy of its own,
// per tenant named in the metadata, and leaves every other method
// unlimited.
func ExampleNewResolver() {
	st := memorystore.New[string]()
	clk := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)) // for the output's sake
	policy := func(name string, capacity int64) *ratelimit.Policy[string] {
		alg, _ := tokenbucket.New(tokenbucket.Config{Capacity: capacity, Rate: 1})
		p, _ := ratelimit.NewPolicy(st, []ratelimit.Limit{{Name: name, Algorithm: alg}}, ratelimit.WithClock(clk))
		return p
	}
	policies := map[string]*ratelimit.Policy[string]{
		"/shop.v1.Orders/Create": policy("create", 1),
		"/shop.v1.Orders/List":   policy("list", 100),
	}
	tenant := grpcratelimit.Metadata("x-tenant")
	in, _ := grpcratelimit.NewResolver(func(ctx context.Context, method string) (string, *ratelimit.Policy[string], error) {
		p := policies[method]
		if p == nil {
			return "", nil, nil // unlimited
		}
		key, err := tenant(ctx, method)
		return key, p, err
	})

	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "acme"))
	// The handler, behind the interceptor, says what it was told.
	handler := func(ctx context.Context, _ any) (any, error) {
		if d, ok := grpcratelimit.DecisionFrom(ctx); ok {
			return fmt.Sprintf("admitted, %d left", d.Remaining()), nil
		}
		return "unlimited", nil
	}
	call := func(method string) {
		reply, err := in.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, handler)
		if err != nil {
			st := status.Convert(err)
			fmt.Printf("%s: %v: %s\n", method, st.Code(), st.Message())
			return
		}
		fmt.Printf("%s: %s\n", method, reply)
	}
	call("/shop.v1.Orders/Create")
	call("/shop.v1.Orders/Create")
	call("/shop.v1.Orders/List")
	call("/grpc.health.v1.Health/Check")
	// Output:
	// /shop.v1.Orders/Create: admitted, 0 left
	// /shop.v1.Orders/Create: ResourceExhausted: rate limit "create" exceeded; retry in 1s
	// /shop.v1.Orders/List: admitted, 99 left
	// /grpc.health.v1.Health/Check: unlimited
}
