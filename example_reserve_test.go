package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// Count only failed logins: every attempt is charged before the password
// is checked, so that parallel guesses cannot all pass a check made before
// any of them is charged, and a successful one is given back.
func ExampleLimiter_Refund() {
	fake := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	attempts, _ := slidinglog.PerHour(3)
	logins, _ := ratelimit.New(attempts, memorystore.New[string](), ratelimit.WithClock(fake))
	ctx := context.Background()

	login := func(user, password string) string {
		d, err := logins.Allow(ctx, user)
		if err != nil || !d.Allowed() {
			return fmt.Sprintf("locked for %v", d.RetryAfter())
		}
		if password != "secret" {
			return fmt.Sprintf("wrong password (%d tries left)", d.Remaining())
		}
		d, _ = logins.Refund(ctx, user, 1) // a success does not count
		return fmt.Sprintf("welcome (%d tries left)", d.Remaining())
	}
	fmt.Println(login("ann", "guess"))
	fmt.Println(login("ann", "secret"))
	fmt.Println(login("ann", "guess2"))
	fmt.Println(login("ann", "guess3"))
	fake.Advance(time.Minute)
	fmt.Println(login("ann", "secret"))
	// Output:
	// wrong password (2 tries left)
	// welcome (2 tries left)
	// wrong password (1 tries left)
	// wrong password (0 tries left)
	// locked for 59m0s
}

// Count only failed logins, giving back a success through its own
// Reservation: ReserveN with no delay is an admission at now that can be
// refunded later, and its Refund gives back that admission alone, never
// another attempt's charge.
func ExampleReservation_Refund() {
	fake := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	attempts, _ := slidinglog.PerHour(3)
	logins, _ := ratelimit.New(attempts, memorystore.New[string](), ratelimit.WithClock(fake))
	ctx := context.Background()

	login := func(user, password string) string {
		r, err := logins.ReserveN(ctx, user, 1, 0)
		if err != nil || !r.OK() {
			return fmt.Sprintf("locked for %v", r.Decision().RetryAfter())
		}
		if password != "secret" {
			return fmt.Sprintf("wrong password (%d tries left)", r.Decision().Remaining())
		}
		_, _ = r.Refund(ctx) // a success does not count
		d, _ := logins.Peek(ctx, user)
		return fmt.Sprintf("welcome (%d tries left)", d.Remaining())
	}
	fmt.Println(login("ann", "guess"))
	fmt.Println(login("ann", "secret"))
	fmt.Println(login("ann", "guess2"))
	fmt.Println(login("ann", "guess3"))
	fake.Advance(time.Minute)
	fmt.Println(login("ann", "secret"))
	// Output:
	// wrong password (2 tries left)
	// welcome (2 tries left)
	// wrong password (1 tries left)
	// wrong password (0 tries left)
	// locked for 59m0s
}

// Reserve books a request at the instant it fits and says how long to
// wait: a caller that cannot wait that long gives the booking back.
func ExampleLimiter_ReserveN() {
	fake := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	perSecond, _ := tokenbucket.PerSecond(2) // 2 a second, bursts of 2
	lim, _ := ratelimit.New(perSecond, memorystore.New[string](), ratelimit.WithClock(fake))
	ctx := context.Background()

	for i := 1; i <= 4; i++ {
		r, _ := lim.Reserve(ctx, "upstream")
		fmt.Printf("request %d: booked=%v delay=%v\n", i, r.OK(), r.Delay())
	}
	r, _ := lim.ReserveN(ctx, "upstream", 1, 100*time.Millisecond)
	fmt.Printf("within 100ms: booked=%v, fits in %v\n", r.OK(), r.Decision().RetryAfter())

	late, _ := lim.Reserve(ctx, "upstream")
	fmt.Printf("last: delay=%v\n", late.Delay())
	_ = late.Cancel(ctx) // not needed after all: given back
	again, _ := lim.Reserve(ctx, "upstream")
	fmt.Printf("after cancel: delay=%v\n", again.Delay())
	// Output:
	// request 1: booked=true delay=0s
	// request 2: booked=true delay=0s
	// request 3: booked=true delay=500ms
	// request 4: booked=true delay=1s
	// within 100ms: booked=false, fits in 1.5s
	// last: delay=1.5s
	// after cancel: delay=1.5s
}

// Charge an LLM call its tokens, known when the response ends: admit it at
// an estimate, then settle the reservation to what the response used. Less
// is given back; more is charged past the limit, a debt the tenant's next
// call waits out.
func ExampleReservation_Settle() {
	fake := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	perMinute, _ := tokenbucket.PerMinute(1000) // tokens a minute per tenant
	tokens, _ := ratelimit.New(perMinute, memorystore.New[string](), ratelimit.WithClock(fake))
	ctx := context.Background()

	call := func(estimate, used int) {
		r, err := tokens.ReserveN(ctx, "acme", estimate, 0)
		if err != nil || !r.OK() {
			fmt.Printf("over quota: retry after %v\n", r.Decision().RetryAfter())
			return
		}
		_ = r.Settle(ctx, used) // the response's token count
		d, _ := tokens.Peek(ctx, "acme")
		fmt.Printf("used %d: %d left\n", used, d.Remaining())
	}
	call(100, 300)
	call(100, 50)
	call(100, 1250)
	call(100, 10)
	// Output:
	// used 300: 700 left
	// used 50: 650 left
	// used 1250: 0 left
	// over quota: retry after 42s
}
