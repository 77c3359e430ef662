package gcra_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/gcra"
)

// Design §2.3: rounding the debt up loses no whole unit when widening.
// With Burst′ ≥ Burst, as-is leaves ⌊(τ′ − d′)/Every′⌋ ≥ ⌊(τ − d)/Every⌋
// for every debt d ≤ τ, whatever the two intervals.
func TestInheritWideningKeepsWholeUnits(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 3))
	const now = 1_700_000_000_000_000
	for i := 0; i < 20000; i++ {
		b := 1 + rng.Int64N(1000)
		e := 1 + rng.Int64N(algorithm.MaxDuration/b)
		b2 := b + rng.Int64N(1000)
		e2 := 1 + rng.Int64N(algorithm.MaxDuration/b2)
		if i%4 == 0 { // small intervals, where the roundings bite
			e, e2 = 1+rng.Int64N(7), 1+rng.Int64N(7)
		}
		from := mustNew(t, gcra.Config{Burst: b, Every: time.Duration(e) * time.Microsecond})
		to := mustNew(t, gcra.Config{Burst: b2, Every: time.Duration(e2) * time.Microsecond})
		d := rng.Int64N(b*e + 1)
		s := algorithm.State{N0: now + d}
		next := to.Inherit(from.Tag(), s, now, algorithm.AsIs)
		if got, was := to.Peek(next, now, 1).Remaining, from.Peek(s, now, 1).Remaining; got < was {
			t.Fatalf("%v → %v with debt %d: %d remaining, want at least the %d before", from, to, d, got, was)
		}
	}
}

// The debt is carried in exact 128-bit arithmetic at the extremes:
// τ = 2^48 with Every 1µs into Every 2^48µs, and back.
func TestInheritExtremes(t *testing.T) {
	const now = 1_700_000_000_000_000
	fine := mustNew(t, gcra.Config{Burst: algorithm.MaxDuration >> 8, Every: 256 * time.Microsecond})
	coarse := mustNew(t, gcra.Config{Burst: 1, Every: time.Duration(algorithm.MaxDuration) * time.Microsecond})
	for _, c := range []struct {
		from, to *gcra.Meter
		debt     int64
		rule     algorithm.Rule
		want     int64 // the new debt
	}{
		{fine, coarse, 1, algorithm.AsIs, 1 << 40},                                                   // ⌈1·2^48/256⌉: 1/256 of a unit
		{fine, coarse, 1, algorithm.Proportional, 1},                                                 // ⌈1·2^48/2^48⌉
		{fine, coarse, algorithm.MaxDuration, algorithm.AsIs, algorithm.MaxDuration},                 // clamped to τ′
		{coarse, fine, algorithm.MaxDuration - 1, algorithm.AsIs, 256},                               // ⌈(2^48−1)·256/2^48⌉: one unit
		{coarse, fine, algorithm.MaxDuration - 1, algorithm.Proportional, algorithm.MaxDuration - 1}, // τ′ = τ
		{coarse, fine, algorithm.MaxDuration + 5, algorithm.Proportional, algorithm.MaxDuration + 1}, // 5µs beyond τ: ⌈5·256/2^48⌉, a debt of units kept
	} {
		next := c.to.Inherit(c.from.Tag(), algorithm.State{N0: now + c.debt}, now, c.rule)
		if got := next.N0 - now; got != c.want {
			t.Errorf("%v → %v (%v), debt %d: new debt %d, want %d", c.from, c.to, c.rule, c.debt, got, c.want)
		}
	}
}
