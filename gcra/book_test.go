package gcra_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// book is algorithm.CheckBook at the instant algorithm.Earliest finds,
// checked against its contract at a few instants around it.
func book(t *testing.T, m *gcra.Meter, s algorithm.State, now, cost int64) (algorithm.State, algorithm.Result, int64) {
	t.Helper()
	act := algorithm.Earliest(m, s, now, cost)
	next, r, err := algorithm.CheckBook(m, s, now, act, cost, []int64{now, act - 1, act, act + 1, act + 12*d})
	if err != nil {
		t.Fatal(err)
	}
	return next, r, act
}

func TestMeterBook(t *testing.T) {
	// Bursts of 3, one unit every 2d.
	m := mustNew(t, gcra.Config{Burst: 3, Every: 2 * d * time.Microsecond})
	used, _ := m.Take(m.Init(algorithm.State{}, t0), t0, 3) // TAT t6

	t.Run("a booking moves TAT as a Take when it is due", func(t *testing.T) {
		s, r, act := book(t, m, used, t0, 1)
		if act != t2 || s.N0 != t0+8*d || r != (algorithm.Result{Remaining: 0, RetryAfter: 2 * d, ResetAfter: 8 * d}) {
			t.Fatalf("got %+v %+v due at t0%+d, want TAT t8, due at t2", s, r, act-t0)
		}
		for _, c := range []struct{ now, want int64 }{{t0, 1}, {t2 - 1, 1}, {t2, 0}} {
			if got := m.Unused(s, c.now, act, 1); got != c.want {
				t.Errorf("Unused at t0%+d: got %d, want %d", c.now-t0, got, c.want)
			}
		}
	})

	t.Run("cancelling the first of two bookings gives back what the second did not use", func(t *testing.T) {
		s, _, first := book(t, m, used, t0, 2) // due at t4, TAT t10
		s, _, second := book(t, m, s, t0, 1)   // due at t6, TAT t12
		if first != t4 || second != t6 || s.N0 != t12 {
			t.Fatalf("bookings due at t0%+d and t0%+d, TAT t0%+d: want t4, t6, t12", first-t0, second-t0, s.N0-t0)
		}
		if got := m.Unused(s, t0, first, 2); got != 1 {
			t.Errorf("Unused of the first: got %d, want 2 − 1", got)
		}
		if got := m.Unused(s, t0, second, 1); got != 1 {
			t.Errorf("Unused of the second: got %d, want all of it", got)
		}
		s, _, _ = book(t, m, s, t0, 3) // due at t12, TAT t18
		if got := m.Unused(s, t0, first, 2); got != 0 {
			t.Errorf("Unused of the first after 3 more: got %d, want 0", got)
		}
	})

	t.Run("a refund never gives more than a key at rest", func(t *testing.T) {
		s, _, _ := book(t, m, used, t0, 3) // TAT t12, due at t6
		if next, _ := m.Refund(s, t0, 5); next.N0 != t12 {
			t.Fatalf("Refund by key before the booking is due: TAT t0%+d, want t12 (nothing)", next.N0-t0)
		}
		s, r, err := algorithm.CheckRefund(m, s, t6, 2, []int64{t6, t6 + 2*d, t12})
		if err != nil || s.N0 != t6+2*d || r.Remaining != 2 {
			t.Fatalf("Refund of 2 of 6 units at t6: got %+v %+v, %v; want TAT t6+2d, 2 left", s, r, err)
		}
		s, r, err = algorithm.CheckRefund(m, s, t6+d, math.MaxInt64, []int64{t6 + d, t10})
		if err != nil || s.N0 != t6+d || r != algorithm.Fresh(3) {
			t.Fatalf("Refund of MaxInt64: got %+v %+v, %v; want TAT now, at rest", s, r, err)
		}
		fresh := m.Init(algorithm.State{}, t0)
		if again, r := m.Refund(fresh, t0, 1); again != fresh || r != algorithm.Fresh(3) {
			t.Fatalf("Refund to a key at rest: got %+v %+v, want it unchanged", again, r)
		}
	})
}

// TestBookSameAsTokenBucket books, refunds and cancels on a meter and on
// the continuous token bucket of the same burst and rate, with emission
// intervals of a power of two microseconds (exact in floating point, as
// in TestSameAsTokenBucket): cancellations must give back the same. A
// booked bucket may reach a count a µs after the meter (it owes a margin
// against rounding, see tokenbucket.Bucket.Book), so the test checks that
// it admits no more than the meter, and a µs later no less.
func TestBookSameAsTokenBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 7))
	for seq := range 300 {
		burst := []int64{1, 2, 5, 100}[seq%4]
		every := int64(1) << rng.IntN(21)
		m := mustNew(t, gcra.Config{Burst: burst, Every: time.Duration(every) * time.Microsecond})
		b, err := tokenbucket.New(tokenbucket.Config{Capacity: burst, Rate: 1e6 / float64(every)})
		if err != nil {
			t.Fatal(err)
		}
		now := int64(t0) + rng.Int64N(sec)
		sm, sb := m.Init(algorithm.State{}, now), b.Init(algorithm.State{}, now)
		var acts, costs []int64
		for i := range 100 {
			now += rng.Int64N(2 * every)
			cost := 1 + rng.Int64N(burst)
			switch rng.IntN(3) {
			case 0:
				act := algorithm.Earliest(m, sm, now, cost)
				if ab := algorithm.Earliest(b, sb, now, cost); ab != act && ab != act+1 {
					t.Fatalf("step %d: earliest for %d: gcra t0%+d, tokenbucket t0%+d", i, cost, act-t0, ab-t0)
				}
				act = algorithm.Earliest(b, sb, now, cost) // both admit it then
				sm, _ = m.Book(sm, now, act, cost)
				sb, _ = b.Book(sb, now, act, cost)
				acts, costs = append(acts, act), append(costs, cost)
			case 1:
				n := 1 + rng.Int64N(burst)
				sm, _ = m.Refund(sm, now, n)
				sb, _ = b.Refund(sb, now, n)
			default:
				if len(acts) == 0 {
					continue
				}
				j := rng.IntN(len(acts))
				if got, want := m.Unused(sm, now, acts[j], costs[j]), b.Unused(sb, now, acts[j], costs[j]); got != want {
					t.Fatalf("step %d: unused of %d due at t0%+d: gcra %d, tokenbucket %d", i, costs[j], acts[j]-t0, got, want)
				}
			}
			for _, c := range []int64{1, burst} {
				pm, pb, next := m.Peek(sm, now, c), b.Peek(sb, now, c), b.Peek(sb, now+1, c)
				if pb.Remaining > pm.Remaining || pb.Allowed() && !pm.Allowed() {
					t.Fatalf("step %d: peek of %d: tokenbucket %+v admits more than gcra %+v", i, c, pb, pm)
				}
				if next.Remaining < pm.Remaining || pm.Allowed() && !next.Allowed() {
					t.Fatalf("step %d: peek of %d: tokenbucket a µs later %+v admits less than gcra %+v", i, c, next, pm)
				}
			}
		}
	}
}
