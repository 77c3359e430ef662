package fixedwindow_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

func ExamplePerMinute() {
	// At most 2 requests per minute, counting again on the minute.
	alg, err := fixedwindow.PerMinute(2)
	if err != nil {
		log.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2025, 1, 1, 12, 0, 40, 0, time.UTC))
	lim, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithClock(clk))
	if err != nil {
		log.Fatal(err)
	}

	allow := func() {
		d, err := lim.Allow(context.Background(), "alice")
		if err != nil {
			log.Fatal(err)
		}
		at := clk.Now().Format(time.TimeOnly)
		if d.Allowed() {
			fmt.Printf("%s: allowed, %d left\n", at, d.Remaining())
		} else {
			fmt.Printf("%s: denied, retry after %v\n", at, d.RetryAfter())
		}
	}
	allow()
	allow()
	allow()
	clk.Advance(20 * time.Second)
	allow()
	// Output:
	// 12:00:40: allowed, 1 left
	// 12:00:40: allowed, 0 left
	// 12:00:40: denied, retry after 20s
	// 12:01:00: allowed, 1 left
}
