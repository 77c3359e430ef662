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
// The old state is first read as the old counter reads it at now, its
// count (a fill pointer, above L with bookings) clamped to 2·L first,
// which only an earlier release's state carried as-is from a larger limit
// exceeds; of the count, only the part in the window of now is carried,
// at most L (bookings beyond it: below).
//
// Units booked past the old counter's window of now (a pointer above L)
// stay counted under either rule: the window they are carried into (the
// same one when W is this counter's Window, else this counter's window of
// now, with nothing before it) counts as full, and they fill the windows
// after it as this counter books them one by one (Limit − 1 in each but
// the last, which holds the rest; one in every other window for a limit of
// 1), as far ahead as a window is read. A limit changed after a booking thus does not hand its
// units out a second time.
//
// When W is this counter's Window, the windows are the same: AsIs keeps
// the counts as they are (the estimate at every instant is the old one,
// and what remains is Limit less it, never below 0): a count above Limit
// moves to the previous window's place of the next window, read at now as
// the start of that window (as a clock that stepped back), which gives the
// same estimate at every instant. Proportional scales both counts,
// min(⌈n·Limit/L⌉, Limit), rounded toward more used.
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
// the ranges New accepts, a count outside [0, 2·algorithm.MaxLimit] or a
// previous count outside [0, algorithm.MaxLimit], is taken as fully used:
// Limit counted in the window of now. A from equal to the counter's own
// Tag gives s as it is.
func (w *Window) Inherit(from algorithm.Tag, s algorithm.State, now int64, rule algorithm.Rule) algorithm.State {
	if from == w.Tag() {
		return algorithm.State{N0: s.N0, N1: s.N1, N2: s.N2}
	}
	index := algorithm.FloorDiv(now, w.window)
	limit, length := from.P0, from.P1
	if from.Kind != Kind || limit < 1 || limit > algorithm.MaxLimit ||
		length < 1 || length > algorithm.MaxDuration ||
		s.N1 < 0 || s.N1 > 2*algorithm.MaxLimit || s.N2 < 0 || s.N2 > algorithm.MaxLimit {
		return algorithm.State{N0: index, N1: w.limit}
	}
	carry := func(n int64) int64 {
		if rule != algorithm.Proportional {
			return min(n, w.limit)
		}
		return int64(min(mulDivUp(uint64(n), uint64(w.limit), uint64(limit)), uint64(w.limit)))
	}
	old := Window{limit: limit, window: length}
	s.N1 = min(s.N1, 2*limit)
	v := old.at(s, now)
	booked := max(v.count-limit, 0) // counted into the window after v's
	v.count = min(v.count, limit)
	if booked > 0 {
		// The window was full and stays so; the units booked after it stay
		// counted, under either rule: Limit in each window but the last
		// (as this counter books them one by one), as far ahead as a
		// window is read.
		base, prev := index, int64(0)
		if length == w.window {
			base, prev = v.index, v.prev
			if rule == algorithm.Proportional {
				prev = carry(v.prev)
			}
		}
		// One by one, this counter books Limit − 1 units in each window
		// after a full one (the previous window's share, rounded up, keeps
		// one unit back until the window ends), and a limit of 1 one unit
		// every two windows.
		var full, rest int64
		if w.limit == 1 {
			full, rest = 2*booked-1, 1
		} else {
			full = (booked - 1) / (w.limit - 1)
			rest = booked - full*(w.limit-1)
		}
		if most := index + algorithm.MaxDuration/w.window - base; full > most {
			full, rest = most, w.limit
		}
		if full > 0 {
			prev = w.limit
		}
		return algorithm.State{N0: base + full, N1: w.limit + rest, N2: prev}
	}
	if length != w.window {
		return algorithm.State{N0: index, N1: carry(old.used(v))}
	}
	switch {
	case rule == algorithm.Proportional:
		return algorithm.State{N0: v.index, N1: carry(v.count), N2: carry(v.prev)}
	case v.count <= w.limit:
		return algorithm.State{N0: v.index, N1: v.count, N2: v.prev}
	case v.index < index+algorithm.MaxDuration/w.window:
		return algorithm.State{N0: v.index + 1, N2: v.count}
	default: // the next window would lie too far ahead: the count, clamped
		return algorithm.State{N0: v.index, N1: w.limit, N2: v.prev}
	}
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
