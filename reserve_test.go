package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// The observer gets an event per booking, cancel and refund.
func TestObserverBookingOps(t *testing.T) {
	ctx := context.Background()
	fake := clock.NewFake(t0)
	rec := &recorder{}
	lim, err := ratelimit.New(mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1}), memorystore.New[string](),
		ratelimit.WithClock(fake), ratelimit.WithObserver(rec.Observe))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Allow(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	r, err := lim.ReserveN(ctx, "k", 1, 2*time.Second)
	if err != nil || !r.OK() || r.Delay() != time.Second {
		t.Fatalf("ReserveN = %v, %v", r, err)
	}
	if r2, err := lim.ReserveN(ctx, "k", 1, 0); err != nil || r2.OK() {
		t.Fatalf("ReserveN within 0 = %v, %v; want not booked", r2, err)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Refund(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rec.take() {
		got = append(got, fmt.Sprintf("%v:%v:%d", e.Op, e.Allowed, e.Cost))
	}
	want := []string{"allow:true:1", "reserve:true:1", "reserve:false:1", "cancel:true:1", "refund:true:1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	// Cancelled with nothing charged since, then refunded: the key is full.
	if d, _ := lim.Peek(ctx, "k"); d.Remaining() != 1 {
		t.Errorf("after cancel and refund: %v, want 1 left", d)
	}
}

// In dry-run mode a booking never waits: one that does not fit now is
// admitted at once, uncharged, marked DryRunDenied; so is Wait.
func TestDryRunReserve(t *testing.T) {
	ctx := context.Background()
	fake := clock.NewFake(t0)
	lim, err := ratelimit.New(mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1}), memorystore.New[string](),
		ratelimit.WithClock(fake), ratelimit.WithDryRun())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		r, err := lim.Reserve(ctx, "k")
		if err != nil || !r.OK() || r.Delay() != 0 || r.Decision().DryRunDenied() != (i > 0) {
			t.Fatalf("Reserve %d = %v (%v), %v; want booked now, dry-run denied after the first", i, r.Decision(), r.OK(), err)
		}
	}
	r, err := lim.Reserve(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Errorf("Cancel of a dry run's unbooked admission: %v, want nil (nothing to give back)", err)
	}
	if d, err := lim.Wait(ctx, "k"); err != nil || !d.Allowed() {
		t.Fatalf("Wait = %v, %v; want admitted at once", d, err)
	}
	if d, _ := lim.Peek(ctx, "k"); d.Remaining() != 0 || d.RetryAfter() != time.Second {
		t.Errorf("only the first was charged: %v", d)
	}
}

// Failure policies decide a booking as they decide AllowN.
func TestReserveFailurePolicies(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		policy ratelimit.FailurePolicy
		ok     bool
		err    bool
	}{
		{ratelimit.FailOpen, true, false},
		{ratelimit.FailClosed, false, false},
		{ratelimit.FailLocal, true, false},
		{ratelimit.FailWithError, false, true},
	} {
		lim, err := ratelimit.New(mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1}), bookDownStore{},
			ratelimit.WithName("down"), ratelimit.WithFailurePolicy(c.policy), ratelimit.WithErrorHandler(func(error) {}))
		if err != nil {
			t.Fatal(err)
		}
		r, err := lim.Reserve(ctx, "k")
		if (err != nil) != c.err || (err == nil && r.OK() != c.ok) {
			t.Errorf("%v: Reserve = %v, %v; want ok %v, error %v", c.policy, r, err, c.ok, c.err)
		}
		if err != nil && !errors.Is(err, ratelimit.ErrStoreUnavailable) {
			t.Errorf("%v: %v, want ErrStoreUnavailable", c.policy, err)
		}
	}
}

// bookDownStore's tables fail every call as a Redis that is down does.
type bookDownStore struct{}

func (bookDownStore) Open([]store.Limit, clock.Clock) (store.Table[string], error) {
	return bookDownTable{}, nil
}

type bookDownTable struct{}

var errBookDown = fmt.Errorf("%w: connection refused", store.ErrUnavailable)

func (bookDownTable) Take(context.Context, string, int64, int64, []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{}, errBookDown
}
func (bookDownTable) Peek(context.Context, string, int64, []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{}, errBookDown
}
func (bookDownTable) Reset(context.Context, string) error { return errBookDown }
func (bookDownTable) Book(context.Context, string, int64, int64, int64, []algorithm.Result) (algorithm.Result, store.Booking, bool, error) {
	return algorithm.Result{}, store.Booking{}, false, errBookDown
}
func (bookDownTable) Cancel(context.Context, string, int64, store.Booking) error { return errBookDown }
func (bookDownTable) Undo(context.Context, string, int64, store.Booking) (int64, error) {
	return 0, errBookDown
}
func (bookDownTable) Refund(context.Context, string, int64, int64, []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{}, errBookDown
}

