//line /work/wt/service/README.md:318
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func main() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // required: goredisstore.New refuses a client without it
	})
	defer client.Close()
	st, err := goredisstore.New(client, goredisstore.WithPrefix[string]("myapp:ratelimit:"),
		goredisstore.WithTimeout[string](200*time.Millisecond)) // a hung Redis costs a call at most this
	if err != nil {
		log.Fatal(err)
	}
	alg, err := tokenbucket.PerSecond(2, tokenbucket.Burst(10))
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st,
		ratelimit.WithName("api"),                  // the quota: one name in every process that shares it
		ratelimit.WithClock(clock.Server()),        // Redis's TIME
		ratelimit.WithBreaker(ratelimit.Breaker{})) // a dead Redis fails calls at once, not after a timeout each
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	d, err := lim.Allow(ctx, "user:123")
	switch {
	case errors.Is(err, ratelimit.ErrStoreUnavailable):
		log.Printf("Redis did not decide: %v", err) // or let a failure policy decide
	case err != nil:
		log.Printf("not decided: %v", err) // the context ended, or a bad key
	case d.Allowed():
		fmt.Printf("allowed, %d left\n", d.Remaining())
	default:
		fmt.Printf("denied, retry after %v\n", d.RetryAfter())
	}
}
