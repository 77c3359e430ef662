package ratelimit_test

// Tests of what README.md's recipes say each algorithm does: the numbers
// in "Pacing a third-party API" and "Limits per customer" come from here.

import (
	"context"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// admittedGreedily asks alg, on the fake clock, for as much as it admits
// at every millisecond from 0 to span inclusive, and returns the instants
// of the admissions, as offsets from the start.
func admittedGreedily(t *testing.T, alg algorithm.Algorithm, span time.Duration) []time.Duration {
	t.Helper()
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	lim, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	var at []time.Duration
	for off := time.Duration(0); off <= span; off += time.Millisecond {
		fake.Set(start.Add(off))
		for {
			d, err := lim.Allow(context.Background(), "partner")
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed() {
				break
			}
			at = append(at, off)
		}
	}
	return at
}

// mostInAnySecond returns the most admissions in a half-open window
// [t, t+1s) over the instants at.
func mostInAnySecond(at []time.Duration) int {
	most := 0
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j] < at[i]+time.Second; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

// TestREADMEPacing checks the recipe "at most 50 calls a second to a
// third party": tokenbucket.PerSecond(50) admits 50 at once and 100 by the
// end of its first second; slidinglog.PerSecond(50) admits the 50 at one
// instant and holds every rolling second to 50; gcra.PerSecond(50,
// gcra.Burst(1)) admits one every 20 ms; with Burst(10), 10 at once and
// 59 in the first second.
func TestREADMEPacing(t *testing.T) {
	count := func(at []time.Duration, upTo time.Duration) (n int) {
		for _, a := range at {
			if a <= upTo {
				n++
			}
		}
		return n
	}

	bucket, err := tokenbucket.PerSecond(50)
	if err != nil {
		t.Fatal(err)
	}
	at := admittedGreedily(t, bucket, 2*time.Second)
	if got, want := count(at, 0), 50; got != want {
		t.Errorf("tokenbucket.PerSecond(50): %d admitted at the first instant, want %d", got, want)
	}
	if got, want := count(at, time.Second), 100; got != want {
		t.Errorf("tokenbucket.PerSecond(50): %d admitted in [0, 1s], want %d", got, want)
	}
	if got, want := mostInAnySecond(at), 99; got != want {
		t.Errorf("tokenbucket.PerSecond(50): at most %d in a rolling second, want %d", got, want)
	}

	log, err := slidinglog.PerSecond(50)
	if err != nil {
		t.Fatal(err)
	}
	at = admittedGreedily(t, log, 2*time.Second)
	if got, want := count(at, 0), 50; got != want {
		t.Errorf("slidinglog.PerSecond(50): %d admitted at the first instant, want %d", got, want)
	}
	if got, want := count(at, time.Second-time.Millisecond), 50; got != want {
		t.Errorf("slidinglog.PerSecond(50): %d admitted in [0, 1s), want %d", got, want)
	}
	if got, want := mostInAnySecond(at), 50; got != want {
		t.Errorf("slidinglog.PerSecond(50): at most %d in a rolling second, want %d", got, want)
	}

	paced, err := gcra.PerSecond(50, gcra.Burst(1))
	if err != nil {
		t.Fatal(err)
	}
	at = admittedGreedily(t, paced, 2*time.Second)
	for i, a := range at {
		if want := time.Duration(i) * 20 * time.Millisecond; a != want {
			t.Fatalf("gcra.PerSecond(50, gcra.Burst(1)): admission %d at %v, want %v", i, a, want)
		}
	}
	if got, want := len(at), 101; got != want { // 0, 20 ms, …, 2 s
		t.Errorf("gcra.PerSecond(50, gcra.Burst(1)): %d admitted in [0, 2s], want %d", got, want)
	}
	if got, want := mostInAnySecond(at), 50; got != want {
		t.Errorf("gcra.PerSecond(50, gcra.Burst(1)): at most %d in a rolling second, want %d", got, want)
	}

	bursty, err := gcra.PerSecond(50, gcra.Burst(10))
	if err != nil {
		t.Fatal(err)
	}
	at = admittedGreedily(t, bursty, 2*time.Second)
	if got, want := count(at, 0), 10; got != want {
		t.Errorf("gcra.PerSecond(50, gcra.Burst(10)): %d admitted at the first instant, want %d", got, want)
	}
	if got, want := mostInAnySecond(at), 59; got != want {
		t.Errorf("gcra.PerSecond(50, gcra.Burst(10)): at most %d in a rolling second, want %d", got, want)
	}
}

// TestREADMEPlanChange checks what "Limits per customer" says happens on
// a plan change: every plan given to With decides under the base's quota,
// named or not, so a customer who used 50 of the free plan's 60 a minute
// keeps them used on an upgrade to 600 (550 left, not a fresh 600), and
// one who used 500 of 600 comes back to the free plan with nothing left
// (clamped to 60 used), not to the free plan's old state. Under
// algorithm.Proportional the fraction used carries: 50 of 60 is 500 of
// 600 (100 left), 500 of 600 is 50 of 60.
func TestREADMEPlanChange(t *testing.T) {
	free, err := tokenbucket.PerMinute(60)
	if err != nil {
		t.Fatal(err)
	}
	pro, err := tokenbucket.PerMinute(600)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name                         string
		opts                         []ratelimit.Option
		afterUpgrade, afterDowngrade int64
	}{
		{"named", []ratelimit.Option{ratelimit.WithName("plan")}, 550, 0},
		{"named, proportional", []ratelimit.Option{ratelimit.WithName("plan"), ratelimit.WithInheritance(algorithm.Proportional)}, 100, 10},
		{"unnamed", nil, 550, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clock.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
			base, err := ratelimit.New(free, memorystore.New[string](),
				append([]ratelimit.Option{ratelimit.WithClock(fake)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			onFree, err := base.With(free)
			if err != nil {
				t.Fatal(err)
			}
			onPro, err := base.With(pro)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := onFree.AllowN(ctx, "acme", 50); err != nil || !d.Allowed() {
				t.Fatalf("50 on the free plan: %v, %v", d, err)
			}
			d, err := onPro.Peek(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			if got := int64(d.Remaining()); got != tc.afterUpgrade {
				t.Errorf("after 50 of 60 and an upgrade to 600: %d left, want %d", got, tc.afterUpgrade)
			}
			// Spend the pro plan down to 100 left (500 used, under
			// one quota).
			if n := int(d.Remaining()) - 100; n > 0 {
				if d, err := onPro.AllowN(ctx, "acme", n); err != nil || !d.Allowed() {
					t.Fatalf("spending on the pro plan: %v, %v", d, err)
				}
			}
			d, err = onFree.Peek(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			if got := int64(d.Remaining()); got != tc.afterDowngrade {
				t.Errorf("after the downgrade: %d left, want %d", got, tc.afterDowngrade)
			}
		})
	}
}
