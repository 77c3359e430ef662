package grpcratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/concurrency"
	"github.com/go-ratelimit/ratelimit/grpcratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestHoldsASlotPerCall: an in-flight limit of 1 is held while a call's
// handler runs, refuses a call meanwhile, and is free again when the
// handler returns, or panics; a stream holds it while it runs.
func TestHoldsASlotPerCall(t *testing.T) {
	slots, err := concurrency.New(concurrency.Config{Limit: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(slots, memorystore.New[string](), ratelimit.WithName("inflight"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := grpcratelimit.New(lim, func(context.Context, string) (string, error) { return "k", nil })
	if err != nil {
		t.Fatal(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/a.B/C"}
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), transportStream{"/a.B/C"})
	served := func(context.Context, any) (any, error) { return "ok", nil }
	call := func() error { _, err := in.Unary()(ctx, nil, info, served); return err }
	left := func() int64 {
		d, err := lim.Peek(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining()
	}

	_, err = in.Unary()(ctx, nil, info, func(context.Context, any) (any, error) {
		if err := call(); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("a call while another holds the slot: %v, want ResourceExhausted", err)
		}
		return "ok", nil
	})
	if err != nil || left() != 1 {
		t.Fatalf("after the handler returned: %v, %d left; want the slot back", err, left())
	}
	func() {
		defer func() { _ = recover() }()
		_, _ = in.Unary()(ctx, nil, info, func(context.Context, any) (any, error) { panic("handler") })
	}()
	if left() != 1 {
		t.Errorf("after a handler panicked: %d left, want the slot back", left())
	}
	sinfo := &grpc.StreamServerInfo{FullMethod: "/a.B/S"}
	err = in.Stream()(nil, fakeStream{ctx: ctx}, sinfo, func(any, grpc.ServerStream) error {
		if left() != 0 {
			t.Errorf("while a stream runs: %d left, want its slot held", left())
		}
		return nil
	})
	if err != nil || left() != 1 {
		t.Errorf("after the stream ended: %v, %d left; want the slot back", err, left())
	}
}

// TestPolicyCallKeepsTheToken: behind a policy of a rate and an in-flight
// limit, a call that ended keeps its token and frees its slot.
func TestPolicyCallKeepsTheToken(t *testing.T) {
	rate, err := tokenbucket.PerMinute(10)
	if err != nil {
		t.Fatal(err)
	}
	slots, err := concurrency.New(concurrency.Config{Limit: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
		{Name: "rate", Algorithm: rate}, {Name: "inflight", Algorithm: slots},
	}, ratelimit.WithName("api"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := grpcratelimit.NewPolicy(p, func(context.Context, string) (string, error) { return "k", nil })
	if err != nil {
		t.Fatal(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/a.B/C"}
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), transportStream{"/a.B/C"})
	for i := range 3 {
		if _, err := in.Unary()(ctx, nil, info, func(context.Context, any) (any, error) { return nil, nil }); err != nil {
			t.Fatalf("call %d, one at a time: %v", i, err)
		}
	}
	d, err := p.Peek(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if rate, slots := d.Limits()[0].Remaining(), d.Limits()[1].Remaining(); rate != 7 || slots != 1 {
		t.Errorf("after 3 calls: rate %d, slots %d left; want 7 and 1", rate, slots)
	}
}

// TestClientHoldsASlotPerCall: the client interceptor waits for a slot,
// holds it while the call runs and frees it when the call returns.
func TestClientHoldsASlotPerCall(t *testing.T) {
	slots, err := concurrency.New(concurrency.Config{Limit: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(slots, memorystore.New[string](), ratelimit.WithName("inflight"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := grpcratelimit.New(lim, func(context.Context, string) (string, error) { return "k", nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = in.UnaryClient()(ctx, "/a.B/C", nil, nil, nil, func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		if d, _ := lim.Peek(ctx, "k"); d.Remaining() != 0 {
			t.Errorf("while the call runs: %v, want its slot held", d)
		}
		return nil
	})
	if d, _ := lim.Peek(ctx, "k"); err != nil || d.Remaining() != 1 {
		t.Errorf("after the call: %v, %v; want the slot back", err, d)
	}
}

// TestClientWaitsForASlot: a client call that finds no slot tries again
// (ReserveN decides a hold now) until one is released, and runs only
// then; one whose context ends first fails with ResourceExhausted and
// holds nothing.
func TestClientWaitsForASlot(t *testing.T) {
	slots, err := concurrency.New(concurrency.Config{Limit: 1, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(slots, memorystore.New[string](), ratelimit.WithName("inflight"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := grpcratelimit.New(lim, func(context.Context, string) (string, error) { return "k", nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	held, _ := lim.ReserveN(ctx, "k", 1, 0)
	var released atomic.Bool
	call := func(ctx context.Context) error {
		return in.UnaryClient()(ctx, "/a.B/C", nil, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			if !released.Load() {
				t.Error("the call ran while the only slot was held")
			}
			return nil
		})
	}
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if err := call(short); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a call whose deadline comes before a slot: %v, want ResourceExhausted", err)
	}
	go func() {
		time.Sleep(60 * time.Millisecond)
		released.Store(true)
		_, _ = held.Release(ctx)
	}()
	if err := call(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := lim.Peek(ctx, "k"); d.Remaining() != 1 {
		t.Errorf("after the call: %v, want the slot back", d)
	}
}
