package slidingwindow

import (
	_ "embed"
	"math/bits"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Kind is the letter of a Window's Tag ({Kind, limit, window}),
// registered with the algorithm package.
const Kind byte = 'S'

// body is the transition in Lua, which the Redis stores run.
//
//go:embed slidingwindow.lua
var body string

func init() {
	algorithm.Register(algorithm.Kind{Name: "slidingwindow", Letter: Kind, Params: 2, Body: body, Used: used,
		Describe: func(t algorithm.Tag) string { return describe(t.P0, t.P1) }})
}

// used is what a counter's state had used at now: its estimate, the
// count plus the previous window's share rounded up, as the counter
// computes it.
func used(from algorithm.Tag, s algorithm.State, now int64) int64 {
	p0, p1 := from.P0, from.P1
	if p0 > algorithm.MaxLimit || s.N1 < 0 || s.N1 > 2*algorithm.MaxLimit || s.N2 < 0 || s.N2 > algorithm.MaxLimit {
		return algorithm.MaxLimit
	}
	return windowUsed(p0, p1, s.N0, min(s.N1, 2*p0), s.N2, now)
}

// windowUsed is the counter's estimate at now of a state (index i, count
// c, previous count p) of limit l and window w: at and used, operation
// for operation.
func windowUsed(l, w, i, c, p, now int64) int64 {
	index := algorithm.FloorDiv(now, w)
	var count, prev int64
	switch {
	case c == 0 && p == 0, i > index+algorithm.MaxDuration/w:
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
