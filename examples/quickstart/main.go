// Command quickstart shows a Limiter deciding on the memory store: a burst
// of requests for two users against a bucket of 5 tokens refilled at 2 per
// second, then a Wait for the next token.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func main() {
	alg, err := tokenbucket.PerSecond(2, tokenbucket.Burst(5)) // 2 per second, bursts of 5
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(alg, memorystore.New[string]())
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, user := range []string{"alice", "alice", "alice", "alice", "alice", "alice", "bob"} {
		d, err := lim.Allow(ctx, user)
		if err != nil {
			log.Fatal(err)
		}
		if d.Allowed() {
			fmt.Printf("%-5s allowed  remaining=%d\n", user, d.Remaining())
		} else {
			fmt.Printf("%-5s denied   retry after %v\n", user, d.RetryAfter().Round(time.Millisecond))
		}
	}
	start := time.Now()
	if _, err := lim.Wait(ctx, "alice"); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("alice waited %v for her next token\n", time.Since(start).Round(50*time.Millisecond))
}
