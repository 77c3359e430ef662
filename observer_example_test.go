package ratelimit_test

import (
	"context"
	"fmt"
	"log"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// A limiter in dry-run mode, with an observer printing every decision: the
// third request is denied by the limit, and admitted anyway.
func ExampleWithDryRun() {
	alg, err := tokenbucket.PerSecond(1, tokenbucket.Burst(2))
	if err != nil {
		log.Fatal(err)
	}
	show := func(_ context.Context, e ratelimit.Event) {
		fmt.Printf("event: %s %s allowed %v, dry run %v\n", e.Name, e.Op, e.Allowed, e.DryRun)
	}
	lim, err := ratelimit.New(alg, memorystore.New[string](),
		ratelimit.WithDryRun(), ratelimit.WithObserver(show), ratelimit.WithName("new-limit"))
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		d, err := lim.Allow(context.Background(), "alice")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("allowed %v, would have been denied %v\n", d.Allowed(), d.DryRunDenied())
	}
	// Output:
	// event: new-limit allow allowed true, dry run true
	// allowed true, would have been denied false
	// event: new-limit allow allowed true, dry run true
	// allowed true, would have been denied false
	// event: new-limit allow allowed false, dry run true
	// allowed true, would have been denied true
}
