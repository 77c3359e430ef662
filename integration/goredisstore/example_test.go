package goredisstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// The store's ExampleNew, run: an embedded miniredis stands in for the
// server, which the store's own module does not require.
func Example_miniredis() {
	srv := miniredis.NewMiniRedis()
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	st, err := goredisstore.New(client, goredisstore.WithPrefix[string]("myapp:ratelimit:"))
	if err != nil {
		log.Fatal(err)
	}
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1.0 / 60}) // a token a minute
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st, ratelimit.WithName("api"))
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		d, err := lim.Allow(context.Background(), "user:123")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("allowed:", d.Allowed(), "remaining:", d.Remaining())
	}

	// Without ContextTimeoutEnabled, New refuses the client.
	plain := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer plain.Close()
	_, err = goredisstore.New[string](plain)
	fmt.Println(err)
	// Output:
	// allowed: true remaining: 1
	// allowed: true remaining: 0
	// allowed: false remaining: 0
	// ratelimit: invalid config: goredisstore: the client needs ContextTimeoutEnabled: true so that context deadlines bound each decision
}
