package slidingwindow_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/steptest"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
)

// TestBookHistories replays random histories of Take, Peek, Book, Refund
// and Unused, with clocks that step back, checking every call against its
// contract, and, until a history's first refund, that no aligned window
// has more than Limit admitted or booked into it (a clock that stepped
// back counts in the later window, as a booking due in an earlier window
// than the one counted does).
func TestBookHistories(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 5))
	for seq := range 600 {
		limit := []int64{1, 2, 3, 10, 1 << 30, algorithm.MaxLimit}[seq%6]
		window := []int64{1, 7, 1000, sec, algorithm.MaxDuration}[seq/6%5]
		w := mustNew(t, slidingwindow.Config{Limit: limit, Window: time.Duration(window) * time.Microsecond})
		counts := map[int64]int64{}
		last := int64(-1 << 62)
		refunded := false
		steptest.Histories(t, w, window, t0+rng.Int64N(window), rng, 60, func(now, due, cost int64) {
			if now == 0 && due == 0 {
				refunded = true
				return
			}
			if refunded {
				return
			}
			// A window counted more than algorithm.MaxDuration ahead of
			// now's is forgotten: a booking almost that far ahead and a
			// clock stepping back get there.
			if last > algorithm.FloorDiv(now, window)+algorithm.MaxDuration/window {
				clear(counts)
				last = -1 << 62
			}
			i := max(algorithm.FloorDiv(due, window), last)
			last = max(last, i)
			if counts[i] += cost; counts[i] > limit {
				t.Fatalf("sequence %d (limit %d, window %dµs): window %d holds %d", seq, limit, window, i, counts[i])
			}
		})
	}
}

// TestEarliestMonotone checks that the estimate of a state never grows as
// time passes, bookings or not: the first instant from a later one at
// which a cost fits is the later of that instant and the first from now
// (what a script's default --@earliest computes).
func TestEarliestMonotone(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 6))
	for seq := range 300 {
		limit := []int64{1, 3, 10, 1 << 30}[seq%4]
		window := []int64{1, 7, 1000, sec}[seq/4%4]
		w := mustNew(t, slidingwindow.Config{Limit: limit, Window: time.Duration(window) * time.Microsecond})
		now := t0 + rng.Int64N(window)
		s := w.Init(algorithm.State{}, now)
		for range 40 {
			now += rng.Int64N(window/2+1) - rng.Int64N(window/8+1)
			c := 1 + rng.Int64N(limit)
			if rng.IntN(2) == 0 {
				s, _ = w.Take(s, now, c)
			} else if act := algorithm.Earliest(w, s, now+rng.Int64N(2*window), c); act-now <= algorithm.MaxDuration {
				s, _ = w.Book(s, now, act, c)
			}
			c = 1 + rng.Int64N(limit)
			first := now + w.Peek(s, now, c).RetryAfter
			for range 8 {
				from := now + rng.Int64N(4*window)
				if got, want := algorithm.Earliest(w, s, from, c), max(from, first); got != want {
					t.Fatalf("limit %d, window %d, state %+v: Earliest from now%+d of %d: got now%+d, want now%+d",
						limit, window, s, from-now, c, got-now, want-now)
				}
			}
		}
	}
}

// TestBookAhead books three windows ahead of an empty counter: the
// booking counts in its window, the windows before it count as full, and
// the one just before it as its previous window.
func TestBookAhead(t *testing.T) {
	w := mustNew(t, slidingwindow.Config{Limit: 4, Window: time.Second})
	s := w.Init(algorithm.State{}, t0)
	act := algorithm.Earliest(w, s, t12+1, 2)
	if act != t12+1 {
		t.Fatalf("Earliest: got t0%+d, want t12+1", act-t0)
	}
	s, r, err := algorithm.CheckBook(w, s, t1, act, 2, []int64{t1, t4, t8, t12, act, t12 + 4*d, t12 + 8*d})
	if err != nil {
		t.Fatal(err)
	}
	if want := (algorithm.Result{Remaining: 0, RetryAfter: act - t1, ResetAfter: t12 + 8*d - t1}); r != want {
		t.Fatalf("Book: got %+v, want %+v", r, want)
	}
	for i, st := range []step{
		// 6 + 4 from the booking's point of view: 2 + ⌈4·(4d−e)/4d⌉ ≤ 3
		// from e = 3d in [t12, t16).
		{t1, 1, no(0, t12+3*d-t1, t12+8*d-t1)},
		{t8, 1, no(0, t12+3*d-t8, t12+8*d-t8)},
		{t12, 1, no(0, 3*d, 8*d)},
		{t12 + 3*d, 1, ok(1, 5*d)}, // 2 + 1
		{t12 + 3*d, 2, no(1, d, 5*d)},
		{t12 + 4*d, 2, ok(2, 4*d)},
	} {
		if got := w.Peek(s, st.At, st.Cost); got != st.Want {
			t.Errorf("step %d: Peek(t0%+d, %d): got %+v, want %+v", i, st.At-t0, st.Cost, got, st.Want)
		}
	}
}

