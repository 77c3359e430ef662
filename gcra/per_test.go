package gcra_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/steptest"
)

var maxPeriod = time.Duration(algorithm.MaxDuration) * time.Microsecond

// TestPer checks that a quota and a burst build the meter of the Config
// that says the same as one unit per Every (same Spec, same decisions),
// and that the meter reports the quota as it was said.
func TestPer(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func() (*gcra.Meter, error)
		cfg   gcra.Config
		quota algorithm.Quota
	}{
		{"100 per minute, burst 20",
			func() (*gcra.Meter, error) { return gcra.PerMinute(100, gcra.Burst(20)) },
			gcra.Config{Burst: 20, Every: 600 * time.Millisecond}, algorithm.Quota{Limit: 100, Window: time.Minute}},
		{"2 per second, burst 3",
			func() (*gcra.Meter, error) { return gcra.PerSecond(2, gcra.Burst(3)) },
			gcra.Config{Burst: 3, Every: 500 * time.Millisecond}, algorithm.Quota{Limit: 2, Window: time.Second}},
		{"1000 per hour, burst 1000 by default",
			func() (*gcra.Meter, error) { return gcra.PerHour(1000) },
			gcra.Config{Burst: 1000, Every: 3600 * time.Millisecond}, algorithm.Quota{Limit: 1000, Window: time.Hour}},
		{"3 per second: Every rounds up to 333,334µs",
			func() (*gcra.Meter, error) { return gcra.PerSecond(3) },
			gcra.Config{Burst: 3, Every: 333_334 * time.Microsecond}, algorithm.Quota{Limit: 3, Window: time.Second}},
		{"10 per 1.5s+999ns, burst 4: the period is truncated to whole µs",
			func() (*gcra.Meter, error) { return gcra.Per(10, 1500*time.Millisecond+999, gcra.Burst(4)) },
			gcra.Config{Burst: 4, Every: 150 * time.Millisecond}, algorithm.Quota{Limit: 10, Window: 1500 * time.Millisecond}},
		{"the last burst wins",
			func() (*gcra.Meter, error) { return gcra.PerSecond(10, gcra.Burst(1), gcra.Burst(4)) },
			gcra.Config{Burst: 4, Every: 100 * time.Millisecond}, algorithm.Quota{Limit: 10, Window: time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			if q := got.Quota(); q != c.quota {
				t.Errorf("Quota: got %+v, want %+v", q, c.quota)
			}
			steptest.Same(t, mustNew(t, c.cfg), got, t0)
		})
	}
}

// TestConfigQuota checks the quota of a meter built from a Config: Burst
// per Burst×Every, its Limit per Window.
func TestConfigQuota(t *testing.T) {
	for _, c := range []struct {
		cfg  gcra.Config
		want algorithm.Quota
	}{
		{gcra.Config{Burst: 20, Every: 3 * time.Second}, algorithm.Quota{Limit: 20, Window: time.Minute}},
		{gcra.Config{Burst: 1, Every: time.Microsecond}, algorithm.Quota{Limit: 1, Window: time.Microsecond}},
		{gcra.Config{Burst: 5, Every: time.Second + 999}, algorithm.Quota{Limit: 5, Window: 5 * time.Second}},
	} {
		m := mustNew(t, c.cfg)
		if got := m.Quota(); got != c.want {
			t.Errorf("New(%+v).Quota(): got %+v, want %+v", c.cfg, got, c.want)
		}
		if got, lw := m.Quota(), (algorithm.Quota{Limit: m.Limit(), Window: m.Window()}); got != lw {
			t.Errorf("New(%+v).Quota(): got %+v, want Limit per Window, %+v", c.cfg, got, lw)
		}
	}
}

// TestPerInvalid checks that quotas and bursts out of range are errors
// wrapping ErrInvalidConfig, and never a panic.
func TestPerInvalid(t *testing.T) {
	b := gcra.Burst
	for _, c := range []struct {
		name   string
		n      int64
		period time.Duration
		opts   []gcra.Option
	}{
		{"n 0", 0, time.Second, nil},
		{"n -1", -1, time.Second, nil},
		{"n above MaxLimit", algorithm.MaxLimit + 1, time.Second, []gcra.Option{b(1)}},
		{"n MaxInt64", math.MaxInt64, time.Second, []gcra.Option{b(1)}},
		{"period 0", 10, 0, nil},
		{"period -1s", 10, -time.Second, nil},
		{"period below 1µs", 10, 999 * time.Nanosecond, nil},
		{"period above MaxDuration", 10, maxPeriod + time.Microsecond, nil},
		{"period MinInt64", 10, math.MinInt64, nil},
		{"burst 0", 10, time.Second, []gcra.Option{b(0)}},
		{"burst -1", 10, time.Second, []gcra.Option{b(-1)}},
		{"burst above MaxLimit", 10, time.Second, []gcra.Option{b(algorithm.MaxLimit + 1)}},
		{"a burst set, then 0", 10, time.Second, []gcra.Option{b(5), b(0)}},
		{"Burst×Every above MaxDuration", 1, maxPeriod, []gcra.Option{b(2)}},
		{"Burst×Every overflows", 1, maxPeriod, []gcra.Option{b(algorithm.MaxLimit)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, err := gcra.Per(c.n, c.period, c.opts...); !errors.Is(err, algorithm.ErrInvalidConfig) || got != nil {
				t.Errorf("Per(%d, %v): got %v, %v, want nil and ErrInvalidConfig", c.n, c.period, got, err)
			}
		})
	}
}

// FuzzPer checks that every quota and burst either builds a meter that
// reports that quota and never admits more than it in the long run, or is
// an error wrapping ErrInvalidConfig; never a panic.
func FuzzPer(f *testing.F) {
	f.Add(int64(100), int64(time.Minute), int64(20))
	f.Add(int64(3), int64(time.Second), int64(3))
	f.Add(algorithm.MaxLimit, int64(algorithm.MaxDuration)*1000, algorithm.MaxLimit)
	f.Add(int64(-1), int64(math.MinInt64), int64(0))
	f.Fuzz(func(t *testing.T, n, period, burst int64) {
		d := time.Duration(period)
		m, err := gcra.Per(n, d, gcra.Burst(burst))
		if err != nil {
			if !errors.Is(err, algorithm.ErrInvalidConfig) {
				t.Fatalf("Per(%d, %v, Burst(%d)): %v, want ErrInvalidConfig", n, d, burst, err)
			}
			return
		}
		want := algorithm.Quota{Limit: n, Window: d.Truncate(time.Microsecond)}
		if q := m.Quota(); q != want {
			t.Fatalf("Per(%d, %v, Burst(%d)).Quota(): got %+v, want %+v", n, d, burst, q, want)
		}
		// One unit every Every, at most n per period, and less than one
		// µs per unit short of it.
		every, micros := int64(m.Spec().Params[1]), want.Window.Microseconds()
		if every*n < micros || (every-1)*n >= micros {
			t.Fatalf("Per(%d, %v, Burst(%d)): one unit every %dµs, want the least with %d of them at least %dµs", n, d, burst, every, n, micros)
		}
	})
}
