package memorystore_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// The memory store keeps keys of any comparable type as they are, here
// client addresses, with a cap on how many it holds.
func ExampleNew() {
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1.0 / 60}) // a token a minute
	if err != nil {
		log.Fatal(err)
	}
	st := memorystore.New[netip.Addr](memorystore.WithMaxKeys(100_000))
	lim, err := ratelimit.New(alg, st)
	if err != nil {
		log.Fatal(err)
	}
	client := netip.MustParseAddr("192.0.2.7")
	for range 3 {
		d, err := lim.Allow(context.Background(), client)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(client, "allowed:", d.Allowed(), "remaining:", d.Remaining())
	}
	// Output:
	// 192.0.2.7 allowed: true remaining: 1
	// 192.0.2.7 allowed: true remaining: 0
	// 192.0.2.7 allowed: false remaining: 0
}
