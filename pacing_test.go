//go:build go1.25

package ratelimit_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// lateClock is the local clock (synctest's, in a bubble) whose timers fire
// late, each by what late says for the instant it was due: a goroutine
// woken late by a loaded scheduler.
type lateClock struct {
	start time.Time
	late  func(due time.Duration) time.Duration // due: since start
}

func (c lateClock) Now() time.Time { return time.Now() }

func (c lateClock) NewTimer(d time.Duration) clock.Timer {
	due := time.Since(c.start) + d
	return lateTimer{time.NewTimer(d + c.late(due))}
}

type lateTimer struct{ t *time.Timer }

func (t lateTimer) C() <-chan time.Time { return t.t.C }
func (t lateTimer) Stop() bool          { return t.t.Stop() }

// mostInAnyWindow returns the most instants of at in a half-open window
// [x, x+w).
func mostInAnyWindow(at []time.Duration, w time.Duration) int {
	at = slices.Sorted(slices.Values(at))
	most := 0
	for i, j := 0, 0; i < len(at); i++ {
		for j < len(at) && at[j] < at[i]+w {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// pacedSends runs workers goroutines, each calling lim.Wait and then,
// after send() more, "sending", until span has passed, and returns the
// instants of the sends since start, in whole microseconds as the Limiter
// reads its clock (a send a fraction of a microsecond after its admission
// is at that admission's instant). It runs in a synctest bubble, where
// nothing but the clock's timers and send's delays moves time.
func pacedSends(t *testing.T, lim *ratelimit.Limiter[string], start time.Time, workers int, span time.Duration, send func() time.Duration) []time.Duration {
	t.Helper()
	var (
		mu    sync.Mutex
		sends []time.Duration
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < span {
				if _, err := lim.Wait(context.Background(), "partner-api"); err != nil {
					t.Error(err)
					return
				}
				if d := send(); d > 0 {
					time.Sleep(d)
				}
				mu.Lock()
				sends = append(sends, time.Since(start).Truncate(time.Microsecond))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return sends
}

// TestPacingAtSendTime checks what the README's pacing recipe says
// scheduling jitter does to "at most 50 calls in any second", with the
// limiter's timers firing late (a goroutine woken late by a busy machine)
// under testing/synctest, so that every instant is exact:
//
//   - Wait books each call's instant ahead and sleeps until it: a worker
//     woken up to J late sends late, next to the calls booked after it,
//     and a second measured at the sends holds up to 50 + ⌈J / 20 ms⌉
//     (the sends of a second are those booked in a second and J);
//   - with WithMaxBookAhead(0) Wait books nothing ahead: each waiter is
//     decided when it wakes, so the instants it is admitted at, late or
//     not, are 20 ms apart, and every second measured at admission holds
//     at most 50;
//   - a call made up to J after its admission keeps the bound when the
//     pace leaves J of margin: 50 per 1 s + J, one every 20.4 ms for
//     J = 20 ms, admits at most 50 in any 1 s + J, so at most 50 calls in
//     any second.
//
// Each runs 8 workers for 5 s, with lateness drawn at random for 20 seeds,
// and with a fixed pattern (every 7th instant 70 ms late) that shows the
// first bound reached.
func TestPacingAtSendTime(t *testing.T) {
	const (
		workers = 8
		span    = 5 * time.Second
		most    = 77 * time.Millisecond // the latest wake-up the issue measured under load
		every   = 20 * time.Millisecond
	)
	type lateness struct {
		name string
		new  func(seed uint64) (late func(time.Duration) time.Duration, worst func() time.Duration)
	}
	random := lateness{"random", func(seed uint64) (func(time.Duration) time.Duration, func() time.Duration) {
		var mu sync.Mutex
		rng := rand.New(rand.NewPCG(seed, 49))
		var worst time.Duration
		return func(time.Duration) time.Duration {
				mu.Lock()
				defer mu.Unlock()
				if rng.IntN(3) != 0 {
					return 0
				}
				d := time.Duration(rng.Int64N(int64(most) + 1))
				worst = max(worst, d)
				return d
			}, func() time.Duration {
				mu.Lock()
				defer mu.Unlock()
				return worst
			}
	}}
	pattern := lateness{"pattern", func(uint64) (func(time.Duration) time.Duration, func() time.Duration) {
		return func(due time.Duration) time.Duration {
			if due/every%7 == 3 {
				return 70 * time.Millisecond
			}
			return 0
		}, func() time.Duration { return 70 * time.Millisecond }
	}}
	run := func(t *testing.T, l lateness, seed uint64, pace time.Duration, opts []ratelimit.Option, send func(*rand.Rand) time.Duration) (sends []time.Duration, worst time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			late, worstOf := l.new(seed)
			start := time.Now()
			alg, err := gcra.Per(50, pace, gcra.Burst(1))
			if err != nil {
				t.Fatal(err)
			}
			lim, err := ratelimit.New(alg, memorystore.New[string](),
				append([]ratelimit.Option{ratelimit.WithClock(lateClock{start: start, late: late})}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			rng := rand.New(rand.NewPCG(seed, 5))
			sends = pacedSends(t, lim, start, workers, span, func() time.Duration {
				mu.Lock()
				defer mu.Unlock()
				return send(rng)
			})
			worst = worstOf()
		})
		if len(sends) < int(span/(pace/50+most)) {
			t.Fatalf("%d calls in %v, want at least one per %v (the pace and the latest wake-up)", len(sends), span, pace/50+most)
		}
		return sends, worst
	}
	now := func(*rand.Rand) time.Duration { return 0 }

	t.Run("booked ahead", func(t *testing.T) {
		for _, l := range []lateness{pattern, random} {
			reached := 0
			for seed := range uint64(20) {
				sends, worst := run(t, l, seed, time.Second, nil, now)
				got := mostInAnyWindow(sends, time.Second)
				if bound := 50 + int((worst+every-1)/every); got > bound {
					t.Errorf("%s, seed %d: %d calls in a second with wake-ups up to %v late, want at most %d", l.name, seed, got, worst, bound)
				}
				if got > 50 {
					reached++
				}
			}
			t.Logf("%s: more than 50 calls in a second in %d of 20 runs", l.name, reached)
			if l.name == "pattern" && reached == 0 {
				t.Errorf("pattern: never more than 50 calls in a second; the test no longer shows what jitter does")
			}
		}
	})
	t.Run("WithMaxBookAhead(0)", func(t *testing.T) {
		for _, l := range []lateness{pattern, random} {
			for seed := range uint64(20) {
				sends, worst := run(t, l, seed, time.Second, []ratelimit.Option{ratelimit.WithMaxBookAhead(0)}, now)
				if got := mostInAnyWindow(sends, time.Second); got > 50 {
					t.Errorf("%s, seed %d: %d calls in a second with wake-ups up to %v late, want at most 50", l.name, seed, got, worst)
				}
			}
		}
	})
	t.Run("margin", func(t *testing.T) {
		const margin = 20 * time.Millisecond
		after := func(rng *rand.Rand) time.Duration { return time.Duration(rng.Int64N(int64(margin) + 1)) }
		for _, l := range []lateness{pattern, random} {
			for seed := range uint64(20) {
				sends, worst := run(t, l, seed, time.Second+margin, []ratelimit.Option{ratelimit.WithMaxBookAhead(0)}, after)
				if got := mostInAnyWindow(sends, time.Second); got > 50 {
					t.Errorf("%s, seed %d: %d calls in a second, each made up to %v after its admission, wake-ups up to %v late, want at most 50", l.name, seed, got, margin, worst)
				}
			}
		}
	})
}
