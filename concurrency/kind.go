package concurrency

import (
	_ "embed"
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Kind is the letter of a Slots' Tag ({Kind, lease}), registered with the
// algorithm package.
const Kind byte = 'C'

// body is the transition in Lua, which the Redis stores run.
//
//go:embed concurrency.lua
var body string

func init() {
	algorithm.Register(algorithm.Kind{Name: "concurrency", Letter: Kind, Params: 1, Body: body, Used: used, Log: true,
		Describe: func(t algorithm.Tag) string {
			return fmt.Sprintf("an in-flight limit with leases of %v", time.Duration(t.P0)*time.Microsecond)
		},
		AsIsBounds: asIsBounds})
}

// asIsBounds: a shorter lease ends holds sooner, so what was held stays
// held (the upper bound) only when to's lease is at least from's; a
// longer one never counts again what had ended (Inherit), so no more is
// held than from held (the lower bound) whatever the leases.
func asIsBounds(to, from algorithm.Tag) (upper, lower bool, slack int64) {
	return to.P0 >= from.P0, true, 0
}

// used is what a state written under from (a lease of from.P0 µs) holds at
// now: the units of its entries after now − lease, those ahead included.
func used(from algorithm.Tag, st algorithm.State, now int64) int64 {
	if st.N2 <= 0 || st.Log == nil || st.Log.Head < 0 || st.Log.Head > len(st.Log.Entries) {
		return 0
	}
	_, dead := live(st.Log.Entries[st.Log.Head:], now-from.P0)
	return st.N2 - dead
}
