package clock_test

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

// A fake clock's timers fire when the time is moved past them, and not
// before.
func ExampleFake() {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	tm := fake.NewTimer(time.Second)

	fake.Advance(999 * time.Millisecond)
	select {
	case <-tm.C():
		fmt.Println("fired early")
	default:
		fmt.Println("waiting at", fake.Now().Sub(start))
	}
	fake.Advance(time.Millisecond)
	fmt.Println("fired at", (<-tm.C()).Sub(start))
	// Output:
	// waiting at 999ms
	// fired at 1s
}

// A test drives a Limiter's Wait with a fake clock: the waiter runs in a
// goroutine that cancels a context when it returns, and the test moves the
// time while the waiter sleeps on a timer. Nothing sleeps for real, and the
// loop ends once Wait has returned, however many times it slept.
func ExampleFake_BlockUntilTimersContext() {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 0.5}) // a token every 2s
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithClock(fake))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := lim.Allow(ctx, "alice"); err != nil { // takes the only token
		log.Fatal(err)
	}

	waiting, done := context.WithCancel(ctx)
	var d ratelimit.Decision
	go func() {
		defer done()
		d, err = lim.Wait(ctx, "alice")
	}()
	steps := 0
	for fake.BlockUntilTimersContext(waiting, 1) == nil {
		fake.Advance(500 * time.Millisecond)
		steps++
	}
	// The waiter has returned: its results are safe to read.
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("admitted after %v (%d steps), %d left\n", fake.Now().Sub(start), steps, d.Remaining())
	// Output:
	// admitted after 2s (4 steps), 0 left
}
