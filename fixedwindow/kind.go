package fixedwindow

import (
	_ "embed"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Kind is the letter of a Window's Tag ({Kind, limit, window}),
// registered with the algorithm package.
const Kind byte = 'F'

// body is the transition in Lua, which the Redis stores run.
//
//go:embed fixedwindow.lua
var body string

func init() {
	algorithm.Register(algorithm.Kind{Name: "fixedwindow", Letter: Kind, Params: 2, Body: body, Used: used,
		Describe: func(t algorithm.Tag) string { return describe(t.P0, t.P1) }})
}

// used is what a window's state had used at now: the fill pointer of the
// window of now as the window reads it (units booked past its end
// included), 0 once the counted window has ended.
func used(from algorithm.Tag, s algorithm.State, now int64) int64 {
	p0, p1 := from.P0, from.P1
	if p0 > algorithm.MaxLimit || s.N1 < 0 || s.N1 > 2*p0 {
		return algorithm.MaxLimit
	}
	var u int64
	index := algorithm.FloorDiv(now, p1)
	switch {
	case s.N1 == 0, s.N0 > index+algorithm.MaxDuration/p1:
	case s.N0 >= index:
		u = s.N1
	case s.N0 == index-1:
		u = max(s.N1-p0, 0)
	}
	return u
}
