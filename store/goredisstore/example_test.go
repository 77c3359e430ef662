package goredisstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// Limiters in many processes share a limit through Redis. The client must
// have ContextTimeoutEnabled, so that context deadlines bound each
// decision. (Compiled, not run, as it needs a Redis at localhost:6379:
// integration/goredisstore runs it on an embedded miniredis, which this
// module does not require.)
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
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
	plain := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer plain.Close()
	_, err = goredisstore.New[string](plain)
	fmt.Println(err)
	// A fresh key prints:
	// allowed: true remaining: 1
	// allowed: true remaining: 0
	// allowed: false remaining: 0
	// ratelimit: invalid config: goredisstore: the client needs ContextTimeoutEnabled: true so that context deadlines bound each decision
}
