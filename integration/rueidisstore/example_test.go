package rueidisstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// The store's ExampleNew, run: an embedded miniredis stands in for the
// server, which the store's own module does not require (it needs the two
// client options marked, which a real Redis does not).
func Example_miniredis() {
	srv := miniredis.NewMiniRedis()
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	client, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{srv.Addr()},
		DisableCache:      true, // for miniredis
		ForceSingleClient: true, // for miniredis
	})
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
	// Output:
	// allowed: true remaining: 1
	// allowed: true remaining: 0
	// allowed: false remaining: 0
}
