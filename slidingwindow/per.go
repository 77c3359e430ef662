package slidingwindow

import (
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Per returns a sliding-window counter admitting about n per rolling period, or an error wrapping
// algorithm.ErrInvalidConfig. It is New(Config{Limit: n, Window: period}),
// said as people say limits: Per(100, time.Minute), or PerMinute(100).
// Its Quota is n per period.
//
// 1 ≤ n ≤ algorithm.MaxLimit; period, truncated to whole microseconds, is between 1µs
// and algorithm.MaxDuration.
func Per(n int64, period time.Duration) (*Window, error) {
	if err := algorithm.CheckLimit("slidingwindow: n", n); err != nil {
		return nil, err
	}
	if err := algorithm.CheckDuration("slidingwindow: period", period.Microseconds()); err != nil {
		return nil, err
	}
	return New(Config{Limit: n, Window: period})
}

// PerSecond is Per(n, time.Second).
func PerSecond(n int64) (*Window, error) { return Per(n, time.Second) }

// PerMinute is Per(n, time.Minute).
func PerMinute(n int64) (*Window, error) { return Per(n, time.Minute) }

// PerHour is Per(n, time.Hour).
func PerHour(n int64) (*Window, error) { return Per(n, time.Hour) }
