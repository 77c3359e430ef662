package concurrency

import (
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Kind is the letter of a Slots' Tag ({Kind, lease}), registered with the
// algorithm package.
const Kind byte = 'C'

func init() {
	algorithm.Register(algorithm.Kind{Name: "concurrency", Letter: Kind, Params: 1, Used: used, Log: true,
		Describe: func(t algorithm.Tag) string {
			return fmt.Sprintf("an in-flight limit with leases of %v", time.Duration(t.P0)*time.Microsecond)
		}})
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
