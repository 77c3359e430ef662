package httplimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// ExamplePolicyFields formats the rate-limit fields of a policy's decision
// outside the middleware, as a transport of its own would send them.
func ExamplePolicyFields() {
	burst, _ := tokenbucket.New(tokenbucket.Config{Capacity: 3, Rate: 1})
	hourly, _ := fixedwindow.New(fixedwindow.Config{Limit: 100, Window: time.Hour})
	p, _ := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
		{Name: "burst", Algorithm: burst},
		{Name: "hourly", Algorithm: hourly},
	}, ratelimit.WithClock(clock.NewFake(time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC))))
	f := httplimit.PolicyFields(p)
	d, _ := p.Allow(context.Background(), "alice")
	fmt.Println("RateLimit-Policy:", f.Policy())
	fmt.Println("RateLimit:", f.RateLimit(&d))
	// Output:
	// RateLimit-Policy: "burst";q=3;w=3, "hourly";q=100;w=3600
	// RateLimit: "burst";r=2;t=1, "hourly";r=99;t=1800
}
