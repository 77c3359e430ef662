package gcra

import (
	_ "embed"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Kind is the letter of a Meter's Tag ({Kind, burst, emission interval}),
// registered with the algorithm package.
const Kind byte = 'G'

// body is the transition in Lua, which the Redis stores run.
//
//go:embed gcra.lua
var body string

func init() {
	algorithm.Register(algorithm.Kind{Name: "gcra", Letter: Kind, Params: 2, Body: body, Used: used, StepBack: stepBack,
		Describe: func(t algorithm.Tag) string { return describe(t.P0, t.P1) }})
}

// maxExact is 2^53, the range within which stored instants are exact
// doubles, as the scripts check them.
const maxExact = 1 << 53

// used is what a meter's state (TAT) had used at now:
// ⌈max(TAT − now, 0) / E⌉, E = from.P1, the emission interval.
func used(from algorithm.Tag, s algorithm.State, now int64) int64 {
	p0, p1 := from.P0, from.P1
	if p0 > algorithm.MaxLimit || s.N0 > maxExact {
		return algorithm.MaxLimit
	}
	if s.N0 <= now {
		return 0
	}
	d := uint64(s.N0) - uint64(now) // not s.N0-now: it may overflow
	q := d / uint64(p1)
	if d%uint64(p1) != 0 {
		q++
	}
	return int64(min(q, uint64(algorithm.MaxLimit)))
}

// stepBack is a clock's step back of d µs under from's meter counted as
// its units at to's interval, as Inherit carries a debt beyond the burst:
// ⌈min(d, MaxDuration)·to.P1/from.P1⌉, at most MaxDuration.
func stepBack(to, from algorithm.Tag, d int64) int64 {
	if from.P1 < 1 {
		return 0
	}
	return int64(min(mulDivUp(uint64(min(d, algorithm.MaxDuration)), uint64(to.P1), uint64(from.P1)), uint64(algorithm.MaxDuration)))
}
