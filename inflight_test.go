//go:build go1.25

package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/concurrency"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func mustSlots(t *testing.T, limit int64, lease time.Duration) *concurrency.Slots {
	t.Helper()
	s, err := concurrency.New(concurrency.Config{Limit: limit, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// countReserves counts the reservations a Limiter makes: one store call
// each.
type countReserves struct{ n atomic.Int64 }

func (c *countReserves) Observe(_ context.Context, e ratelimit.Event) {
	if e.Op == ratelimit.OpReserve {
		c.n.Add(1)
	}
}

// TestInflightSixtyFourHolders: 64 goroutines on one key, an in-flight
// limit of 5, each holding its slot 10ms then releasing it: never more
// than 5 held, every one admitted in turn, each woken by a release (the
// lease of a minute never ends): 13 rounds of 10ms, and no more than two
// store calls per hold. WaitN waits; Refund by key releases.
func TestInflightSixtyFourHolders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := &countReserves{}
		lim, err := ratelimit.New(mustSlots(t, 5, time.Minute), memorystore.New[string](), ratelimit.WithObserver(calls.Observe))
		if err != nil {
			t.Fatal(err)
		}
		var held, most, admitted atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				d, err := lim.WaitN(t.Context(), "k", 1)
				if err != nil || !d.Allowed() {
					t.Errorf("WaitN = %v, %v", d, err)
					return
				}
				admitted.Add(1)
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(10 * time.Millisecond)
				held.Add(-1)
				if _, err := lim.Refund(t.Context(), "k", 1); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := most.Load(); got != 5 {
			t.Errorf("at most %d held at once, want 5", got)
		}
		if got := admitted.Load(); got != 64 {
			t.Errorf("%d admitted, want 64", got)
		}
		if got, want := time.Since(start), 130*time.Millisecond; got != want {
			t.Errorf("64 holds of 10ms, 5 at a time, took %v, want %v", got, want)
		}
		if got := calls.n.Load(); got > 2*64 {
			t.Errorf("%d store calls for 64 holds, want at most 128", got)
		}
	})
}

// TestHoldLeaseEnds: a hold never released frees its slot when its lease
// ends, and a waiter gets it then.
func TestHoldLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		lim, err := ratelimit.New(mustSlots(t, 1, time.Second), memorystore.New[string]())
		if err != nil {
			t.Fatal(err)
		}
		if r, err := lim.ReserveN(ctx, "k", 1, 0); err != nil || !r.OK() {
			t.Fatalf("first hold: %v, %v", r, err)
		} // never released
		r, err := lim.ReserveN(ctx, "k", 1, 0)
		if err != nil || r.OK() || r.Decision().RetryAfter() != time.Second {
			t.Fatalf("second hold, not waiting: %v, %v; want denied until the lease ends in 1s", r.Decision(), err)
		}
		start := time.Now()
		if d, err := lim.WaitN(ctx, "k", 1); err != nil || !d.Allowed() {
			t.Fatalf("waiting hold: %v, %v", d, err)
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("the waiter got the slot after %v, want 1s (the lease's end)", got)
		}
	})
}

// TestReleaseOnce: a release frees the hold's slot once; a second
// release, and a refund after it, free nothing more.
func TestReleaseOnce(t *testing.T) {
	ctx := context.Background()
	lim, err := ratelimit.New(mustSlots(t, 2, time.Minute), memorystore.New[string]())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := lim.ReserveN(ctx, "k", 1, 0)
	b, _ := lim.ReserveN(ctx, "k", 1, 0)
	if !a.OK() || !b.OK() {
		t.Fatal("two holds of a limit of 2 not admitted")
	}
	for range 2 {
		if _, err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Refund(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := lim.Peek(ctx, "k"); d.Remaining() != 1 {
		t.Errorf("after one hold released thrice: %v, want 1 left (the other still held)", d)
	}
}

// TestReleaseAfterLeaseFreesNothing: a hold whose lease has ended is no
// longer held, and its late release frees nothing a later hold took.
func TestReleaseAfterLeaseFreesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		lim, err := ratelimit.New(mustSlots(t, 1, time.Second), memorystore.New[string]())
		if err != nil {
			t.Fatal(err)
		}
		late, _ := lim.ReserveN(ctx, "k", 1, 0)
		time.Sleep(time.Second)
		now, _ := lim.ReserveN(ctx, "k", 1, 0)
		if !late.OK() || !now.OK() {
			t.Fatal("holds not admitted")
		}
		if _, err := late.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if d, _ := lim.Peek(ctx, "k"); d.Remaining() != 0 {
			t.Errorf("a release after the lease ended freed the slot another holds: %v", d)
		}
	})
}

