package tokenbucket_test

import (
	"context"
	"fmt"
	"log"
	"reflect"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func ExamplePerSecond() {
	// 2 requests per second in the long run, in bursts of up to 3.
	alg, err := tokenbucket.PerSecond(2, tokenbucket.Burst(3))
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

func ExampleIntervalPer() {
	// 1 per second, as a whole token at the end of every second, and 2
	// tokens at most.
	alg, err := tokenbucket.IntervalPer(1, time.Second, tokenbucket.Burst(2))
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

func ExamplePerMinute() {
	// 100 requests per minute, in bursts of up to 20.
	alg, err := tokenbucket.PerMinute(100, tokenbucket.Burst(20))
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(alg, memorystore.New[string](),
		ratelimit.WithClock(clock.NewFake(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))))
	if err != nil {
		log.Fatal(err)
	}
	q := alg.Quota()
	fmt.Printf("%d per %v, bursts of %d\n", q.Limit, q.Window, lim.Limit())

	allowed := 0
	for {
		d, err := lim.Allow(context.Background(), "alice")
		if err != nil {
			log.Fatal(err)
		}
		if !d.Allowed() {
			fmt.Printf("%d allowed at once, then a token every %v\n", allowed, d.RetryAfter())
			break
		}
		allowed++
	}
	// Output:
	// 100 per 1m0s, bursts of 20
	// 20 allowed at once, then a token every 600ms
}

func ExampleBucket_Quota() {
	// The same bucket, said as a quota and as a rate per second (100.0/60,
	// not 100/60, which is the integer 1).
	said, err := tokenbucket.PerMinute(100, tokenbucket.Burst(20))
	if err != nil {
		log.Fatal(err)
	}
	rate, err := tokenbucket.New(tokenbucket.Config{Capacity: 20, Rate: 100.0 / 60})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same bucket:", reflect.DeepEqual(said.Spec(), rate.Spec()))
	// A quota reports what was said; a Config its capacity per the time
	// an empty bucket takes to refill.
	fmt.Printf("PerMinute: %+v\n", said.Quota())
	fmt.Printf("Config:    %+v\n", rate.Quota())
	// Output:
	// same bucket: true
	// PerMinute: {Limit:100 Window:1m0s}
	// Config:    {Limit:20 Window:12s}
}
