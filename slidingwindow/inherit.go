package slidingwindow

import (
	"math"
	"math/bits"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

var _ algorithm.Inheritor = (*Window)(nil)

// Inherit returns s, written under from (a counter of limit L = from.P0
// and window W = from.P1), as this counter's state at now (design
// state-format.md §2.5).
//
// When W is this counter's Window, the windows are the same: AsIs keeps
// the state as it is (the estimate at every instant is the old one, and
// what remains is Limit less it, never below 0), and Proportional scales
// both counts, min(⌈n·Limit/L⌉, Limit), rounded toward more used.
//
// Otherwise the old estimate at now, u (the count plus the previous
// window's share, as the old counter computes it), becomes the count of
// this counter's window of now, with nothing before it: min(u, Limit)
// under AsIs, min(⌈u·Limit/L⌉, Limit) under Proportional. The estimate is
// continuous at now (up to the clamp), and it is gone two windows later.
//
// Every product is exact (128 bits). The mins under Proportional only act
// on counts above L, which only a state carried as-is from a larger limit
// holds. Any rule but Proportional is AsIs.
//
// A state under a from of another Kind, with a limit or a window outside
// the ranges New accepts, or a count outside [0, algorithm.MaxLimit], is
// taken as fully used: Limit counted in the window of now. A from equal
// to the counter's own Tag gives s as it is.
func (w *Window) Inherit(from algorithm.Tag, s algorithm.State, now int64, rule algorithm.Rule) algorithm.State {
	if from == w.Tag() {
		return algorithm.State{N0: s.N0, N1: s.N1, N2: s.N2}
	}
	index := algorithm.FloorDiv(now, w.window)
	limit, length := from.P0, from.P1
	if from.Kind != algorithm.KindSlidingWindow || limit < 1 || limit > algorithm.MaxLimit ||
		length < 1 || length > algorithm.MaxDuration ||
		s.N1 < 0 || s.N1 > algorithm.MaxLimit || s.N2 < 0 || s.N2 > algorithm.MaxLimit {
		return algorithm.State{N0: index, N1: w.limit}
	}
	carry := func(n int64) int64 {
		if rule != algorithm.Proportional {
			return min(n, w.limit)
		}
		return int64(min(mulDivUp(uint64(n), uint64(w.limit), uint64(limit)), uint64(w.limit)))
	}
	if length == w.window {
		if rule != algorithm.Proportional {
			return algorithm.State{N0: s.N0, N1: s.N1, N2: s.N2}
		}
		return algorithm.State{N0: s.N0, N1: carry(s.N1), N2: carry(s.N2)}
	}
	old := Window{limit: limit, window: length}
	return algorithm.State{N0: index, N1: carry(old.used(old.at(s, now)))}
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
