package gcra_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

func ExamplePerSecond() {
	// 2 requests per second in bursts of up to 3 (one back every 500ms):
	// what tokenbucket.PerSecond(2, tokenbucket.Burst(3)) admits, in one
	// number.
	alg, err := gcra.PerSecond(2, gcra.Burst(3))
	if err != nil {
		log.Fatal(err)
	}
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	lim, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithClock(clk))
	if err != nil {
		log.Fatal(err)
	}

	allow := func() {
		d, err := lim.Allow(context.Background(), "alice")
		if err != nil {
			log.Fatal(err)
		}
		at := clk.Now().Sub(start)
		if d.Allowed() {
			fmt.Printf("%v: allowed, %d left, at rest in %v\n", at, d.Remaining(), d.ResetAfter())
		} else {
			fmt.Printf("%v: denied, retry after %v\n", at, d.RetryAfter())
		}
	}
	for range 4 {
		allow()
	}
	clk.Advance(500 * time.Millisecond)
	allow()
	clk.Advance(time.Minute) // back at rest: 3, no more
	allow()
	// Output:
	// 0s: allowed, 2 left, at rest in 500ms
	// 0s: allowed, 1 left, at rest in 1s
	// 0s: allowed, 0 left, at rest in 1.5s
	// 0s: denied, retry after 500ms
	// 500ms: allowed, 0 left, at rest in 1.5s
	// 1m0.5s: allowed, 2 left, at rest in 500ms
}
