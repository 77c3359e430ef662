package gcra_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/steptest"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// Named instants, in Unix µs, d apart.
const (
	d   = 250_000 // µs
	sec = 1_000_000

	t0  = 1_700_000_000 * sec
	t1  = t0 + 1*d
	t2  = t0 + 2*d
	t4  = t0 + 4*d
	t6  = t0 + 6*d
	t10 = t0 + 10*d
	t12 = t0 + 12*d
)

// The step tables' vocabulary, from steptest.
const peek = steptest.Peek

// step is a steptest.Step of this package, so that tables stay unkeyed.
type step struct {
	At   int64
	Cost int64
	Want algorithm.Result
}

var ok, no = steptest.OK, steptest.No

// run replays steps on a state of alg created at t0.
func run(t *testing.T, alg algorithm.Algorithm, steps []step) {
	t.Helper()
	steptest.Run(t, alg, t0, steps)
}

func mustNew(t *testing.T, cfg gcra.Config) *gcra.Meter {
	t.Helper()
	m, err := gcra.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return m
}

func TestMeter(t *testing.T) {
	// Bursts of 3, one unit every 2d: at rest 6d after the burst is used.
	m := mustNew(t, gcra.Config{Burst: 3, Every: 2 * d * time.Microsecond})
	run(t, m, []step{
		{t0, peek, ok(3, 0)}, // at rest
		{t0, 1, ok(2, 2*d)},  // TAT moves to t2
		{t0, 2, ok(0, 6*d)},  // TAT t6: the whole burst is used
		{t0, 1, no(0, 2*d, 6*d)},
		{t1, peek, no(0, d, 5*d)}, // a unit is back at t2
		{t2, 1, ok(0, 6*d)},       // TAT t8
		{t4, peek, ok(1, 4*d)},
		{t4, 2, no(1, 2*d, 4*d)}, // the second unit is back at t6
		{t6, 2, ok(0, 6*d)},      // TAT t12
		{t12 - 1, peek, ok(2, 1)},
		{t12, peek, ok(3, 0)},
	})
}

func TestMeterLargeCost(t *testing.T) {
	// The whole burst at once, and the time for all of it to come back.
	m := mustNew(t, gcra.Config{Burst: algorithm.MaxLimit, Every: 256 * time.Microsecond})
	const tau = algorithm.MaxLimit * 256 // = algorithm.MaxDuration
	run(t, m, []step{
		{t0, algorithm.MaxLimit, ok(0, tau)},
		{t0 + 255, 1, no(0, 1, tau-255)},
		{t0 + 256, 1, ok(0, tau)},
		{t0 + tau - 1, peek, ok(algorithm.MaxLimit-2, 257)},
	})
}

func TestMeterClockStepsBack(t *testing.T) {
	m := mustNew(t, gcra.Config{Burst: 3, Every: 2 * d * time.Microsecond})
	run(t, m, []step{
		{t4, 3, ok(0, 6*d)}, // TAT t10
		// Back to t2: TAT is 8d away, more than the burst's 6d, so
		// nothing fits until t6, when a unit would be back had the clock
		// not stepped back; the key rests at t10 all the same.
		{t2, peek, no(0, 4*d, 8*d)},
		{t2, 1, no(0, 4*d, 8*d)},
		{t6, 1, ok(0, 6*d)}, // TAT t12
		{t10, peek, ok(2, 2*d)},
	})
}

