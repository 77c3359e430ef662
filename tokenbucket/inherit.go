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
//	AsIs:         max(0, a + (Capacity − C))          what was used stays used
//	Proportional: min(max(a, 0)·Capacity/C, Capacity)  float64, left to right
//
// held at max(last, now). The Lua script computes the same doubles. Any
// rule but Proportional is AsIs. A bucket in debt (negative tokens, what
// Book charges ahead) is forgiven, but as-is for what it takes from a
// larger capacity's gain (a + (Capacity − C) at least 0).
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
	if from.Kind != algorithm.KindTokenBucket || from.P0 < 1 || from.P0 > algorithm.MaxLimit ||
		!(tokens >= -maxTokens && tokens <= maxTokens) {
		return algorithm.State{N0: int64(math.Float64bits(0)), N1: now}
	}
	c := float64(from.P0)
	a := min(tokens+float64(float64(max(now-last, 0))*b.perMicro), c)
	var t float64
	if rule == algorithm.Proportional {
		t = min(float64(max(a, 0)*b.capacity)/c, b.capacity)
	} else {
		t = max(0, a+float64(b.limit-from.P0))
	}
	return algorithm.State{N0: int64(math.Float64bits(t)), N1: max(last, now)}
}

// Inherit returns s, written under from (an interval bucket of capacity C
// = from.P0), as this bucket's state at now (design state-format.md
// §2.2). The bucket is refilled up to now on this bucket's schedule but
// with C as its cap, giving a tokens since the refill at la; then
//
//	AsIs:         max(0, a + Capacity − C)
//	Proportional: ⌊a·Capacity/C⌋               rounded toward more used
//
// since la, or since max(la, now) when that fills the bucket (a full
// bucket restarts its interval). Any rule but Proportional is AsIs. A
// bucket in debt (a negative count, what Book charges ahead) is forgiven,
// but as-is for what it takes from a larger capacity's gain
// (a + Capacity − C at least 0).
//
// A state under a from of another Kind, or with a capacity outside [1,
// algorithm.MaxLimit], is taken as fully used: an empty bucket whose last
// refill is now. A from equal to the bucket's own Tag gives s as it is.
func (b *IntervalBucket) Inherit(from algorithm.Tag, s algorithm.State, now int64, rule algorithm.Rule) algorithm.State {
	if from == b.Tag() {
		return algorithm.State{N0: s.N0, N1: s.N1}
	}
	if from.Kind != algorithm.KindInterval || from.P0 < 1 || from.P0 > algorithm.MaxLimit {
		return algorithm.State{N0: 0, N1: now}
	}
	old := IntervalBucket{capacity: from.P0, tokens: b.tokens, interval: b.interval}
	a, last := old.at(s.N0, s.N1, now)
	// Below -MaxLimit every rule gives 0 tokens; the clamp keeps the sum
	// from wrapping around.
	a = max(a, -algorithm.MaxLimit)
	var t int64
	if rule == algorithm.Proportional {
		hi, lo := bits.Mul64(uint64(max(a, 0)), uint64(b.capacity))
		q, _ := bits.Div64(hi, lo, uint64(from.P0)) // a ≤ C: the quotient is at most Capacity
		t = int64(q)
	} else {
		t = max(0, a+b.capacity-from.P0)
	}
	if t >= b.capacity {
		last = max(last, now)
	}
	return algorithm.State{N0: t, N1: last}
}
