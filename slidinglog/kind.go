package slidinglog

import (
	_ "embed"
	"fmt"
	"sort"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// body is the transition in Lua, which the Redis stores run.
//
//go:embed slidinglog.lua
var body string

func init() {
	algorithm.Register(algorithm.Kind{Name: "slidinglog", Letter: algorithm.KindSlidingLog, Params: 1, Body: body, Used: used, Log: true,
		Describe: func(t algorithm.Tag) string {
			return fmt.Sprintf("a sliding log over %v", time.Duration(t.P0)*time.Microsecond)
		}})
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
