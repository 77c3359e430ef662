package tokenbucket

import (
	_ "embed"
	"fmt"
	"math"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Kind and IntervalKind are the letters of a Bucket's Tag ({Kind,
// capacity}) and an IntervalBucket's ({IntervalKind, capacity}),
// registered with the algorithm package.
const (
	Kind         byte = 'T'
	IntervalKind byte = 'I'
)

// body and intervalBody are the transitions in Lua, which the Redis
// stores run.
var (
	//go:embed tokenbucket.lua
	body string
	//go:embed tokenbucket-interval.lua
	intervalBody string
)

func init() {
	algorithm.Register(algorithm.Kind{Name: "tokenbucket", Letter: Kind, Params: 1, Body: body, Used: used,
		Describe:   func(t algorithm.Tag) string { return fmt.Sprintf("a token bucket of %d", t.P0) },
		AsIsBounds: asIsBounds})
	algorithm.Register(algorithm.Kind{Name: "tokenbucket-interval", Letter: IntervalKind, Params: 1, Body: intervalBody, Used: intervalUsed,
		Describe: func(t algorithm.Tag) string {
			return fmt.Sprintf("a token bucket of %d refilled by whole tokens per interval", t.P0)
		}})
}

// asIsBounds: a continuous bucket holds fractions of a token, and adds
// the capacities' difference in float64 (design §2.1), which may round a
// fraction within an ulp of the next whole token up to it, so what
// remains may exceed the as-is bound by 1.
func asIsBounds(to, from algorithm.Tag) (upper, lower bool, slack int64) { return true, true, 1 }

// maxExact is 2^53, the range within which stored counts are exact
// doubles, as the scripts check them.
const maxExact = 1 << 53

// used is what a bucket's state had used: ⌈C − tokens⌉ as stored, C =
// from.P0; the rate is not in the Tag, so nothing refilled since is
// counted (a debt, tokens below zero, counts beyond C).
func used(from algorithm.Tag, s algorithm.State, now int64) int64 {
	p0 := from.P0
	tokens := math.Float64frombits(uint64(s.N0))
	if p0 > algorithm.MaxLimit || !(tokens >= -maxExact && tokens <= maxExact) {
		return algorithm.MaxLimit
	}
	f := math.Ceil(float64(p0) - tokens)
	if f >= float64(algorithm.MaxLimit) {
		return algorithm.MaxLimit
	}
	return int64(f)
}

// intervalUsed is what an interval bucket's state had used: C − tokens as
// stored, C = from.P0, as used counts it.
func intervalUsed(from algorithm.Tag, s algorithm.State, now int64) int64 {
	p0 := from.P0
	if p0 > algorithm.MaxLimit || s.N0 < -maxExact || s.N0 > maxExact {
		return algorithm.MaxLimit
	}
	return p0 - s.N0
}
