package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// Settle's edges: a cost out of range is refused, changing nothing; after
// Refund it does nothing; a reservation a failure policy admitted (the
// store charged nothing) has nothing to settle; the observer sees
// OpSettle with the cost settled to.
func TestSettleEdges(t *testing.T) {
	ctx := context.Background()
	var ops []ratelimit.Op
	var costs []int64
	obs := func(_ context.Context, e ratelimit.Event) {
		ops, costs = append(ops, e.Op), append(costs, e.Cost)
	}
	lim, err := ratelimit.New(mustBucket(t, tokenbucket.Config{Capacity: 10, Rate: 1e-3}), memorystore.New[string](),
		ratelimit.WithClock(clock.NewFake(time.Unix(1e9, 0))), ratelimit.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	r, err := lim.ReserveN(ctx, "k", 4, 0)
	if err != nil || !r.OK() {
		t.Fatalf("ReserveN(4): %v, %v", r, err)
	}
	for _, n := range []int{-1, 1<<40 + 1} {
		if err := r.Settle(ctx, n); !errors.Is(err, ratelimit.ErrInvalidCost) {
			t.Errorf("Settle(%d): %v, want ErrInvalidCost", n, err)
		}
	}
	if err := r.Settle(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if d, _ := lim.Peek(ctx, "k"); d.Remaining() != 3 {
		t.Errorf("after Settle(7): %d left, want 3", d.Remaining())
	}
	if given, err := r.Refund(ctx); err != nil || given != 7 {
		t.Errorf("Refund after Settle(7): %d, %v; want 7 given back", given, err)
	}
	if err := r.Settle(ctx, 9); err != nil {
		t.Fatal(err)
	}
	if d, _ := lim.Peek(ctx, "k"); d.Remaining() != 10 {
		t.Errorf("Settle after Refund: %d left, want all 10 (it does nothing)", d.Remaining())
	}
	want := []ratelimit.Op{ratelimit.OpReserve, ratelimit.OpSettle, ratelimit.OpPeek, ratelimit.OpRefund, ratelimit.OpPeek}
	if len(ops) != len(want) {
		t.Fatalf("observed %v, want %v", ops, want)
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Fatalf("observed %v, want %v", ops, want)
		}
	}
	if costs[1] != 7 {
		t.Errorf("OpSettle's cost: %d, want 7", costs[1])
	}

	down, err := ratelimit.New(mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1}), bookDownStore{},
		ratelimit.WithName("down"), ratelimit.WithFailurePolicy(ratelimit.FailOpen), ratelimit.WithErrorHandler(func(error) {}))
	if err != nil {
		t.Fatal(err)
	}
	open, err := down.Reserve(ctx, "k")
	if err != nil || !open.OK() {
		t.Fatalf("Reserve under FailOpen: %v, %v", open, err)
	}
	if err := open.Settle(ctx, 5); err != nil {
		t.Errorf("Settle of what FailOpen admitted: %v, want nil (nothing was charged)", err)
	}
}

// A Policy's Refund says the least any limit gave back: a fixed window
// whose window has ended gives nothing, so the reservation reports 0,
// though the bucket took its part back (its 3 less what refilled since,
// 0.001, rounded down: 2).
func TestPolicyRefundSaysTheLeast(t *testing.T) {
	ctx := context.Background()
	fake := clock.NewFake(time.Unix(1e9, 0))
	window, err := fixedwindow.New(fixedwindow.Config{Limit: 10, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
		{Name: "window", Algorithm: window},
		{Name: "bucket", Algorithm: mustBucket(t, tokenbucket.Config{Capacity: 10, Rate: 1e-3})},
	}, ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.ReserveN(ctx, "k", 3, 0)
	if err != nil || !r.OK() {
		t.Fatalf("ReserveN(3): %v, %v", r, err)
	}
	if _, err := p.AllowN(ctx, "k", 1); err != nil { // charged since: no exact undo
		t.Fatal(err)
	}
	fake.Advance(time.Second)
	if given, err := r.Refund(ctx); err != nil || given != 0 {
		t.Errorf("Refund once the window ended: %d, %v; want 0 (the window's)", given, err)
	}
	if d, _ := p.Peek(ctx, "k"); d.Limits()[1].Remaining() != 8 {
		t.Errorf("the bucket after the refund: %v, want 8 left (2 of its 3 back, the Allow's 1 charged)", d.Limits()[1])
	}
}
