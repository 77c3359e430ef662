package steptest

import (
	"math/rand/v2"
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Booking is a booking a history made: cost due at Act.
type Booking struct{ Act, Cost int64 }

// Histories replays random histories of Take, Peek, Book, Refund and
// Unused on states of b, with instants around window (the algorithm's
// natural period, in µs) moving forward and stepping back, and checks
// every call against its contract (algorithm.CheckTake, CheckBook,
// CheckRefund, CheckUnused), every result's RetryAfter and ResetAfter for
// exactness (the cost fits at RetryAfter and not a µs before it; the state
// is fresh at ResetAfter and not a µs before), and, when onTake is not
// nil, calls it after every admitted Take or Book with the instant the
// admission is due at, and after every Refund with 0 and the amount asked.
// Bookings are due at the first instant the cost fits from now, or from a
// later instant (as a Policy's other limits ask), at most
// algorithm.MaxDuration after now.
func Histories(t *testing.T, b algorithm.Booker, window int64, start int64, rng *rand.Rand, steps int,
	onTake func(now, due, cost int64)) {
	t.Helper()
	limit := b.Limit()
	s, err := algorithm.CheckInit(b, algorithm.State{}, start)
	if err != nil {
		t.Fatal(err)
	}
	now := start
	var books []Booking
	var ops []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("limit %d, window %dµs, after %v: "+format, append([]any{limit, window, ops}, args...)...)
	}
	// exact checks that r, what Peek of s at at for cost reports, is
	// exact to the microsecond.
	exact := func(s algorithm.State, at, cost int64, r algorithm.Result) {
		t.Helper()
		if r.Remaining < 0 || r.Remaining > limit || r.RetryAfter < 0 || r.ResetAfter < 0 {
			fail("Peek(%d, %d) gives %+v: out of range", at, cost, r)
		}
		if r.RetryAfter > 0 {
			if p := b.Peek(s, at+r.RetryAfter, cost); !p.Allowed() {
				fail("Peek(%d, %d) gives %+v, but the cost does not fit at RetryAfter: %+v", at, cost, r, p)
			}
			if p := b.Peek(s, at+r.RetryAfter-1, cost); p.Allowed() {
				fail("Peek(%d, %d) gives %+v, but the cost fits a µs before RetryAfter: %+v", at, cost, r, p)
			}
		}
		if p := b.Peek(s, at+r.ResetAfter, 1); p != algorithm.Fresh(limit) {
			fail("Peek(%d, %d) gives %+v, but the state is not fresh at ResetAfter: %+v", at, cost, r, p)
		}
		if r.ResetAfter > 0 {
			if p := b.Peek(s, at+r.ResetAfter-1, 1); p == algorithm.Fresh(limit) {
				fail("Peek(%d, %d) gives %+v, but the state is fresh a µs before ResetAfter", at, cost, r)
			}
		}
	}
	cost := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return limit
		case 1:
			return 1 + rng.Int64N(limit)
		default:
			return 1 + rng.Int64N(min(limit, 3))
		}
	}
	for range steps {
		switch rng.IntN(12) {
		case 0:
			now -= rng.Int64N(window + 1) // steps back
		case 1:
			now += rng.Int64N(3 * window)
		case 2:
			now = (algorithm.FloorDiv(now, window)+1)*window - rng.Int64N(2) // onto an edge
		default:
			now += rng.Int64N(window/3 + 2)
		}
		c := cost()
		exact(s, now, c, b.Peek(s, now, c))
		var r algorithm.Result
		switch op := rng.IntN(10); {
		case op < 3: // Take
			ops = append(ops, "take")
			if s, r, err = algorithm.CheckTake(b, s, now, c); err != nil {
				fail("%v", err)
			}
			if r.Allowed() && onTake != nil {
				onTake(now, now, c)
			}
		case op < 7: // Book
			from := now
			switch rng.IntN(4) {
			case 0:
				from += rng.Int64N(4 * window)
			case 1:
				from += rng.Int64N(window/4 + 1)
			}
			act := algorithm.Earliest(b, s, from, c)
			if act-now > algorithm.MaxDuration {
				continue
			}
			ops = append(ops, "book")
			later := []int64{now, now + 1, act - 1, act, act + 1, act + window, act + 2*window, now + rng.Int64N(3*window+1)}
			for i := algorithm.FloorDiv(now, window); i <= algorithm.FloorDiv(act, window)+2 && len(later) < 24; i++ {
				later = append(later, i*window, i*window-1)
			}
			if s, r, err = algorithm.CheckBook(b, s, now, act, c, later); err != nil {
				fail("%v", err)
			}
			exact(s, now, 1, b.Peek(s, now, 1))
			books = append(books, Booking{act, c})
			if onTake != nil {
				onTake(now, act, c)
			}
		case op < 9: // Refund
			ops = append(ops, "refund")
			n := cost()
			later := []int64{now, now + 1, now + window/2, now + window, now + 2*window, now + 3*window}
			if s, r, err = algorithm.CheckRefund(b, s, now, n, later); err != nil {
				fail("%v", err)
			}
			exact(s, now, 1, r)
			if onTake != nil {
				onTake(0, 0, n)
			}
		default: // Unused of a booking made
			ops = append(ops, "unused")
			if len(books) > 0 {
				bk := books[rng.IntN(len(books))]
				if _, err := algorithm.CheckUnused(b, s, now, bk.Act, bk.Cost); err != nil {
					fail("%v", err)
				}
			}
		}
		_ = r
	}
}