// Cancel of a reservation already due gives nothing back and leaves the
// handle to Refund, which gives the admission back: a Wait whose context
// ends just after the booking fell due cancels it, and the caller may still
// refund the work it did not do.
func TestCancelDueKeepsRefund(t *testing.T) {
	ctx := context.Background()
	for _, delay := range []time.Duration{0, time.Second} {
		t.Run(fmt.Sprint("due in ", delay), func(t *testing.T) {
			fake := clock.NewFake(t0)
			lim, err := ratelimit.New(mustBucket(t, tokenbucket.Config{Capacity: 2, Rate: 1}), memorystore.New[string](),
				ratelimit.WithClock(fake))
			if err != nil {
				t.Fatal(err)
			}
			if delay > 0 { // spend the bucket, so that the booking waits
				if d, err := lim.AllowN(ctx, "k", 2); err != nil || !d.Allowed() {
					t.Fatalf("AllowN(2) = %v, %v", d, err)
				}
			}
			r, err := lim.ReserveN(ctx, "k", 1, -1)
			if err != nil || !r.OK() || r.Delay() != delay {
				t.Fatalf("ReserveN = %v (ok %v, delay %v), %v; want booked in %v", r.Decision(), r.OK(), r.Delay(), err, delay)
			}
			fake.Advance(delay)
			before, _ := lim.Peek(ctx, "k")
			if err := r.Cancel(ctx); err != nil {
				t.Fatal(err)
			}
			if d, _ := lim.Peek(ctx, "k"); d.Remaining() != before.Remaining() {
				t.Fatalf("after Cancel of a due booking: %v; want %d left, as before (nothing given back)", d, before.Remaining())
			}
			for i := range 2 { // the second Refund gives nothing
				if _, err := r.Refund(ctx); err != nil {
					t.Fatal(err)
				}
				if d, _ := lim.Peek(ctx, "k"); d.Remaining() != before.Remaining()+1 {
					t.Errorf("after Refund %d: %v; want %d left (the admission given back once)", i+1, d, before.Remaining()+1)
				}
			}
		})
	}
}

// A Reservation's Decision is the booking as made until it is due, then as
// it admits the request, as WaitN returns it; of several limits, each
// limit's likewise.
func TestReservationDecisionOnceDue(t *testing.T) {
	ctx := context.Background()
	fake := clock.NewFake(t0)
	bucket := mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1})
	hour := mustBucket(t, tokenbucket.Config{Capacity: 100, Rate: 100.0 / 3600})
	one, err := ratelimit.New(bucket, memorystore.New[string](), ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	two, err := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
		{Name: "second", Algorithm: bucket}, {Name: "hour", Algorithm: hour}}, ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	for name, lim := range map[string]*ratelimit.Limiter[string]{"one limit": one, "two limits": two} {
		if _, err := lim.Allow(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		r, err := lim.ReserveN(ctx, "k", 1, -1)
		if err != nil || !r.OK() || r.Delay() != time.Second {
			t.Fatalf("%s: ReserveN = %v, %v; want booked a second ahead", name, r, err)
		}
		booked := r.Decision()
		if booked.Allowed() || booked.RetryAfter() != time.Second {
			t.Errorf("%s: before it is due: %v, want RetryAfter 1s, not yet allowed", name, booked)
		}
		fake.Advance(time.Second)
		due := r.Decision()
		if !due.Allowed() || due.RetryAfter() != 0 || due.ResetAfter() != booked.ResetAfter()-time.Second {
			t.Errorf("%s: once due: %v, want allowed, RetryAfter 0, ResetAfter %v", name, due, booked.ResetAfter()-time.Second)
		}
		limits := due.Limits()
		if lim == one {
			limits = []ratelimit.Decision{due}
		}
		if got, want := len(limits), len(lim.Limits()); got != want {
			t.Fatalf("%s: %d limits' decisions, want %d", name, got, want)
		}
		for i, l := range limits {
			if !l.Allowed() || l.RetryAfter() != 0 {
				t.Errorf("%s: limit %d once due: %v, want allowed, RetryAfter 0", name, i, l)
			}
		}
		if booked.Allowed() {
			t.Errorf("%s: the decision taken before it was due changed: %v", name, booked)
		}
	}
}
