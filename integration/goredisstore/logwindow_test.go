package goredisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestLogWindowShrinkKeepsBase: a sliding log carried from a longer window
// to a shorter one keeps the member its count starts from. The script
// removed the dead members by rank after removing the old header, one rank
// too far, and dropped that member with them: the next decision counted
// every admission ever made (found by storetest's Reconfigure on
// miniredis). The keys get a TTL margin of a minute: with the suites' 0,
// a key of a 1 µs window lives 2 ms of Redis's clock, which a slow run
// (-race on a loaded machine) spent between two calls.
func TestLogWindowShrinkKeepsBase(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		target.TTLMargin = time.Minute
		ctx := context.Background()
		fake := clock.NewFake(time.UnixMicro(1_763_700_000_000_000))
		st := newStore(t, target, redistest.Prefix(t))
		log := func(limit int64, window time.Duration) *slidinglog.Log {
			l, err := slidinglog.New(slidinglog.Config{Limit: limit, Window: window})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		lim, err := ratelimit.New(log(1, time.Microsecond), st, ratelimit.WithClock(fake), ratelimit.WithName("shrink"))
		if err != nil {
			t.Fatal(err)
		}
		allow := func(want int64) {
			t.Helper()
			d, err := lim.Allow(ctx, "a")
			if err != nil || !d.Allowed() || d.Remaining() != want {
				t.Fatalf("Allow = %v, %v; want allowed with %d left", d, err, want)
			}
		}
		allow(0)
		fake.Advance(time.Microsecond)
		allow(0)
		fake.Advance(time.Microsecond)
		if err := lim.SetAlgorithm(log(2, 2*time.Microsecond)); err != nil {
			t.Fatal(err)
		}
		allow(0)
		if err := lim.SetAlgorithm(log(3, time.Microsecond)); err != nil {
			t.Fatal(err)
		}
		allow(1)
		if d, err := lim.Peek(ctx, "a"); err != nil || d.Remaining() != 1 {
			t.Fatalf("Peek after the window shrank = %v, %v; want 1 left, as the admission said", d, err)
		}
	})
}

// TestBookingServerClock: with clock.Server() the booking scripts read
// Redis's TIME: a booking's delay, its cancel and refunds (by key, and
// through Reservations) work on the server's clock as on a local one.
func TestBookingServerClock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		ctx := context.Background()
		st := newStore(t, target, redistest.Prefix(t))
		alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 0.5}) // 2 s a token
		if err != nil {
			t.Fatal(err)
		}
		lim, err := ratelimit.New(alg, st, ratelimit.WithName("server-clock"), ratelimit.WithClock(clock.Server()))
		if err != nil {
			t.Fatal(err)
		}
		first, err := lim.Reserve(ctx, "k")
		if err != nil || !first.OK() || first.Delay() != 0 {
			t.Fatalf("first Reserve = %v, %v", first, err)
		}
		second, err := lim.Reserve(ctx, "k")
		if err != nil || !second.OK() || second.Delay() < 1900*time.Millisecond || second.Delay() > 2*time.Second {
			t.Fatalf("second Reserve: delay %v, %v; want about 2 s", second.Delay(), err)
		}
		if err := second.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		third, err := lim.Reserve(ctx, "k")
		if err != nil || !third.OK() || third.Delay() < 1900*time.Millisecond || third.Delay() > 2*time.Second {
			t.Fatalf("after the cancel: delay %v, %v; want about 2 s again, not 4", third.Delay(), err)
		}
		// By key, nothing: the third booking is not due (only its
		// Reservation gives it back). Through their Reservations, both.
		if d, err := lim.Refund(ctx, "k", 2); err != nil || d.Remaining() != 0 {
			t.Fatalf("Refund by key with a booking not due: %v, %v; want nothing given back", d, err)
		}
		if _, err := third.Refund(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := first.Refund(ctx); err != nil {
			t.Fatal(err)
		}
		if d, err := lim.Peek(ctx, "k"); err != nil && target.Mini == nil || err == nil && d.Remaining() != 1 {
			t.Fatalf("after refunding both: %v, %v; want the bucket full", d, err)
		}
	})
}
