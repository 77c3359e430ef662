package slidinglog_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

func ExamplePerSecond() {
	// At most 2 requests in any rolling second.
	alg, err := slidinglog.PerSecond(2)
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
			fmt.Printf("%v: allowed, %d left\n", at, d.Remaining())
		} else {
			fmt.Printf("%v: denied, retry after %v\n", at, d.RetryAfter())
		}
	}
	allow()
	clk.Advance(600 * time.Millisecond)
	allow()
	allow() // the request of 0s leaves the window at 1s
	clk.Advance(400 * time.Millisecond)
	allow()
	allow() // the request of 600ms leaves it at 1.6s
	// Output:
	// 0s: allowed, 1 left
	// 600ms: allowed, 0 left
	// 600ms: denied, retry after 400ms
	// 1s: allowed, 0 left
	// 1s: denied, retry after 600ms
}
