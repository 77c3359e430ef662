package goredisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
)

// TestLogWindowShrinkKeepsBase: a sliding log carried from a longer window
// to a shorter one keeps the member its count starts from. The script
// removed the dead members by rank after removing the old header, one rank
// too far, and dropped that member with them: the next decision counted
// every admission ever made (found by storetest's Reconfigure on
// miniredis).
func TestLogWindowShrinkKeepsBase(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
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
		lim, err := ratelimit.New(log(1, time.Microsecond), st, ratelimit.WithClock(fake), ratelimit.WithStateID("shrink"))
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
