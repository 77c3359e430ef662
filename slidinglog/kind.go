package slidinglog

import (
	_ "embed"
	"fmt"
	"sort"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Kind is the letter of a Log's Tag ({Kind, window}), registered with the
// algorithm package.
const Kind byte = 'L'

// body is the transition in Lua, which the Redis stores run.
//
//go:embed slidinglog.lua
var body string

func init() {
	algorithm.Register(algorithm.Kind{Name: "slidinglog", Letter: Kind, Params: 1, Body: body, Used: used, Log: true,
		Describe: func(t algorithm.Tag) string {
			return fmt.Sprintf("a sliding log over %v", time.Duration(t.P0)*time.Microsecond)
		},
		AsIsBounds: asIsBounds})
}

// asIsBounds: a log with a shorter window forgets faster, so what was
// used stays used (the upper bound) only when to's window is at least
// from's, and no more than what from had used (the lower one) only when
// it is at most from's.
func asIsBounds(to, from algorithm.Tag) (upper, lower bool, slack int64) {
	return to.P0 >= from.P0, to.P0 <= from.P0, 0
}

// used is what a log had used at now: the cost of its entries after
// t − W, W = from.P0, t being now or the log's clock when later,
// bookings ahead included, as the log counts it (its Peek).
func used(from algorithm.Tag, s algorithm.State, now int64) int64 {
	w := from.P0
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
