package tokenbucket_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/steptest"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

var maxPeriod = time.Duration(algorithm.MaxDuration) * time.Microsecond

// TestPer checks that a quota and a burst build the bucket of the Config
// that says the same in tokens per second (same Spec, same decisions), and
// that the bucket reports the quota as it was said.
func TestPer(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func() (*tokenbucket.Bucket, error)
		cfg   tokenbucket.Config
		quota algorithm.Quota
	}{
		{"100 per minute, burst 20",
			func() (*tokenbucket.Bucket, error) { return tokenbucket.PerMinute(100, tokenbucket.Burst(20)) },
			tokenbucket.Config{Capacity: 20, Rate: 100.0 / 60}, algorithm.Quota{Limit: 100, Window: time.Minute}},
		{"2 per second, burst 3",
			func() (*tokenbucket.Bucket, error) { return tokenbucket.PerSecond(2, tokenbucket.Burst(3)) },
			tokenbucket.Config{Capacity: 3, Rate: 2}, algorithm.Quota{Limit: 2, Window: time.Second}},
		{"1000 per hour, burst 1000 by default",
			func() (*tokenbucket.Bucket, error) { return tokenbucket.PerHour(1000) },
			tokenbucket.Config{Capacity: 1000, Rate: 1000.0 / 3600}, algorithm.Quota{Limit: 1000, Window: time.Hour}},
		{"5 per 1.5s, burst 50",
			func() (*tokenbucket.Bucket, error) {
				return tokenbucket.Per(5, 1500*time.Millisecond, tokenbucket.Burst(50))
			},
			tokenbucket.Config{Capacity: 50, Rate: 5 / 1.5}, algorithm.Quota{Limit: 5, Window: 1500 * time.Millisecond}},
		{"7 per 1s+999ns: the period is truncated to whole µs",
			func() (*tokenbucket.Bucket, error) { return tokenbucket.Per(7, time.Second+999) },
			tokenbucket.Config{Capacity: 7, Rate: 7}, algorithm.Quota{Limit: 7, Window: time.Second}},
		{"the last burst wins",
			func() (*tokenbucket.Bucket, error) {
				return tokenbucket.PerSecond(10, tokenbucket.Burst(1), tokenbucket.Burst(4))
			},
			tokenbucket.Config{Capacity: 4, Rate: 10}, algorithm.Quota{Limit: 10, Window: time.Second}},
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

// TestIntervalPer checks that a quota and a burst build the interval
// bucket that adds the finest exact whole tokens on a schedule.
func TestIntervalPer(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func() (*tokenbucket.IntervalBucket, error)
		cfg   tokenbucket.IntervalConfig
		quota algorithm.Quota
	}{
		{"100 per minute, burst 20: a token every 600ms",
			func() (*tokenbucket.IntervalBucket, error) {
				return tokenbucket.IntervalPer(100, time.Minute, tokenbucket.Burst(20))
			},
			tokenbucket.IntervalConfig{Capacity: 20, Tokens: 1, Interval: 600 * time.Millisecond},
			algorithm.Quota{Limit: 100, Window: time.Minute}},
		{"1 per second, burst 10: the redis.io guide's bucket",
			func() (*tokenbucket.IntervalBucket, error) {
				return tokenbucket.IntervalPer(1, time.Second, tokenbucket.Burst(10))
			},
			tokenbucket.IntervalConfig{Capacity: 10, Tokens: 1, Interval: time.Second},
			algorithm.Quota{Limit: 1, Window: time.Second}},
		{"3 per second: no whole µs divides it, so 3 every second",
			func() (*tokenbucket.IntervalBucket, error) { return tokenbucket.IntervalPer(3, time.Second) },
			tokenbucket.IntervalConfig{Capacity: 3, Tokens: 3, Interval: time.Second},
			algorithm.Quota{Limit: 3, Window: time.Second}},
		{"6 per second, burst 4: 3 every 500ms",
			func() (*tokenbucket.IntervalBucket, error) {
				return tokenbucket.IntervalPer(6, time.Second, tokenbucket.Burst(4))
			},
			tokenbucket.IntervalConfig{Capacity: 4, Tokens: 3, Interval: 500 * time.Millisecond},
			algorithm.Quota{Limit: 6, Window: time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			if q := got.Quota(); q != c.quota {
				t.Errorf("Quota: got %+v, want %+v", q, c.quota)
			}
			steptest.Same(t, mustNewInterval(t, c.cfg), got, t0)
		})
	}
}

