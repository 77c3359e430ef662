package algorithm

import (
	"math"
	"math/bits"
	"sort"
)

// Used returns how much of its limit a state written under from had used
// at now, read from from's meaning parameters and the state alone, as a
// whole number between 0 and MaxLimit (more counts as MaxLimit, which no
// limit exceeds). It is what a key's state carries into an algorithm of
// another Kind (see [Carry]); the Redis scripts compute the same number
// from the header and body they find (design state-format.md §2.10):
//
//   - token bucket (T) and interval bucket (I): ⌈C − tokens⌉ as stored,
//     C = from.P0; their rate is not in the Tag, so nothing refilled
//     since is counted (a debt, tokens below zero, counts beyond C);
//   - GCRA (G): ⌈max(TAT − now, 0) / E⌉, E = from.P1;
//   - fixed window (F): the fill pointer of the window of now as the
//     window reads it (units booked past its end included), 0 once the
//     counted window has ended;
//   - sliding-window counter (S): its estimate at now, the count plus the
//     previous window's share rounded up, as the counter computes it;
//   - sliding log (L): the cost of its entries after t − W, t being now or
//     the log's clock when later, bookings ahead included, as the log
//     counts it.
//
// A state of an unknown Kind, or of a Kind whose parameters or numbers are
// out of the ranges its algorithm accepts, counts as MaxLimit: fully used.
func Used(from Tag, s State, now int64) int64 {
	p0, p1 := from.P0, from.P1
	if p0 < 1 || p0 > MaxDuration || params(from.Kind) == 2 && (p1 < 1 || p1 > MaxDuration) {
		return MaxLimit
	}
	var u int64
	switch from.Kind {
	case KindTokenBucket:
		tokens := math.Float64frombits(uint64(s.N0))
		if p0 > MaxLimit || !(tokens >= -maxExact && tokens <= maxExact) {
			return MaxLimit
		}
		f := math.Ceil(float64(p0) - tokens)
		if f >= float64(MaxLimit) {
			return MaxLimit
		}
		u = int64(f)
	case KindInterval:
		if p0 > MaxLimit || s.N0 < -maxExact || s.N0 > maxExact {
			return MaxLimit
		}
		u = p0 - s.N0
	case KindGCRA:
		if p0 > MaxLimit || s.N0 > maxExact {
			return MaxLimit
		}
		if s.N0 <= now {
			return 0
		}
		d := uint64(s.N0) - uint64(now) // not s.N0-now: it may overflow
		q := d / uint64(p1)
		if d%uint64(p1) != 0 {
			q++
		}
		u = int64(min(q, uint64(MaxLimit)))
	case KindFixedWindow:
		if p0 > MaxLimit || s.N1 < 0 || s.N1 > 2*p0 {
			return MaxLimit
		}
		index := FloorDiv(now, p1)
		switch {
		case s.N1 == 0, s.N0 > index+MaxDuration/p1:
		case s.N0 >= index:
			u = s.N1
		case s.N0 == index-1:
			u = max(s.N1-p0, 0)
		}
	case KindSlidingWindow:
		if p0 > MaxLimit || s.N1 < 0 || s.N1 > 2*MaxLimit || s.N2 < 0 || s.N2 > MaxLimit {
			return MaxLimit
		}
		u = windowUsed(p0, p1, s.N0, min(s.N1, 2*p0), s.N2, now)
	case KindSlidingLog:
		u = logUsed(p0, s, now)
	default:
		return MaxLimit
	}
	return min(max(u, 0), MaxLimit)
}

// maxExact is 2^53, the range within which stored counts and instants
// are exact doubles, as the scripts check them.
const maxExact = 1 << 53

// windowUsed is the sliding-window counter's estimate at now of a state
// (index i, count c, previous count p) of limit l and window w: the
// slidingwindow package's at and used, operation for operation.
func windowUsed(l, w, i, c, p, now int64) int64 {
	index := FloorDiv(now, w)
	var count, prev int64
	switch {
	case c == 0 && p == 0, i > index+MaxDuration/w:
	case i >= index:
		index, count, prev = i, c, p
	case i == index-1:
		count, prev = max(c-l, 0), min(c, l)
	case i == index-2 && c > l:
		prev = min(c-l, l)
	}
	if prev == 0 {
		return count
	}
	elapsed := max(now-index*w, 0)
	hi, lo := bits.Mul64(uint64(prev), uint64(w-elapsed))
	q, r := bits.Div64(hi, lo, uint64(w)) // prev·(w − elapsed) < 2^88: no overflow
	if r > 0 {
		q++
	}
	return count + int64(q)
}

// logUsed is the sliding log's cost in the window of w ending at t =
// max(now, its clock): the slidinglog package's Peek.
func logUsed(w int64, s State, now int64) int64 {
	if s.N2 <= 0 || s.Log == nil || s.Log.Head < 0 || s.Log.Head > len(s.Log.Entries) {
		return 0
	}
	entries := s.Log.Entries[s.Log.Head:]
	t := now
	if s.N1 > now {
		t = s.N1
	}
	cut := t - w
	i := sort.Search(len(entries), func(i int) bool { return entries[i].At > cut })
	base := s.N0
	if i > 0 {
		base = entries[i-1].Cost
	}
	return s.N2 - base
}

// Carry returns the state alg starts a key from when the key's state s
// was written under from, a Tag of another Kind than alg's: alg's fresh
// state at now, charged min(Used(from, s, now), alg.Limit()) at now, so
// that switching algorithms never hands out a quota the old state had
// used. Nothing of s is kept but that number, and nothing s points to is
// changed.
func Carry(alg Algorithm, from Tag, s State, now int64) State {
	st := alg.Init(State{}, now)
	if u := min(Used(from, s, now), alg.Limit()); u >= 1 {
		st, _ = alg.Take(st, now, u)
	}
	return st
}
