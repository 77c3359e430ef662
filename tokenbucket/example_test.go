package tokenbucket_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func ExampleNew() {
	// Bursts of up to 3, and 2 requests per second in the long run.
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 3, Rate: 2})
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
	for range 4 {
		allow()
	}
	clk.Advance(500 * time.Millisecond)
	allow()
	clk.Advance(time.Minute) // the bucket refills to 3, no more
	allow()
	// Output:
	// 0s: allowed, 2 left
	// 0s: allowed, 1 left
	// 0s: allowed, 0 left
	// 0s: denied, retry after 500ms
	// 500ms: allowed, 0 left
	// 1m0.5s: allowed, 2 left
}

func ExampleNewInterval() {
	// 2 tokens at most, and a whole token at the end of every second.
	alg, err := tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 2, Tokens: 1, Interval: time.Second})
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
	allow()
	allow()
	clk.Advance(600 * time.Millisecond) // no token yet: it comes at 1s
	allow()
	clk.Advance(400 * time.Millisecond)
	allow()
	// Output:
	// 0s: allowed, 1 left
	// 0s: allowed, 0 left
	// 0s: denied, retry after 1s
	// 600ms: denied, retry after 400ms
	// 1s: allowed, 0 left
}