// TestConfigQuota checks the quota of buckets built from a Config:
// Capacity per the time an empty bucket takes to refill, which is their
// Limit per Window.
func TestConfigQuota(t *testing.T) {
	for _, c := range []struct {
		name string
		alg  interface {
			algorithm.Algorithm
			algorithm.Quoter
			Window() time.Duration
		}
		want algorithm.Quota
	}{
		{"Capacity 20, Rate 2", mustNew(t, tokenbucket.Config{Capacity: 20, Rate: 2}),
			algorithm.Quota{Limit: 20, Window: 10 * time.Second}},
		{"Capacity 20, Rate 100.0/60", mustNew(t, tokenbucket.Config{Capacity: 20, Rate: 100.0 / 60}),
			algorithm.Quota{Limit: 20, Window: 12 * time.Second}},
		{"Capacity 1, Rate 3: the window rounds up to a µs", mustNew(t, tokenbucket.Config{Capacity: 1, Rate: 3}),
			algorithm.Quota{Limit: 1, Window: 333_334 * time.Microsecond}},
		{"interval: Capacity 10, 1 every second",
			mustNewInterval(t, tokenbucket.IntervalConfig{Capacity: 10, Tokens: 1, Interval: time.Second}),
			algorithm.Quota{Limit: 10, Window: 10 * time.Second}},
		{"interval: Capacity 10, 3 every second",
			mustNewInterval(t, tokenbucket.IntervalConfig{Capacity: 10, Tokens: 3, Interval: time.Second}),
			algorithm.Quota{Limit: 10, Window: 4 * time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.alg.Quota()
			if got != c.want {
				t.Errorf("Quota: got %+v, want %+v", got, c.want)
			}
			if lw := (algorithm.Quota{Limit: c.alg.Limit(), Window: c.alg.Window()}); got != lw {
				t.Errorf("Quota: got %+v, want Limit per Window, %+v", got, lw)
			}
		})
	}
}

