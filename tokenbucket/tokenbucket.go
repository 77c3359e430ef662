// Package tokenbucket provides the token-bucket algorithm in two flavours.
//
// A bucket holds up to Capacity tokens and starts full. A request of cost n
// is admitted when the bucket holds at least n tokens, which it then
// removes; a denied request removes nothing. Buckets refill over time:
//
//   - [New] refills continuously at Rate tokens per second, with
//     floating-point accounting, so high rates never cause false denials.
//   - [NewInterval] adds Tokens whole tokens at the end of every Interval
//     (capacity 10, one token per second, as in the redis.io guide). Time
//     toward the next refill is kept between requests.
//
// Pick a token bucket to allow bursts up to Capacity while holding a long-run
// rate; pick the interval flavour when clients should see whole tokens
// arrive on a schedule.
package tokenbucket

import (
	"fmt"
	"math"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Config configures a continuously refilled bucket.
type Config struct {
	// Capacity is the most tokens the bucket holds: the largest burst and the
	// largest cost of one request. 1 ≤ Capacity ≤ algorithm.MaxLimit.
	Capacity int64
	// Rate is how many tokens are added per second, a finite number above
	// 0. Refilling an empty bucket must take at most algorithm.MaxDuration.
	Rate float64
}

// Bucket is a continuously refilled token bucket. Create it with [New].
type Bucket struct {
	capacity float64
	rate     float64 // tokens per second
	perMicro float64 // tokens per microsecond: rate/1e6, rounded once
	perToken float64 // microseconds per token, for first guesses only
	limit    int64
}

var _ algorithm.Algorithm = (*Bucket)(nil)

// New returns a bucket of cfg.Capacity tokens refilled at cfg.Rate tokens
// per second, or an error wrapping algorithm.ErrInvalidConfig.
func New(cfg Config) (*Bucket, error) {
	if err := algorithm.CheckLimit("tokenbucket: Capacity", cfg.Capacity); err != nil {
		return nil, err
	}
	if err := algorithm.CheckFinite("tokenbucket: Rate", cfg.Rate); err != nil {
		return nil, err
	}
	if fill := float64(cfg.Capacity) * 1e6 / cfg.Rate; !(fill <= float64(algorithm.MaxDuration)) {
		return nil, fmt.Errorf("%w: tokenbucket: refilling %d tokens at %v/s takes longer than %dµs",
			algorithm.ErrInvalidConfig, cfg.Capacity, cfg.Rate, algorithm.MaxDuration)
	}
	return &Bucket{capacity: float64(cfg.Capacity), rate: cfg.Rate, perMicro: cfg.Rate / 1e6,
		perToken: 1e6 / cfg.Rate, limit: cfg.Capacity}, nil
}

// Limit returns the capacity.
func (b *Bucket) Limit() int64 { return b.limit }

// Window returns how long an empty bucket takes to refill: the period
// over which Capacity is replenished (Capacity/Rate, rounded up to 1µs).
func (b *Bucket) Window() time.Duration {
	return time.Duration(math.Ceil(b.capacity*1e6/b.rate)) * time.Microsecond
}

// Spec returns {"tokenbucket", [capacity, rate per second]}.
func (b *Bucket) Spec() algorithm.Spec {
	return algorithm.Spec{Name: "tokenbucket", Params: []float64{b.capacity, b.rate}}
}

// String describes the bucket, for logs.
func (b *Bucket) String() string {
	return fmt.Sprintf("tokenbucket(capacity=%d, rate=%v/s)", b.limit, b.rate)
}

// NewState returns a full bucket.
func (b *Bucket) NewState(now int64) algorithm.State {
	return &bucketState{b: b, tokens: b.capacity, last: now}
}

// bucketState is (tokens at last, last update in Unix µs).
type bucketState struct {
	b      *Bucket
	tokens float64
	last   int64
}

// at returns the tokens the bucket holds at now: the stored tokens plus
// what refilled since last, capped at capacity. Time going backwards adds
// nothing. The arithmetic is the Lua script's, operation for operation;
// the conversions keep Go from fusing the multiply and add.
func (s *bucketState) at(now int64) float64 {
	return min(s.after(max(now-s.last, 0)), s.b.capacity)
}

// after returns the stored tokens plus e microseconds of refill, uncapped.
func (s *bucketState) after(e int64) float64 {
	return s.tokens + float64(float64(e)*s.b.perMicro)
}

// until returns the microseconds from now until the bucket holds target
// tokens (target ≤ capacity), given that it holds held at now. It is
// exact: at the returned instant at() reaches target, one microsecond
// earlier it does not.
func (s *bucketState) until(target, held float64, now int64) int64 {
	if held >= target {
		return 0
	}
	// A first guess, then the exact answer by after() itself; the guess
	// may be off by a few µs either way without changing the result.
	e := int64(math.Ceil((target - s.tokens) * s.b.perToken))
	for s.after(e) < target {
		e++
	}
	for e > 0 && s.after(e-1) >= target {
		e--
	}
	return s.last + e - now
}

func (s *bucketState) Take(now, cost int64) algorithm.Result {
	tokens := s.at(now)
	c := float64(cost)
	if c > tokens {
		return algorithm.Result{
			Limit:      s.b.limit,
			Remaining:  int64(math.Floor(tokens)),
			RetryAfter: s.until(c, tokens, now),
			ResetAfter: s.until(s.b.capacity, tokens, now),
		}
	}
	s.tokens = tokens - c
	s.last = max(s.last, now)
	return algorithm.Result{
		Allowed:    true,
		Limit:      s.b.limit,
		Remaining:  int64(math.Floor(s.tokens)),
		ResetAfter: s.until(s.b.capacity, s.tokens, now),
	}
}

func (s *bucketState) Peek(now int64) algorithm.Result {
	tokens := s.at(now)
	return algorithm.Result{
		Allowed:    tokens >= 1,
		Limit:      s.b.limit,
		Remaining:  int64(math.Floor(tokens)),
		RetryAfter: s.until(1, tokens, now),
		ResetAfter: s.until(s.b.capacity, tokens, now),
	}
}

// IntervalConfig configures a bucket refilled by whole tokens on a schedule.
type IntervalConfig struct {
	// Capacity is the most tokens the bucket holds. 1 ≤ Capacity ≤ algorithm.MaxLimit.
	Capacity int64
	// Tokens is how many tokens each interval adds, at least 1.
	Tokens int64
	// Interval is how often Tokens are added, at least 1µs; it is truncated
	// to whole microseconds. Refilling an empty bucket must take at most
	// algorithm.MaxDuration.
	Interval time.Duration
}

// IntervalBucket adds whole tokens at the end of every interval. Create it
// with [NewInterval].
//
// The instant of the last refill advances by whole intervals, so time spent
// toward the next refill is kept across requests. A bucket that is full
// gains nothing from waiting, so a refill that fills it restarts the
// interval at that instant: a full bucket is the same as a new one.
type IntervalBucket struct {
	capacity int64
	tokens   int64
	interval int64 // µs
}

var _ algorithm.Algorithm = (*IntervalBucket)(nil)

// NewInterval returns a bucket of cfg.Capacity tokens that gains cfg.Tokens
// every cfg.Interval, or an error wrapping algorithm.ErrInvalidConfig.
func NewInterval(cfg IntervalConfig) (*IntervalBucket, error) {
	if err := algorithm.CheckLimit("tokenbucket: Capacity", cfg.Capacity); err != nil {
		return nil, err
	}
	if err := algorithm.CheckLimit("tokenbucket: Tokens", cfg.Tokens); err != nil {
		return nil, err
	}
	interval := cfg.Interval.Microseconds()
	if err := algorithm.CheckDuration("tokenbucket: Interval", interval); err != nil {
		return nil, err
	}
	steps := (cfg.Capacity + cfg.Tokens - 1) / cfg.Tokens
	if steps > algorithm.MaxDuration/interval {
		return nil, fmt.Errorf("%w: tokenbucket: refilling %d tokens by %d every %v takes longer than %dµs",
			algorithm.ErrInvalidConfig, cfg.Capacity, cfg.Tokens, cfg.Interval, algorithm.MaxDuration)
	}
	return &IntervalBucket{capacity: cfg.Capacity, tokens: cfg.Tokens, interval: interval}, nil
}

// Limit returns the capacity.
func (b *IntervalBucket) Limit() int64 { return b.capacity }

// Window returns how long an empty bucket takes to refill: ⌈Capacity/Tokens⌉
// intervals.
func (b *IntervalBucket) Window() time.Duration {
	return time.Duration(ceilDiv(b.capacity, b.tokens)*b.interval) * time.Microsecond
}

// Spec returns {"tokenbucket-interval", [capacity, tokens, interval µs]}.
func (b *IntervalBucket) Spec() algorithm.Spec {
	return algorithm.Spec{Name: "tokenbucket-interval",
		Params: []float64{float64(b.capacity), float64(b.tokens), float64(b.interval)}}
}

// String describes the bucket, for logs.
func (b *IntervalBucket) String() string {
	return fmt.Sprintf("tokenbucket(capacity=%d, +%d every %v)", b.capacity, b.tokens,
		time.Duration(b.interval)*time.Microsecond)
}

// NewState returns a full bucket.
func (b *IntervalBucket) NewState(now int64) algorithm.State {
	return &intervalState{b: b, tokens: b.capacity, last: now}
}

type intervalState struct {
	b      *IntervalBucket
	tokens int64
	last   int64 // instant of the last refill, Unix µs
}

// at returns the state refilled up to now. It is a pure function of the
// stored state: refilling twice gives what refilling once does.
func (s *intervalState) at(now int64) (tokens, last int64) {
	if s.tokens >= s.b.capacity {
		return s.b.capacity, max(s.last, now)
	}
	if now <= s.last {
		return s.tokens, s.last
	}
	ticks := (now - s.last) / s.b.interval
	if need := ceilDiv(s.b.capacity-s.tokens, s.b.tokens); ticks >= need {
		return s.b.capacity, now
	}
	return s.tokens + ticks*s.b.tokens, s.last + ticks*s.b.interval
}

// until returns the microseconds from now until a bucket holding tokens
// since last holds target, or 0 if it already does.
func (s *intervalState) until(tokens, last, target, now int64) int64 {
	if tokens >= target {
		return 0
	}
	return last + ceilDiv(target-tokens, s.b.tokens)*s.b.interval - now
}

func (s *intervalState) Take(now, cost int64) algorithm.Result {
	tokens, last := s.at(now)
	if cost > tokens {
		return algorithm.Result{
			Limit:      s.b.capacity,
			Remaining:  tokens,
			RetryAfter: s.until(tokens, last, cost, now),
			ResetAfter: s.until(tokens, last, s.b.capacity, now),
		}
	}
	s.tokens, s.last = tokens-cost, last
	return algorithm.Result{
		Allowed:    true,
		Limit:      s.b.capacity,
		Remaining:  s.tokens,
		ResetAfter: s.until(s.tokens, last, s.b.capacity, now),
	}
}

func (s *intervalState) Peek(now int64) algorithm.Result {
	tokens, last := s.at(now)
	return algorithm.Result{
		Allowed:    tokens >= 1,
		Limit:      s.b.capacity,
		Remaining:  tokens,
		RetryAfter: s.until(tokens, last, 1, now),
		ResetAfter: s.until(tokens, last, s.b.capacity, now),
	}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
