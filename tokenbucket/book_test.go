package tokenbucket_test

import (
	"math"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// book is algorithm.CheckBook at the instant algorithm.Earliest finds,
// checked against its contract at a few instants around it.
func book(t *testing.T, b algorithm.Booker, s algorithm.State, now, cost int64) (algorithm.State, algorithm.Result, int64) {
	t.Helper()
	act := algorithm.Earliest(b, s, now, cost)
	next, r, err := algorithm.CheckBook(b, s, now, act, cost, []int64{now, act - 1, act, act + 1, act + 8*d})
	if err != nil {
		t.Fatal(err)
	}
	return next, r, act
}

func TestBucketBook(t *testing.T) {
	b := mustNew(t, tokenbucket.Config{Capacity: 3, Rate: 2}) // a token every 2d
	empty, _ := b.Take(b.Init(algorithm.State{}, t0), t0, 3)

	t.Run("a booking is due when its cost is back", func(t *testing.T) {
		s, r, act := book(t, b, empty, t0, 1)
		if act != t2 || r.Remaining != 0 || r.RetryAfter != 2*d || r.ResetAfter < 8*d || r.ResetAfter > 8*d+1 {
			t.Fatalf("got %+v due at t0%+d, want due at t2, nothing left, full at t8 (or a µs after)", r, act-t0)
		}
		// The token of t2 is the booking's: a Take of 1 waits for t4's.
		if p := b.Peek(s, t1, 1); p.Remaining != 0 || p.RetryAfter < 3*d || p.RetryAfter > 3*d+1 {
			t.Fatalf("Peek at t1: got %+v, want nothing left until t4", p)
		}
		if p := b.Peek(s, t2, 1); p.Allowed() {
			t.Fatalf("Peek at t2, when the booking is due: got %+v, want denied", p)
		}
		// Nothing charged after it: the whole booking comes back, until it
		// is due.
		for _, c := range []struct{ now, want int64 }{{t0, 1}, {t1, 1}, {t2 - 1, 1}, {t2, 0}, {t4, 0}} {
			if got := b.Unused(s, c.now, act, 1); got != c.want {
				t.Errorf("Unused at t0%+d: got %d, want %d", c.now-t0, got, c.want)
			}
		}
	})

	t.Run("queued bookings are due a token's time apart, to the µs", func(t *testing.T) {
		// One a second: waiters queue at 1s, 2s, 3s… A margin against
		// rounding in Book once made them 1s, 2s+1µs, 3s+2µs.
		one := mustNew(t, tokenbucket.Config{Capacity: 1, Rate: 1})
		s, _ := one.Take(one.Init(algorithm.State{}, t0), t0, 1)
		for i := int64(1); i <= 50; i++ {
			var act int64
			if s, _, act = book(t, one, s, t0, 1); act != t0+i*sec {
				t.Fatalf("booking %d: due at t0%+dµs, want t0+%ds", i, act-t0, i)
			}
		}
	})

	t.Run("a booking due now is a take", func(t *testing.T) {
		s, _ := b.Take(b.Init(algorithm.State{}, t0), t0, 1)
		booked, br := b.Book(s, t1, t1, 1)
		taken, tr := b.Take(s, t1, 1)
		if booked != taken || br != tr {
			t.Fatalf("Book at t1 for t1: got %+v %+v, Take %+v %+v", booked, br, taken, tr)
		}
	})

	t.Run("cancelling the first of two bookings gives back what the second did not use", func(t *testing.T) {
		s, _, first := book(t, b, empty, t0, 2)         // due at t4
		s, _, second := book(t, b, s, t0, 1)            // due at t6
		if got := b.Unused(s, t0, first, 2); got != 1 { // 2 − 1
			t.Errorf("Unused of the first: got %d, want 1", got)
		}
		if got := b.Unused(s, t0, second, 1); got != 1 {
			t.Errorf("Unused of the second: got %d, want all of it", got)
		}
		// Given back, the second still fits when it is due.
		s, _, _, err := algorithm.CheckUndo(b, s, t0, first, 2, 2, false, []int64{t0, first, second})
		if err != nil {
			t.Fatal(err)
		}
		if p := b.Peek(s, second, 1); !p.Allowed() {
			t.Errorf("after the cancel, the second booking no longer fits at t0%+d: %+v", second-t0, p)
		}

		// A later booking larger than the first uses all of it.
		s, _, first = book(t, b, empty, t0, 1)
		s, _, _ = book(t, b, s, t0, 3)
		if got := b.Unused(s, t0, first, 1); got != 0 {
			t.Errorf("Unused of a booking of 1 followed by one of 3: got %d, want 0", got)
		}
	})

	t.Run("a refund never gives more than a fresh bucket", func(t *testing.T) {
		s, _ := b.Take(b.Init(algorithm.State{}, t0), t0, 1)
		s, r, err := algorithm.CheckRefund(b, s, t1, 5, []int64{t1, t2, t8})
		if err != nil {
			t.Fatal(err)
		}
		if r != algorithm.Fresh(3) {
			t.Errorf("Refund of 5 to a bucket missing less: got %+v, want %+v", r, algorithm.Fresh(3))
		}
		if again, r := b.Refund(s, t2, 1); again != s || r != algorithm.Fresh(3) {
			t.Errorf("Refund to a full bucket: got %+v %+v, want the state unchanged, fresh", again, r)
		}
		// A refund pays back a debt first.
		s, _, _ = book(t, b, empty, t0, 3) // due at t6: 3 in debt
		if _, r, err := algorithm.CheckRefund(b, s, t0, 2, []int64{t0, t6}); err != nil || r.Remaining != 0 {
			t.Errorf("Refund of 2 to a bucket 3 in debt: got %+v, %v; want none left", r, err)
		}
	})

	t.Run("a bucket in debt", func(t *testing.T) {
		s, _, _ := book(t, b, empty, t0, 3) // -3 at t0: full at t12
		// The clock stepping back holds the bucket still, as for any state.
		for _, now := range []int64{t0 - d, t0, t2, t6 - 1, t6, t10, t12} {
			if _, _, err := algorithm.CheckTake(b, s, now, 1); err != nil {
				t.Error(err)
			}
			p := b.Peek(s, now, 1)
			if p.Remaining < 0 {
				t.Errorf("Peek at t0%+d: got %+v, want Remaining at least 0", now-t0, p)
			}
		}
	})
}

func TestIntervalBucketBook(t *testing.T) {
	// Capacity 10, one token per second (4d).
	b := mustNewInterval(t, tokenbucket.IntervalConfig{Capacity: 10, Tokens: 1, Interval: time.Second})
	full := b.Init(algorithm.State{}, t0)
	empty, _ := b.Take(full, t0, 10)

	t.Run("bookings in debt, and cancelling the first", func(t *testing.T) {
		s, r, first := book(t, b, empty, t0, 3)
		if first != t12 || r != no(0, 12*d, 52*d) || s != (algorithm.State{N0: -3, N1: t0}) {
			t.Fatalf("booking 3: got %+v %+v due at t0%+d, want 3 in debt since t0, due at t12, full at t0+52d", s, r, first-t0)
		}
		s, _, second := book(t, b, s, t0, 1)
		if second != t16 {
			t.Fatalf("booking 1 more: due at t0%+d, want t16", second-t0)
		}
		// Not x/time/rate's 3 − 1: the refills are whole steps, which may
		// fill the bucket before a later booking is due and absorb this
		// one's units (IntervalBucket.Unused).
		if got := b.Unused(s, t0, first, 3); got != 0 {
			t.Errorf("Unused of the first: got %d, want 0 (a booking follows it)", got)
		}
		if got := b.Unused(s, t0, second, 1); got != 1 {
			t.Errorf("Unused of the second: got %d, want 1", got)
		}
		if got := b.Unused(s, t12, first, 3); got != 0 {
			t.Errorf("Unused of the first once due: got %d, want 0", got)
		}
	})

	t.Run("a full bucket booked for later keeps act's schedule", func(t *testing.T) {
		// Full at t0, 2 booked for t5: a Take at t5 would leave 8 since t5,
		// the next token at t9. The booked bucket is dated t0−3d, the
		// refill before t0 on that schedule, with two tokens owed: 6.
		act := int64(t0 + 5*d)
		s, r, err := algorithm.CheckBook(b, full, t0, act, 2, []int64{t0, t1, act, t0 + 9*d, t0 + 13*d})
		if err != nil {
			t.Fatal(err)
		}
		if s != (algorithm.State{N0: 6, N1: t0 - 3*d}) || r != (algorithm.Result{Remaining: 6, RetryAfter: 5 * d, ResetAfter: 13 * d}) {
			t.Fatalf("got %+v %+v, want 6 since t0−3d, full at t0+13d", s, r)
		}
		taken, _ := b.Take(full, act, 2)
		for _, now := range []int64{act, t0 + 9*d - 1, t0 + 9*d, t0 + 13*d} {
			if got, want := b.Peek(s, now, 1), b.Peek(taken, now, 1); got != want {
				t.Errorf("Peek at t0%+d: booked %+v, Take at act %+v", now-t0, got, want)
			}
		}
		if got := b.Unused(s, t1, act, 2); got != 2 {
			t.Errorf("Unused: got %d, want all of it", got)
		}
	})

	t.Run("refunds", func(t *testing.T) {
		s, _ := b.Take(full, t0, 4)
		s, r, err := algorithm.CheckRefund(b, s, t2, 3, []int64{t2, t4, t16})
		if err != nil || r != ok(9, 2*d) {
			t.Fatalf("Refund of 3 to 6: got %+v, %v; want 9, full at t4", r, err)
		}
		if _, r, err := algorithm.CheckRefund(b, s, t2, math.MaxInt64, []int64{t2, t4}); err != nil || r != ok(10, 0) {
			t.Fatalf("Refund of MaxInt64: got %+v, %v; want full", r, err)
		}
		if again, _ := b.Refund(full, t2, 1); again != full {
			t.Fatalf("Refund to a full bucket: got %+v, want the state unchanged", again)
		}
	})
}
