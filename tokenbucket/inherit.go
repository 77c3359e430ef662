package tokenbucket

import (
	"math"
	"math/bits"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// maxTokens bounds the tokens Inherit reads, as the script's range check
// does: 2^53.
const maxTokens = 1 << 53

var (
	_ algorithm.Inheritor = (*Bucket)(nil)
	_ algorithm.Inheritor = (*IntervalBucket)(nil)
)

// Inherit returns s, written under from (a bucket of capacity C =
// from.P0), as this bucket's state at now (design state-format.md §2.1).
// The tokens are refilled since the state's instant at this bucket's
// rate, up to C, giving a; then
//
//	AsIs:         max(a + (Capacity − C), min(a, 0))  what was used stays used
//	Proportional: min(a·Capacity/C, Capacity) for a ≥ 0, else a
//
// (float64, left to right) held at max(last, now), a debt at most what
// this bucket refills in algorithm.MaxDuration. The Lua script computes
// the same doubles. Any rule but Proportional is AsIs. A bucket in debt
// (negative tokens: units Book charged ahead of their instants) keeps its
// debt under either rule, so that a limit changed after a booking does not
// hand its units out a second time. As-is, a larger capacity's gain pays
// the debt first, as it pays for any unit used; a smaller one takes
// nothing more from a bucket in debt than from an empty one.
//
// A state it cannot read (from of another Kind or with a capacity outside
// [1, algorithm.MaxLimit], tokens that are not a number within ±2^53, as
// the script checks) is taken as fully used: an empty bucket at now.
// Reading it as fresh would hand out a quota nobody granted. A from equal
// to the bucket's own Tag gives s as it is, as stores do without asking.
func (b *Bucket) Inherit(from algorithm.Tag, s algorithm.State, now int64, rule algorithm.Rule) algorithm.State {
	if from == b.Tag() {
		return algorithm.State{N0: s.N0, N1: s.N1}
	}
	tokens, last := load(s)
	if from.Kind != Kind || from.P0 < 1 || from.P0 > algorithm.MaxLimit ||
		!(tokens >= -maxTokens && tokens <= maxTokens) {
		return algorithm.State{N0: int64(math.Float64bits(0)), N1: now}
	}
	c := float64(from.P0)
	a := min(tokens+float64(float64(max(now-last, 0))*b.perMicro), c)
	t := a // Proportional's debt
	switch {
	case rule != algorithm.Proportional:
		t = max(a+float64(b.limit-from.P0), min(a, 0))
	case a >= 0:
		t = min(float64(a*b.capacity)/c, b.capacity)
	}
	// No debt beyond what this bucket refills in algorithm.MaxDuration,
	// the furthest it books ahead: its waits stay within range.
	t = max(t, -float64(float64(algorithm.MaxDuration)*b.perMicro))
	return algorithm.State{N0: int64(math.Float64bits(t)), N1: max(last, now)}
}

// Inherit returns s, written under from (an interval bucket of capacity C
// = from.P0), as this bucket's state at now (design state-format.md
// §2.2). The bucket is refilled up to now on this bucket's schedule but
// with C as its cap, giving a tokens since the refill at la; then
//
//	AsIs:         max(a + Capacity − C, min(a, 0))
//	Proportional: ⌊a·Capacity/C⌋ for a ≥ 0, else a   rounded toward more used
//
// since la, or since max(la, now) when that fills the bucket (a full
// bucket restarts its interval). Any rule but Proportional is AsIs. A
// bucket in debt (a negative count: units Book charged ahead) keeps its
// debt, as the continuous bucket does, at most what this bucket refills in
// algorithm.MaxDuration (and 2^53).
//
// A state under a from of another Kind, or with a capacity outside [1,
// algorithm.MaxLimit], is taken as fully used: an empty bucket whose last
// refill is now. A from equal to the bucket's own Tag gives s as it is.
func (b *IntervalBucket) Inherit(from algorithm.Tag, s algorithm.State, now int64, rule algorithm.Rule) algorithm.State {
	if from == b.Tag() {
		return algorithm.State{N0: s.N0, N1: s.N1}
	}
	if from.Kind != IntervalKind || from.P0 < 1 || from.P0 > algorithm.MaxLimit {
		return algorithm.State{N0: 0, N1: now}
	}
	old := IntervalBucket{capacity: from.P0, tokens: b.tokens, interval: b.interval}
	a, last := old.at(s.N0, s.N1, now)
	// The script reads no count beyond ±2^53; the clamp keeps the sum
	// from wrapping around.
	a = max(a, -maxTokens)
	t := a // Proportional's debt
	switch {
	case rule != algorithm.Proportional:
		t = max(a+b.capacity-from.P0, min(a, 0))
	case a >= 0:
		hi, lo := bits.Mul64(uint64(a), uint64(b.capacity))
		q, _ := bits.Div64(hi, lo, uint64(from.P0)) // a ≤ C: the quotient is at most Capacity
		t = int64(q)
	}
	// No debt beyond what this bucket refills in algorithm.MaxDuration,
	// the furthest it books ahead (at most 2^53): its waits stay within
	// range.
	most := int64(maxTokens)
	if q := algorithm.MaxDuration / b.interval; q <= maxTokens/b.tokens {
		most = q * b.tokens
	}
	t = max(t, -most)
	if t >= b.capacity {
		last = max(last, now)
	}
	return algorithm.State{N0: t, N1: last}
}
