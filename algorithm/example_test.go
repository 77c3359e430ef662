package algorithm_test

import (
	"fmt"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// A store runs an algorithm's transition: Init for a key first seen, then
// Take for each decision, keeping the state Take returns. Instants are Unix
// microseconds, given by the Limiter.
func ExampleAlgorithm() {
	var alg algorithm.Algorithm
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1}) // 1 token a second
	if err != nil {
		panic(err)
	}
	const second = 1_000_000 // µs
	now := int64(1_700_000_000) * second
	s := alg.Init(algorithm.State{}, now)
	for _, at := range []int64{now, now, now, now + second/2} {
		var r algorithm.Result
		s, r = alg.Take(s, at, 1)
		fmt.Printf("t+%.1fs: allowed=%v remaining=%d retry after %dµs, fresh in %dµs\n",
			float64(at-now)/second, r.Allowed(), r.Remaining, r.RetryAfter, r.ResetAfter)
	}
	// Output:
	// t+0.0s: allowed=true remaining=1 retry after 0µs, fresh in 1000000µs
	// t+0.0s: allowed=true remaining=0 retry after 0µs, fresh in 2000000µs
	// t+0.0s: allowed=false remaining=0 retry after 1000000µs, fresh in 2000000µs
	// t+0.5s: allowed=false remaining=0 retry after 500000µs, fresh in 1500000µs
}
