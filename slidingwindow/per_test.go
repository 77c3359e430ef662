package slidingwindow_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/steptest"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
)

// TestPer checks that a quota builds the algorithm of the Config that
// says the same (same Spec, same decisions), and that both report the
// quota as it was said.
func TestPer(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func() (*slidingwindow.Window, error)
		cfg   slidingwindow.Config
	}{
		{"100 per minute", func() (*slidingwindow.Window, error) { return slidingwindow.PerMinute(100) },
			slidingwindow.Config{Limit: 100, Window: time.Minute}},
		{"5 per second", func() (*slidingwindow.Window, error) { return slidingwindow.PerSecond(5) },
			slidingwindow.Config{Limit: 5, Window: time.Second}},
		{"1000 per hour", func() (*slidingwindow.Window, error) { return slidingwindow.PerHour(1000) },
			slidingwindow.Config{Limit: 1000, Window: time.Hour}},
		{"5 per 15 minutes", func() (*slidingwindow.Window, error) { return slidingwindow.Per(5, 15*time.Minute) },
			slidingwindow.Config{Limit: 5, Window: 15 * time.Minute}},
		{"3 per 1.5s+999ns: the period is truncated to whole µs", func() (*slidingwindow.Window, error) { return slidingwindow.Per(3, 1500*time.Millisecond+999) },
			slidingwindow.Config{Limit: 3, Window: 1500 * time.Millisecond}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			want := mustNew(t, c.cfg)
			q := algorithm.Quota{Limit: c.cfg.Limit, Window: c.cfg.Window.Truncate(time.Microsecond)}
			if got := got.Quota(); got != q {
				t.Errorf("Quota: got %+v, want %+v", got, q)
			}
			if got := want.Quota(); got != q {
				t.Errorf("New(%+v).Quota(): got %+v, want %+v", c.cfg, got, q)
			}
			steptest.Same(t, want, got, t0)
		})
	}
}

// TestPerInvalid checks that quotas out of range are errors wrapping
// ErrInvalidConfig, and never a panic.
func TestPerInvalid(t *testing.T) {
	maxPeriod := time.Duration(algorithm.MaxDuration) * time.Microsecond
	for _, c := range []struct {
		name   string
		n      int64
		period time.Duration
	}{
		{"n 0", 0, time.Second},
		{"n -1", -1, time.Second},
		{"n above MaxLimit", algorithm.MaxLimit + 1, time.Second},
		{"n MaxInt64", math.MaxInt64, time.Second},
		{"period 0", 10, 0},
		{"period -1s", 10, -time.Second},
		{"period below 1µs", 10, 999 * time.Nanosecond},
		{"period above MaxDuration", 10, maxPeriod + time.Microsecond},
		{"period MinInt64", 10, math.MinInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, err := slidingwindow.Per(c.n, c.period); !errors.Is(err, algorithm.ErrInvalidConfig) || got != nil {
				t.Errorf("Per(%d, %v): got %v, %v, want nil and ErrInvalidConfig", c.n, c.period, got, err)
			}
		})
	}
}
