package slidingwindow_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

func ExamplePerSecond() {
	// About 10 requests per rolling second.
	alg, err := slidingwindow.PerSecond(10)
	if err != nil {
		log.Fatal(err)
	}
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC) // a window starts here
	clk := clock.NewFake(start)
	lim, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithClock(clk))
	if err != nil {
		log.Fatal(err)
	}

	allow := func(n int) {
		d, err := lim.AllowN(context.Background(), "alice", n)
		if err != nil {
			log.Fatal(err)
		}
		at := clk.Now().Sub(start)
		if d.Allowed() {
			fmt.Printf("%v: %d allowed, %d left\n", at, n, d.Remaining())
		} else {
			fmt.Printf("%v: %d denied, retry after %v\n", at, n, d.RetryAfter())
		}
	}
	clk.Advance(900 * time.Millisecond)
	allow(10) // the whole limit at the end of a window
	clk.Advance(100 * time.Millisecond)
	// A new window: a fixed window would admit 10 more at once. Here the
	// previous window's 10 still weigh 10 × (1 − elapsed/1s).
	allow(1)
	clk.Advance(250 * time.Millisecond)
	allow(3) // they weigh ⌈7.5⌉ = 8
	allow(2)
	// Output:
	// 900ms: 10 allowed, 0 left
	// 1s: 1 denied, retry after 100ms
	// 1.25s: 3 denied, retry after 50ms
	// 1.25s: 2 allowed, 0 left
}
