package grpcratelimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/grpcratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// BenchmarkUnaryInterceptor measures the unary server interceptor's own
// cost on the memory store: the decision, the response metadata and the
// decision in the handler's context, with a trivial handler. The context
// carries a server transport stream, as a real call's does, so that the
// metadata is set.
func BenchmarkUnaryInterceptor(b *testing.B) {
	const huge = 1 << 40
	// A bucket of capacity tokens refilled over about twelve days: huge
	// never runs out within a benchmark; 1 denies every call once the
	// first has taken its token.
	bucket := func(b *testing.B, capacity int64) *tokenbucket.Bucket {
		alg, err := tokenbucket.New(tokenbucket.Config{Capacity: capacity, Rate: float64(capacity) / (1 << 20)})
		if err != nil {
			b.Fatal(err)
		}
		return alg
	}
	policy := func(b *testing.B) *ratelimit.Policy[string] {
		minute, err := fixedwindow.New(fixedwindow.Config{Limit: huge, Window: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		p, err := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
			{Name: "burst", Algorithm: bucket(b, huge)},
			{Name: "minute", Algorithm: minute},
		})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	limiter := func(b *testing.B, capacity int64) *grpcratelimit.Interceptor[string] {
		lim, err := ratelimit.New(bucket(b, capacity), memorystore.New[string]())
		if err != nil {
			b.Fatal(err)
		}
		in, err := grpcratelimit.New(lim, grpcratelimit.Method)
		if err != nil {
			b.Fatal(err)
		}
		return in
	}
	run := func(b *testing.B, in *grpcratelimit.Interceptor[string], wantErr bool) {
		const method = "/a.B/C"
		ctx := grpc.NewContextWithServerTransportStream(context.Background(), transportStream{method})
		info := &grpc.UnaryServerInfo{FullMethod: method}
		handler := func(context.Context, any) (any, error) { return nil, nil }
		unary := in.Unary()
		// The first call is admitted, and takes a denying limiter's only
		// token.
		if _, err := unary(ctx, nil, info, handler); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := unary(ctx, nil, info, handler); (err != nil) != wantErr {
				b.Fatalf("got error %v, want one: %v", err, wantErr)
			}
		}
	}
	b.Run("limiter/admitted", func(b *testing.B) {
		run(b, limiter(b, huge), false)
	})
	b.Run("limiter/denied", func(b *testing.B) {
		run(b, limiter(b, 1), true)
	})
	b.Run("policy/admitted", func(b *testing.B) {
		in, err := grpcratelimit.NewPolicy(policy(b), grpcratelimit.Method)
		if err != nil {
			b.Fatal(err)
		}
		run(b, in, false)
	})
	b.Run("resolver/admitted", func(b *testing.B) {
		p := policy(b)
		in, err := grpcratelimit.NewResolver(func(_ context.Context, method string) (string, *ratelimit.Policy[string], error) {
			return method, p, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		run(b, in, false)
	})
}
