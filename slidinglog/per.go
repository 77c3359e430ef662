package slidinglog

import (
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Per returns a sliding log admitting at most n in any period, or an error wrapping
// algorithm.ErrInvalidConfig. It is New(Config{Limit: n, Window: period}),
// said as people say limits: Per(100, time.Minute), or PerMinute(100).
// Its Quota is n per period.
//
// 1 ≤ n ≤ [MaxLimit]; period, truncated to whole microseconds, is between 1µs
// and algorithm.MaxDuration.
func Per(n int64, period time.Duration) (*Log, error) {
	if n < 1 || n > MaxLimit {
		return nil, fmt.Errorf("%w: slidinglog: n must be in [1, %d], got %d", algorithm.ErrInvalidConfig, MaxLimit, n)
	}
	if err := algorithm.CheckDuration("slidinglog: period", period.Microseconds()); err != nil {
		return nil, err
	}
	return New(Config{Limit: n, Window: period})
}

// PerSecond is Per(n, time.Second).
func PerSecond(n int64) (*Log, error) { return Per(n, time.Second) }

// PerMinute is Per(n, time.Minute).
func PerMinute(n int64) (*Log, error) { return Per(n, time.Minute) }

// PerHour is Per(n, time.Hour).
func PerHour(n int64) (*Log, error) { return Per(n, time.Hour) }