// TestPolicyRateAndSlot: a request takes a rate token and a slot, or
// neither; Release frees the slot and keeps the token; Refund gives back
// both.
func TestPolicyRateAndSlot(t *testing.T) {
	ctx := context.Background()
	rate, err := tokenbucket.PerMinute(3)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
		{Name: "rate", Algorithm: rate},
		{Name: "inflight", Algorithm: mustSlots(t, 2, time.Minute)},
	}, ratelimit.WithClock(clock.NewFake(t0)))
	if err != nil {
		t.Fatal(err)
	}
	left := func(want string) {
		t.Helper()
		d, err := p.Peek(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		ls := d.Limits()
		if got := fmt.Sprintf("rate %d, slots %d", ls[0].Remaining(), ls[1].Remaining()); got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	r1, _ := p.ReserveN(ctx, "k", 1, 0)
	r2, _ := p.ReserveN(ctx, "k", 1, 0)
	r3, _ := p.ReserveN(ctx, "k", 1, 0)
	if !r1.OK() || !r2.OK() || r3.OK() || r3.Decision().Binding() != 1 {
		t.Fatalf("three requests on 2 slots: %v %v %v", r1.OK(), r2.OK(), r3.Decision())
	}
	left("rate 1, slots 0") // the denied request took no token
	if _, err := r1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	left("rate 1, slots 1") // the slot back, the token kept
	r4, _ := p.ReserveN(ctx, "k", 1, 0)
	if !r4.OK() {
		t.Fatalf("fourth request: %v", r4.Decision())
	}
	left("rate 0, slots 0")
	if _, err := r2.Refund(ctx); err != nil {
		t.Fatal(err)
	}
	left("rate 1, slots 1") // a refund gives back both
	if _, err := r4.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r5, _ := p.ReserveN(ctx, "k", 1, 0)
	r6, _ := p.ReserveN(ctx, "k", 1, 0)
	if !r5.OK() || r6.OK() || r6.Decision().Binding() != 0 {
		t.Fatalf("after the last token: %v, %v", r5.OK(), r6.Decision())
	}
	left("rate 0, slots 1") // denied by the rate: no slot taken
}

// TestWaitersInTurn: waiters for a slot are admitted in the order they
// came, each woken by the release before it, with one store call each.
func TestWaitersInTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		calls := &countReserves{}
		lim, err := ratelimit.New(mustSlots(t, 1, time.Hour), memorystore.New[string](), ratelimit.WithObserver(calls.Observe))
		if err != nil {
			t.Fatal(err)
		}
		first, _ := lim.ReserveN(ctx, "k", 1, 0)
		const n = 8
		got := make(chan int, n)
		for i := range n {
			go func() {
				if _, err := lim.WaitN(ctx, "k", 1); err != nil {
					t.Error(err)
					return
				}
				got <- i
			}()
			synctest.Wait() // queued before the next one comes
		}
		release := func() (int64, error) { return first.Release(ctx) }
		for want := range n {
			before := calls.n.Load()
			if given, err := release(); err != nil || given != 1 {
				t.Fatalf("release before turn %d: gave back %d, %v; want 1", want, given, err)
			}
			synctest.Wait()
			if i := <-got; i != want {
				t.Fatalf("waiter %d admitted in turn %d", i, want)
			}
			if c := calls.n.Load() - before; c > 2 {
				t.Errorf("turn %d: %d store calls, want at most 2 (the admission, and the next waiter's try)", want, c)
			}
			release = func() (int64, error) { // by key: the waiter kept no reservation
				d, err := lim.Refund(ctx, "k", 1)
				return int64(d.Remaining()), err
			}
		}
	})
}