// TestPerInvalid checks that quotas and bursts out of range are errors
// wrapping ErrInvalidConfig, from both flavours, and never a panic.
func TestPerInvalid(t *testing.T) {
	b := tokenbucket.Burst
	for _, c := range []struct {
		name   string
		n      int64
		period time.Duration
		opts   []tokenbucket.Option
	}{
		{"n 0", 0, time.Second, nil},
		{"n -1", -1, time.Second, nil},
		{"n above MaxLimit", algorithm.MaxLimit + 1, time.Second, []tokenbucket.Option{b(1)}},
		{"n MaxInt64", math.MaxInt64, time.Second, []tokenbucket.Option{b(1)}},
		{"period 0", 10, 0, nil},
		{"period -1s", 10, -time.Second, nil},
		{"period below 1µs", 10, 999 * time.Nanosecond, nil},
		{"period above MaxDuration", 10, maxPeriod + time.Microsecond, nil},
		{"period MinInt64", 10, math.MinInt64, nil},
		{"burst 0", 10, time.Second, []tokenbucket.Option{b(0)}},
		{"burst -1", 10, time.Second, []tokenbucket.Option{b(-1)}},
		{"burst above MaxLimit", 10, time.Second, []tokenbucket.Option{b(algorithm.MaxLimit + 1)}},
		{"a burst set, then 0", 10, time.Second, []tokenbucket.Option{b(5), b(0)}},
		{"refilling the burst takes longer than MaxDuration", 1, maxPeriod, []tokenbucket.Option{b(2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, err := tokenbucket.Per(c.n, c.period, c.opts...); !errors.Is(err, algorithm.ErrInvalidConfig) || got != nil {
				t.Errorf("Per(%d, %v): got %v, %v, want nil and ErrInvalidConfig", c.n, c.period, got, err)
			}
			if got, err := tokenbucket.IntervalPer(c.n, c.period, c.opts...); !errors.Is(err, algorithm.ErrInvalidConfig) || got != nil {
				t.Errorf("IntervalPer(%d, %v): got %v, %v, want nil and ErrInvalidConfig", c.n, c.period, got, err)
			}
		})
	}
}

// TestIntervalPerBurstTooSmall checks that IntervalPer refuses a burst that
// cannot hold the tokens one interval adds, which would admit less than
// the quota, where Per builds the bucket.
func TestIntervalPerBurstTooSmall(t *testing.T) {
	got, err := tokenbucket.IntervalPer(3, time.Second, tokenbucket.Burst(2))
	if !errors.Is(err, algorithm.ErrInvalidConfig) || got != nil {
		t.Errorf("IntervalPer(3, 1s, Burst(2)): got %v, %v, want nil and ErrInvalidConfig", got, err)
	}
	if _, err := tokenbucket.Per(3, time.Second, tokenbucket.Burst(2)); err != nil {
		t.Errorf("Per(3, 1s, Burst(2)): %v", err)
	}
}

// FuzzPer checks that every quota and burst either builds a bucket that
// reports that quota, is the Config's, and is valid, or is an error
// wrapping ErrInvalidConfig; never a panic.
func FuzzPer(f *testing.F) {
	f.Add(int64(100), int64(time.Minute), int64(20))
	f.Add(int64(3), int64(time.Second), int64(2))
	f.Add(int64(1), int64(algorithm.MaxDuration)*1000, int64(1))
	f.Add(algorithm.MaxLimit, int64(time.Microsecond), algorithm.MaxLimit)
	f.Add(int64(-1), int64(math.MinInt64), int64(0))
	f.Fuzz(func(t *testing.T, n, period, burst int64) {
		d := time.Duration(period)
		want := algorithm.Quota{Limit: n, Window: d.Truncate(time.Microsecond)}
		if b, err := tokenbucket.Per(n, d, tokenbucket.Burst(burst)); err != nil {
			if !errors.Is(err, algorithm.ErrInvalidConfig) {
				t.Fatalf("Per(%d, %v, Burst(%d)): %v, want ErrInvalidConfig", n, d, burst, err)
			}
		} else {
			if q := b.Quota(); q != want {
				t.Fatalf("Per(%d, %v, Burst(%d)).Quota(): got %+v, want %+v", n, d, burst, q, want)
			}
			cfg, err := tokenbucket.New(tokenbucket.Config{Capacity: burst, Rate: float64(n) / want.Window.Seconds()})
			if err != nil {
				t.Fatalf("Per(%d, %v, Burst(%d)) built a bucket, its Config does not: %v", n, d, burst, err)
			}
			if got, want := b.Spec(), cfg.Spec(); got.Params[0] != want.Params[0] || got.Params[1] != want.Params[1] {
				t.Fatalf("Per(%d, %v, Burst(%d)).Spec(): got %v, want its Config's %v", n, d, burst, got, want)
			}
		}
		if b, err := tokenbucket.IntervalPer(n, d, tokenbucket.Burst(burst)); err != nil {
			if !errors.Is(err, algorithm.ErrInvalidConfig) {
				t.Fatalf("IntervalPer(%d, %v, Burst(%d)): %v, want ErrInvalidConfig", n, d, burst, err)
			}
		} else {
			if q := b.Quota(); q != want {
				t.Fatalf("IntervalPer(%d, %v, Burst(%d)).Quota(): got %+v, want %+v", n, d, burst, q, want)
			}
			// Exactly n per period: whole intervals of whole tokens.
			p := b.Spec().Params
			tokens, interval := int64(p[1]), int64(p[2])
			if micros := want.Window.Microseconds(); micros%interval != 0 || tokens*(micros/interval) != n {
				t.Fatalf("IntervalPer(%d, %v, Burst(%d)): %d every %dµs, not %d per %dµs", n, d, burst, tokens, interval, n, micros)
			}
		}
	})
}
