package rueidisstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// Limiters in many processes share a limit through Redis. (Compiled, not
// run, as it needs a Redis at localhost:6379: integration/rueidisstore
// runs it on an embedded miniredis, which this module does not require.)
func ExampleNew() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"localhost:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	st, err := rueidisstore.New(client, rueidisstore.WithPrefix[string]("myapp:ratelimit:"))
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
	// A fresh key prints:
	// allowed: true remaining: 1
	// allowed: true remaining: 0
	// allowed: false remaining: 0
}