// TestWaitForSlotBounded: ReserveN with a delay decides a hold now (no
// store knows when a slot frees, so it is never booked ahead and never
// waits: the fake clock of a kit that never advances cannot hang it), and
// WaitN's wait for a slot ends with the context; neither holds anything.
func TestWaitForSlotBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := ratelimit.New(mustSlots(t, 1, time.Hour), memorystore.New[string]())
		if err != nil {
			t.Fatal(err)
		}
		if r, err := lim.ReserveN(t.Context(), "k", 1, 0); err != nil || !r.OK() {
			t.Fatal("first hold not admitted")
		}
		start := time.Now()
		for _, delay := range []time.Duration{100 * time.Millisecond, -1} {
			r, err := lim.ReserveN(t.Context(), "k", 1, delay)
			if err != nil || r.OK() || time.Since(start) != 0 || r.Decision().RetryAfter() != time.Hour {
				t.Errorf("ReserveN within %v: %v, %v after %v; want not OK at once, retry after the lease's end", delay, r.Decision(), err, time.Since(start))
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := lim.WaitN(ctx, "k", 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WaitN past its deadline: %v, want DeadlineExceeded", err)
		}
		if d, _ := lim.Peek(t.Context(), "k"); d.Remaining() != 0 || d.ResetAfter() != time.Hour-50*time.Millisecond {
			t.Errorf("after three tries given up: %v, want the first hold alone", d)
		}
		if _, err := lim.WaitN(t.Context(), "k", 2); !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
			t.Errorf("a wait for 2 slots of 1: %v, want ErrCostExceedsLimit at once", err)
		}
	})
}

// TestHoldsRefuseDenialCache: a release may free a slot at any moment, so
// a denial of an in-flight limit holds for no known time.
func TestHoldsRefuseDenialCache(t *testing.T) {
	_, err := ratelimit.New(mustSlots(t, 1, time.Second), memorystore.New[string](), ratelimit.WithDenialCache(16))
	if !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("New with a denial cache: %v, want ErrInvalidConfig", err)
	}
}

var _ algorithm.Holder = (*concurrency.Slots)(nil)

// TestWaiterWokenThroughAnotherLimiter: two Limiters of one quota on one
// store share their waiters: a release through one wakes a waiter of the
// other at once, not at the lease's end.
func TestWaiterWokenThroughAnotherLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := memorystore.New[string]()
		a, err := ratelimit.New(mustSlots(t, 1, time.Hour), st, ratelimit.WithName("db"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := ratelimit.New(mustSlots(t, 1, time.Hour), st, ratelimit.WithName("db"))
		if err != nil {
			t.Fatal(err)
		}
		held, _ := b.ReserveN(ctx, "k", 1, 0)
		start := time.Now()
		go func() {
			time.Sleep(time.Second)
			_, _ = held.Release(ctx)
		}()
		if d, err := a.WaitN(ctx, "k", 1); err != nil || !d.Allowed() {
			t.Fatalf("waiter: %v, %v", d, err)
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("the waiter on a got the slot released through b after %v, want 1s", got)
		}
	})
}

// TestHoldNotSettled: a hold is released, not settled, on the memory
// store as on Redis (whose in-flight body has no --@owe part): Settle
// either way fails with ErrAlgorithmUnsupported and the hold stays.
// Before, the memory store released part of a hold settled down.
func TestHoldNotSettled(t *testing.T) {
	ctx := context.Background()
	lim, err := ratelimit.New(mustSlots(t, 5, time.Minute), memorystore.New[string]())
	if err != nil {
		t.Fatal(err)
	}
	r, err := lim.ReserveN(ctx, "k", 3, 0)
	if err != nil || !r.OK() {
		t.Fatalf("a hold of 3 of 5: %v, %v", r, err)
	}
	for _, n := range []int{1, 4} {
		if err := r.Settle(ctx, n); !errors.Is(err, store.ErrAlgorithmUnsupported) {
			t.Errorf("Settle(%d) of a hold: %v, want ErrAlgorithmUnsupported", n, err)
		}
	}
	if d, _ := lim.Peek(ctx, "k"); d.Remaining() != 2 {
		t.Errorf("after refused settles: %v, want 2 left (the hold of 3 still held)", d)
	}
}