func TestNewValidates(t *testing.T) {
	const maxEvery = time.Duration(algorithm.MaxDuration) * time.Microsecond
	for _, cfg := range []gcra.Config{
		{Burst: 0, Every: time.Second},
		{Burst: -1, Every: time.Second},
		{Burst: math.MinInt64, Every: time.Second},
		{Burst: algorithm.MaxLimit + 1, Every: time.Microsecond},
		{Burst: math.MaxInt64, Every: time.Microsecond},
		{Burst: 1, Every: 0},
		{Burst: 1, Every: -time.Second},
		{Burst: 1, Every: time.Microsecond - 1}, // truncates to 0µs
		{Burst: 1, Every: math.MinInt64},
		{Burst: 1, Every: maxEvery + time.Microsecond},
		{Burst: 2, Every: maxEvery},                                // 2 × MaxDuration to rest
		{Burst: algorithm.MaxLimit, Every: 257 * time.Microsecond}, // just above
		{Burst: algorithm.MaxLimit, Every: math.MaxInt64},          // the product overflows
	} {
		m, err := gcra.New(cfg)
		if !errors.Is(err, algorithm.ErrInvalidConfig) || m != nil {
			t.Errorf("New(%+v): got (%v, %v), want (nil, ErrInvalidConfig)", cfg, m, err)
		}
	}
	for _, cfg := range []gcra.Config{
		{Burst: 1, Every: time.Microsecond},
		{Burst: 1, Every: 2*time.Microsecond - 1}, // truncates to 1µs
		{Burst: 1, Every: maxEvery},
		{Burst: algorithm.MaxLimit, Every: 256 * time.Microsecond},
		{Burst: 100, Every: time.Minute},
	} {
		m, err := gcra.New(cfg)
		if err != nil || m.Limit() != cfg.Burst || m.Window() != time.Duration(cfg.Burst)*cfg.Every.Truncate(time.Microsecond) {
			t.Errorf("New(%+v): got (%v, %v), want a meter of burst %d", cfg, m, err, cfg.Burst)
		}
	}
}

func TestSpec(t *testing.T) {
	m := mustNew(t, gcra.Config{Burst: 7, Every: 1500 * time.Millisecond})
	got := m.Spec()
	if got.Name != "gcra" || len(got.Params) != 2 || got.Params[0] != 7 || got.Params[1] != 1_500_000 {
		t.Errorf("Spec(): got %+v, want {gcra [7 1.5e+06]}", got)
	}
	if s := m.String(); s != "gcra(burst=7, every=1.5s)" {
		t.Errorf("String(): got %q", s)
	}
}

// TestSameAsTokenBucket replays random sequences on a meter and on the
// continuous token bucket of the same burst and rate, with emission
// intervals of a power of two microseconds: the bucket's refill per µs,
// 2^-k, is then exact in floating point, so both compute exactly and must
// agree on every field of every result.
func TestSameAsTokenBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for seq := range 300 {
		burst := []int64{1, 2, 5, 100, 1 << 20}[seq%5]
		every := int64(1) << rng.IntN(21) // 1µs … ~1s
		m := mustNew(t, gcra.Config{Burst: burst, Every: time.Duration(every) * time.Microsecond})
		b, err := tokenbucket.New(tokenbucket.Config{Capacity: burst, Rate: 1e6 / float64(every)})
		if err != nil {
			t.Fatal(err)
		}
		now := int64(t0) + rng.Int64N(sec)
		sm, sb := m.Init(algorithm.State{}, now), b.Init(algorithm.State{}, now)
		for i := range 200 {
			switch rng.IntN(4) {
			case 0:
			case 1:
				now += rng.Int64N(3)
			case 2:
				now += rng.Int64N(2 * every)
			default:
				now += rng.Int64N(burst*every + 2)
			}
			cost := 1 + rng.Int64N(min(burst, 4))
			if rng.IntN(5) == 0 {
				cost = 1 + rng.Int64N(burst)
			}
			var got, want algorithm.Result
			if rng.IntN(4) == 0 {
				got, want = m.Peek(sm, now, cost), b.Peek(sb, now, cost)
			} else {
				sm, got = m.Take(sm, now, cost)
				sb, want = b.Take(sb, now, cost)
			}
			if got != want {
				t.Fatalf("burst %d, every %dµs, step %d: cost %d at +%dµs: gcra %+v, tokenbucket %+v",
					burst, every, i, cost, now-t0, got, want)
			}
		}
	}
}