// TestBookSkipsRemainder books 3 into a window with 1 left: the booking
// goes to the next window, the 1 left is skipped, and the window before
// the booking counts as full there.
func TestBookSkipsRemainder(t *testing.T) {
	w := mustNew(t, slidingwindow.Config{Limit: 4, Window: time.Second})
	s, _ := w.Take(w.Init(algorithm.State{}, t0), t0, 3)
	// ⌈3·(4d−e)/4d⌉ ≤ 1 from e = ⌈8d/3⌉ in [t4, t8).
	act := algorithm.Earliest(w, s, t1, 3)
	if act != t4+666_667 {
		t.Fatalf("Earliest: got t0%+d, want t4+666,667", act-t0)
	}
	s, r, err := algorithm.CheckBook(w, s, t1, act, 3, []int64{t1, t3, t4, t5, act, t8, t12})
	if err != nil {
		t.Fatal(err)
	}
	if want := (algorithm.Result{Remaining: 0, RetryAfter: act - t1, ResetAfter: t12 - t1}); r != want {
		t.Fatalf("Book: got %+v, want %+v", r, want)
	}
	// At act the booked 3 and ⌈4/3⌉ of the skipped window, where a Take
	// at act would leave 3 + ⌈3/3⌉ = 4: full until the window ends.
	if got, want := w.Peek(s, act, 1), no(0, t8-act, t12-act); got != want {
		t.Errorf("Peek at the booking: got %+v, want %+v", got, want)
	}
	if got, want := w.Peek(s, t3, 1), no(0, t8-t3, t12-t3); got != want {
		t.Errorf("Peek before the booking: got %+v, want %+v (the remainder is skipped)", got, want)
	}
}

// TestRefundWithBookings refunds with a booking pending: the booked units
// go first, then what the window of now counts, then the previous one's.
func TestRefundWithBookings(t *testing.T) {
	w := mustNew(t, slidingwindow.Config{Limit: 4, Window: time.Second})
	s, _ := w.Take(w.Init(algorithm.State{}, t0), t0, 2)
	s, _ = w.Take(s, t4, 2)
	if act := algorithm.Earliest(w, s, t5, 2); act != t8 {
		t.Fatalf("Earliest: got t0%+d, want t8", act-t0)
	}
	s, _ = w.Book(s, t5, t8, 2) // the pointer at 6, skipping 2; 2 before
	later := []int64{t5, t6, t8, t8 + d, t12}
	// By key, nothing while the booking is not due.
	before := w.Peek(s, t5, 1)
	if next, r, err := algorithm.CheckRefund(w, s, t5, 3, later); err != nil || next != s || r != before {
		t.Fatalf("Refund by key before the booking is due: got %+v %+v, %v; want nothing given back (%+v)", next, r, err, before)
	}
	// Due at t8: the 2 booked are the count, the 4 of [t4, t8) the
	// previous window's; 6 given back leave a fresh key.
	var r algorithm.Result
	var err error
	for _, n := range []int64{2, 4} {
		if s, r, err = algorithm.CheckRefund(w, s, t8, n, later[2:]); err != nil {
			t.Fatal(err)
		}
	}
	if r != algorithm.Fresh(4) {
		t.Errorf("refund of 6 at t8: got %+v, want fresh", r)
	}
}

// TestRefundNeverFresher refunds more than was ever charged, at every
// instant of a history: never more room than a fresh key.
func TestRefundNeverFresher(t *testing.T) {
	w := mustNew(t, slidingwindow.Config{Limit: 5, Window: time.Second})
	s := w.Init(algorithm.State{}, t0)
	fresh := w.Init(algorithm.State{}, t0)
	for i := range int64(40) {
		now := t0 + i*d/3
		s, _ = w.Take(s, now, 1+i%3)
		if i%4 == 0 {
			s, _ = w.Book(s, now, algorithm.Earliest(w, s, now+d, 2), 2)
		}
		var err error
		if s, _, err = algorithm.CheckRefund(w, s, now, 7, []int64{now, now + d, now + 5*d}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []int64{1, 5} {
			if got, f := w.Peek(s, now, c), w.Peek(fresh, now, c); got.Remaining > f.Remaining || got.Allowed() && !f.Allowed() {
				t.Fatalf("at t0%+d: Peek of %d gives %+v, a fresh key %+v", now-t0, c, got, f)
			}
		}
	}
}

// TestUndoAfterClockBack undoes, exactly, a booking made by a clock that
// stepped back two windows before the one counted: its unit was charged
// into the window counted, which is still the window of now, so the undo
// gives it back, as the Redis script does (CI found fixedwindow's Go and
// Lua apart here: Go read the window of act).
func TestUndoAfterClockBack(t *testing.T) {
	w := mustNew(t, slidingwindow.Config{Limit: 2, Window: time.Microsecond})
	s, _ := w.Take(w.Init(algorithm.State{}, t0), t0, 1)
	s, r := w.Book(s, t0-2, t0-2, 1) // a clock 2µs behind
	if !r.Allowed() {
		t.Fatalf("Book at t0-2µs: %+v", r)
	}
	_, given, _ := w.Undo(algorithm.CloneState(s), t0, t0-2, 1, 1, true)
	if given != 1 {
		t.Fatalf("exact Undo at t0 of the unit charged into the window of t0: gave %d, want 1", given)
	}
}
