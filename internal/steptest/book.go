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
	s, err := algorithm.CheckInit(b, algorithm.State{}, start)
	if err != nil {
		t.Fatal(err)
	}
	h := &history{t: t, b: b, limit: b.Limit(), window: window, rng: rng, onTake: onTake, s: s, now: start}
	for range steps {
		h.advance()
		c := h.cost()
		h.exact(h.s, h.now, c, b.Peek(h.s, h.now, c))
		switch op := rng.IntN(10); {
		case op < 3:
			h.take(c)
		case op < 7:
			h.book(c)
		case op < 9:
			h.refund()
		default:
			h.unused()
		}
	}
}

// history is the state of one of Histories' random histories.
type history struct {
	t             *testing.T
	b             algorithm.Booker
	limit, window int64
	rng           *rand.Rand
	onTake        func(now, due, cost int64)
	s             algorithm.State
	now           int64
	books         []Booking
	ops           []string
}

// fail ends the test with the history's ops so far.
func (h *history) fail(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("limit %d, window %dµs, after %v: "+format, append([]any{h.limit, h.window, h.ops}, args...)...)
}

// exact checks that r, what Peek of s at at for cost reports, is exact
// to the microsecond.
func (h *history) exact(s algorithm.State, at, cost int64, r algorithm.Result) {
	h.t.Helper()
	b, limit := h.b, h.limit
	if r.Remaining < 0 || r.Remaining > limit || r.RetryAfter < 0 || r.ResetAfter < 0 {
		h.fail("Peek(%d, %d) gives %+v: out of range", at, cost, r)
	}
	if r.RetryAfter > 0 {
		if p := b.Peek(s, at+r.RetryAfter, cost); !p.Allowed() {
			h.fail("Peek(%d, %d) gives %+v, but the cost does not fit at RetryAfter: %+v", at, cost, r, p)
		}
		if p := b.Peek(s, at+r.RetryAfter-1, cost); p.Allowed() {
			h.fail("Peek(%d, %d) gives %+v, but the cost fits a µs before RetryAfter: %+v", at, cost, r, p)
		}
	}
	if p := b.Peek(s, at+r.ResetAfter, 1); p != algorithm.Fresh(limit) {
		h.fail("Peek(%d, %d) gives %+v, but the state is not fresh at ResetAfter: %+v", at, cost, r, p)
	}
	if r.ResetAfter > 0 {
		if p := b.Peek(s, at+r.ResetAfter-1, 1); p == algorithm.Fresh(limit) {
			h.fail("Peek(%d, %d) gives %+v, but the state is fresh a µs before ResetAfter", at, cost, r)
		}
	}
}

// cost returns a random cost: the limit, any, or a small one.
func (h *history) cost() int64 {
	switch h.rng.IntN(4) {
	case 0:
		return h.limit
	case 1:
		return 1 + h.rng.Int64N(h.limit)
	default:
		return 1 + h.rng.Int64N(min(h.limit, 3))
	}
}

// advance moves now: back, far ahead, onto a window's edge, or a little.
func (h *history) advance() {
	window := h.window
	switch h.rng.IntN(12) {
	case 0:
		h.now -= h.rng.Int64N(window + 1) // steps back
	case 1:
		h.now += h.rng.Int64N(3 * window)
	case 2:
		h.now = (algorithm.FloorDiv(h.now, window)+1)*window - h.rng.Int64N(2) // onto an edge
	default:
		h.now += h.rng.Int64N(window/3 + 2)
	}
}

// take takes c at now.
func (h *history) take(c int64) {
	h.ops = append(h.ops, "take")
	s, r, err := algorithm.CheckTake(h.b, h.s, h.now, c)
	if err != nil {
		h.fail("%v", err)
	}
	h.s = s
	if r.Allowed() && h.onTake != nil {
		h.onTake(h.now, h.now, c)
	}
}

// book books c from now or a later instant, unless the earliest instant
// it fits is more than algorithm.MaxDuration away.
func (h *history) book(c int64) {
	now, window := h.now, h.window
	from := now
	switch h.rng.IntN(4) {
	case 0:
		from += h.rng.Int64N(4 * window)
	case 1:
		from += h.rng.Int64N(window/4 + 1)
	}
	act := algorithm.Earliest(h.b, h.s, from, c)
	if act-now > algorithm.MaxDuration {
		return
	}
	h.ops = append(h.ops, "book")
	later := []int64{now, now + 1, act - 1, act, act + 1, act + window, act + 2*window, now + h.rng.Int64N(3*window+1)}
	for i := algorithm.FloorDiv(now, window); i <= algorithm.FloorDiv(act, window)+2 && len(later) < 24; i++ {
		later = append(later, i*window, i*window-1)
	}
	s, _, err := algorithm.CheckBook(h.b, h.s, now, act, c, later)
	if err != nil {
		h.fail("%v", err)
	}
	h.s = s
	h.exact(s, now, 1, h.b.Peek(s, now, 1))
	h.books = append(h.books, Booking{act, c})
	if h.onTake != nil {
		h.onTake(now, act, c)
	}
}

// refund refunds a random amount at now.
func (h *history) refund() {
	h.ops = append(h.ops, "refund")
	now, window := h.now, h.window
	n := h.cost()
	later := []int64{now, now + 1, now + window/2, now + window, now + 2*window, now + 3*window}
	s, r, err := algorithm.CheckRefund(h.b, h.s, now, n, later)
	if err != nil {
		h.fail("%v", err)
	}
	h.s = s
	h.exact(s, now, 1, r)
	if h.onTake != nil {
		h.onTake(0, 0, n)
	}
}

// unused checks the Unused of a booking made, at now.
func (h *history) unused() {
	h.ops = append(h.ops, "unused")
	if len(h.books) > 0 {
		bk := h.books[h.rng.IntN(len(h.books))]
		if _, err := algorithm.CheckUnused(h.b, h.s, h.now, bk.Act, bk.Cost); err != nil {
			h.fail("%v", err)
		}
	}
}
