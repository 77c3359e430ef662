package tokenbucket

import (
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Option configures a bucket built from a quota by [Per], its shorthands
// and [IntervalPer]. The one option is [Burst].
type Option interface {
	apply(*options)
}

type options struct {
	burst    int64
	burstSet bool
}

type burstOption int64

func (b burstOption) apply(o *options) { o.burst, o.burstSet = int64(b), true }

// Burst sets the bucket's capacity: the most tokens it holds, so the
// largest burst and the largest cost of one request, 1 ≤ b ≤
// algorithm.MaxLimit. Without it, the capacity is the quota's n: a bucket
// of 100 per minute admits bursts of 100.
func Burst(b int64) Option { return burstOption(b) }

// checkQuota checks n and period, and returns the period in whole microseconds
// and the capacity the options give.
func checkQuota(n int64, period time.Duration, opts []Option) (micros, capacity int64, err error) {
	if err := algorithm.CheckLimit("tokenbucket: n", n); err != nil {
		return 0, 0, err
	}
	micros = period.Microseconds()
	if err := algorithm.CheckDuration("tokenbucket: period", micros); err != nil {
		return 0, 0, err
	}
	o := options{burst: n}
	for _, opt := range opts {
		opt.apply(&o)
	}
	if err := algorithm.CheckLimit("tokenbucket: Burst", o.burst); err != nil {
		return 0, 0, err
	}
	return micros, o.burst, nil
}

// Per returns a continuously refilled bucket admitting n tokens per
// period in the long run, in bursts of up to n or of what [Burst] says,
// or an error wrapping algorithm.ErrInvalidConfig. It is the bucket of
// [New] with
//
//	Config{Capacity: burst, Rate: float64(n) / period.Seconds()}
//
// (same decisions, same Spec, so the same state in a store), and its
// Quota is n per period.
//
// 1 ≤ n ≤ algorithm.MaxLimit; period, truncated to whole microseconds,
// is between 1µs and algorithm.MaxDuration; refilling an empty bucket
// must take at most algorithm.MaxDuration, as for New.
func Per(n int64, period time.Duration, opts ...Option) (*Bucket, error) {
	micros, capacity, err := checkQuota(n, period, opts)
	if err != nil {
		return nil, err
	}
	period = time.Duration(micros) * time.Microsecond
	b, err := New(Config{Capacity: capacity, Rate: float64(n) / period.Seconds()})
	if err != nil {
		return nil, err
	}
	b.quota = algorithm.Quota{Limit: n, Window: period}
	return b, nil
}

// PerSecond is Per(n, time.Second, opts...).
func PerSecond(n int64, opts ...Option) (*Bucket, error) { return Per(n, time.Second, opts...) }

// PerMinute is Per(n, time.Minute, opts...).
func PerMinute(n int64, opts ...Option) (*Bucket, error) { return Per(n, time.Minute, opts...) }

// PerHour is Per(n, time.Hour, opts...).
func PerHour(n int64, opts ...Option) (*Bucket, error) { return Per(n, time.Hour, opts...) }

// IntervalPer returns a bucket refilled by whole tokens that admits
// exactly n tokens per period in the long run, in bursts of up to n or of
// what [Burst] says, or an error wrapping algorithm.ErrInvalidConfig. Its
// Quota is n per period.
//
// It adds tokens on the finest schedule that is exact in whole tokens and
// whole microseconds: with g the greatest common divisor of n and the
// period in microseconds, n/g tokens every period/g. 100 per minute is
// one token every 600ms; 3 per second, which no whole number of
// microseconds divides, is 3 tokens every second. That is the bucket of
// [NewInterval] with
//
//	IntervalConfig{Capacity: burst, Tokens: n / g, Interval: period / g}
//
// A burst smaller than the tokens one interval adds is an error: the
// bucket could never hold them, and would admit less than n per period.
// The limits on n and period are Per's.
func IntervalPer(n int64, period time.Duration, opts ...Option) (*IntervalBucket, error) {
	micros, capacity, err := checkQuota(n, period, opts)
	if err != nil {
		return nil, err
	}
	g := gcd(n, micros)
	tokens, interval := n/g, time.Duration(micros/g)*time.Microsecond
	if tokens > capacity {
		return nil, fmt.Errorf("%w: tokenbucket: %d per %v in whole tokens is %d every %v, more than a burst of %d holds",
			algorithm.ErrInvalidConfig, n, time.Duration(micros)*time.Microsecond, tokens, interval, capacity)
	}
	b, err := NewInterval(IntervalConfig{Capacity: capacity, Tokens: tokens, Interval: interval})
	if err != nil {
		return nil, err
	}
	b.quota = algorithm.Quota{Limit: n, Window: time.Duration(micros) * time.Microsecond}
	return b, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
