package fixedwindow

import (
	"math"
	"math/bits"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

var _ algorithm.Inheritor = (*Window)(nil)

// Inherit returns s, written under from (a window of limit L = from.P0
// and length W = from.P1), as this window's state at now (design
// state-format.md §2.4). The count c of the old window is read as the old
// window does at now: 0 once that window has ended, or when it starts
// more than algorithm.MaxDuration after now's; of a fill pointer booked
// past the old window of now, its part in that window, at most L (the rest
// below). A count still running (or
// ahead of now, for a clock that stepped back) is carried into this
// window's window of now (into the same window when W is this window's
// length):
//
//	AsIs:         min(c, Limit)
//	Proportional: min(⌈c·Limit/L⌉, Limit)       rounded toward more used
//
// Its wait and its reset are then at most one Window. Units booked past
// the old window (a pointer above L) stay counted under either rule: the
// window they are carried into counts as full, and they count Limit in
// each window after it but the last, which holds the rest, as this window
// books them one by one, as far ahead as a window is read. A limit changed
// after a booking thus does not hand its units out a second time. Any rule
// but Proportional is AsIs.
//
// A state under a from of another Kind, with a limit or a length outside
// the ranges New accepts, or a count outside [0, 2·L] (no window books
// further), is taken as fully used: Limit counted in the window of now. A
// from equal to the window's own Tag gives s as it is.
func (w *Window) Inherit(from algorithm.Tag, s algorithm.State, now int64, rule algorithm.Rule) algorithm.State {
	if from == w.Tag() {
		return algorithm.State{N0: s.N0, N1: s.N1}
	}
	index := algorithm.FloorDiv(now, w.window)
	limit, length := from.P0, from.P1
	if from.Kind != Kind || limit < 1 || limit > algorithm.MaxLimit ||
		length < 1 || length > algorithm.MaxDuration || s.N1 < 0 || s.N1 > 2*limit {
		return algorithm.State{N0: index, N1: w.limit}
	}
	old := Window{limit: limit, window: length}
	i, c := old.at(s, now)
	base := index
	if length == w.window {
		base = i
	}
	if booked := c - limit; booked > 0 { // counted into the window after i's
		// The window was full and stays so; the units booked after it stay
		// counted, under either rule: Limit in each window but the last
		// (as this window books them), as far ahead as a window is read.
		full := min((booked-1)/w.limit, index+algorithm.MaxDuration/w.window-base)
		return algorithm.State{N0: base + full, N1: w.limit + min(booked-full*w.limit, w.limit)}
	}
	if c == 0 {
		return algorithm.State{N0: index}
	}
	if rule == algorithm.Proportional {
		c = int64(min(mulDivUp(uint64(c), uint64(w.limit), uint64(limit)), uint64(w.limit)))
	} else {
		c = min(c, w.limit)
	}
	return algorithm.State{N0: base, N1: c}
}

// mulDivUp returns ⌈a·b/c⌉ for c > 0, the product taken in 128 bits, or
// math.MaxUint64 when that does not fit in 64 bits.
func mulDivUp(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxUint64
	}
	q, r := bits.Div64(hi, lo, c)
	if r > 0 && q < math.MaxUint64 {
		q++
	}
	return q
}
