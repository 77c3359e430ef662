package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// A route allows bursts of 2 refilled at 1 per second, and 3 per hour:
// the burst binds first, then the hour.
func ExampleNewPolicy() {
	burst, _ := tokenbucket.PerSecond(1, tokenbucket.Burst(2))
	hourly, _ := fixedwindow.PerHour(3)
	fake := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	p, _ := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
		{Name: "burst", Algorithm: burst},
		{Name: "hourly", Algorithm: hourly},
	}, ratelimit.WithClock(fake))

	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		d, _ := p.Allow(ctx, "client")
		fmt.Printf("request %d: allowed=%v binding=%s burst=%d hourly=%d retry=%v\n", i, d.Allowed(),
			p.Limits()[d.Binding()].Name, d.Limits()[0].Remaining(), d.Limits()[1].Remaining(), d.RetryAfter())
		fake.Advance(500 * time.Millisecond)
	}
	// Output:
	// request 1: allowed=true binding=burst burst=1 hourly=2 retry=0s
	// request 2: allowed=true binding=burst burst=0 hourly=1 retry=0s
	// request 3: allowed=true binding=hourly burst=0 hourly=0 retry=0s
	// request 4: allowed=false binding=hourly burst=0 hourly=0 retry=59m58.5s
}
