package gcra

import (
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Option configures a meter built from a quota by [Per] and its
// shorthands. The one option is [Burst].
type Option interface {
	apply(*options)
}

type options struct {
	burst int64
}

type burstOption int64

func (b burstOption) apply(o *options) { o.burst = int64(b) }

// Burst sets the most cost admitted at once by a key at rest, and so the
// largest cost of one request, 1 ≤ b ≤ algorithm.MaxLimit. Without it,
// the burst is the quota's n: a meter of 100 per minute admits bursts of
// 100.
func Burst(b int64) Option { return burstOption(b) }

// Per returns a GCRA admitting n units per period in the long run, in
// bursts of up to n or of what [Burst] says, or an error wrapping
// algorithm.ErrInvalidConfig. It is the meter of [New] with
//
//	Config{Burst: burst, Every: period / n, rounded up to a whole µs}
//
// (same decisions, same Spec, so the same state in a store), and its
// Quota is n per period. 100 per minute is one unit every 600ms. Every
// is rounded up so that the meter never admits more than n per period:
// when n does not divide the period in microseconds it admits a hair
// less (3 per second is one unit every 333,334µs, 2.999994 per second).
//
// 1 ≤ n ≤ algorithm.MaxLimit; period, truncated to whole microseconds,
// is between 1µs and algorithm.MaxDuration; Burst×Every must be at most
// algorithm.MaxDuration, as for New.
func Per(n int64, period time.Duration, opts ...Option) (*Meter, error) {
	if err := algorithm.CheckLimit("gcra: n", n); err != nil {
		return nil, err
	}
	micros := period.Microseconds()
	if err := algorithm.CheckDuration("gcra: period", micros); err != nil {
		return nil, err
	}
	o := options{burst: n}
	for _, opt := range opts {
		opt.apply(&o)
	}
	if err := algorithm.CheckLimit("gcra: Burst", o.burst); err != nil {
		return nil, err
	}
	every := (micros + n - 1) / n // no overflow: both are at most 2^48
	m, err := New(Config{Burst: o.burst, Every: time.Duration(every) * time.Microsecond})
	if err != nil {
		return nil, err
	}
	m.quota = algorithm.Quota{Limit: n, Window: time.Duration(micros) * time.Microsecond}
	return m, nil
}

// PerSecond is Per(n, time.Second, opts...).
func PerSecond(n int64, opts ...Option) (*Meter, error) { return Per(n, time.Second, opts...) }

// PerMinute is Per(n, time.Minute, opts...).
func PerMinute(n int64, opts ...Option) (*Meter, error) { return Per(n, time.Minute, opts...) }

// PerHour is Per(n, time.Hour, opts...).
func PerHour(n int64, opts ...Option) (*Meter, error) { return Per(n, time.Hour, opts...) }
