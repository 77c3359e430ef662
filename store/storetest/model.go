package storetest

import (
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
	"pgregory.net/rapid"
)

// This file holds the reference models: slow, obviously correct
// restatements of each algorithm's documentation, and the bound each
// algorithm promises on what it admits.

// models are the suite's knowledge of each algorithm, by name: its
// reference model (draw), and how many of its periods a used key takes at
// most to be fresh again (freshIn).
var models = map[string]struct {
	draw    func(t *rapid.T) setup
	freshIn time.Duration
}{
	"tokenbucket":          {drawBucket, 1},
	"tokenbucket-interval": {drawInterval, 1},
	"slidinglog":           {drawLog, 1},
	"fixedwindow":          {drawWindow, 1},
	"gcra":                 {drawGCRA, 1},
	// A sliding window's count fades over the window after its own: it
	// is fresh two windows on at most.
	"slidingwindow": {drawSlidingWindow, 2},
}

// policyLimits returns a policy's limits for the concurrency test: a
// fixed window of 40, a token bucket of 25 that refills too slowly to
// matter, and a sliding log of 60, all over hours.
func policyLimits(t *testing.T) []ratelimit.Limit {
	window, err1 := fixedwindow.New(fixedwindow.Config{Limit: 40, Window: time.Hour})
	bucket, err2 := tokenbucket.New(tokenbucket.Config{Capacity: 25, Rate: 1.0 / 3600})
	log, err3 := slidinglog.New(slidinglog.Config{Limit: 60, Window: time.Hour})
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return []ratelimit.Limit{{Name: "window", Algorithm: window}, {Name: "bucket", Algorithm: bucket}, {Name: "log", Algorithm: log}}
}

// namedAlg is an algorithm of the refund scenarios (refund.go), built
// anew by alg, under its Kind's name.
type namedAlg struct {
	name string
	alg  func() (algorithm.Algorithm, error)
}

// jobRunnerAlgs returns the job runner's algorithms: a sliding log of
// perSec a second, and GCRA of perSec a second with a burst of 1.
func jobRunnerAlgs(perSec int64) []namedAlg {
	return []namedAlg{
		{"slidinglog", func() (algorithm.Algorithm, error) { return slidinglog.PerSecond(perSec) }},
		{"gcra", func() (algorithm.Algorithm, error) { return gcra.PerSecond(perSec, gcra.Burst(1)) }},
	}
}

// lateAlg is an algorithm of the late-refund scenario with its bound.
type lateAlg struct {
	namedAlg
	// bound returns the most admissions that may count in [from, to].
	bound func(from, to int64) float64
	// span reports whether [from, to] is one the bound covers.
	span func(from, to int64) bool
}

// lateRefundAlgs returns the late-refund scenario's algorithms, each of
// lateLimit (10) per minute: a fixed window, a sliding log, a token
// bucket and GCRA, with their bounds: 10 per aligned minute, 10 in any
// rolling minute, and 10 + 1/6 s × the span for the bucket and GCRA.
func lateRefundAlgs() []lateAlg {
	const limit = lateLimit
	minute := time.Minute.Microseconds()
	return []lateAlg{
		{namedAlg{"fixedwindow", func() (algorithm.Algorithm, error) { return fixedwindow.PerMinute(limit) }},
			func(int64, int64) float64 { return limit },
			func(from, to int64) bool { return algorithm.FloorDiv(from, minute) == algorithm.FloorDiv(to, minute) }},
		{namedAlg{"slidinglog", func() (algorithm.Algorithm, error) { return slidinglog.PerMinute(limit) }},
			func(int64, int64) float64 { return limit },
			func(from, to int64) bool { return to-from < minute }},
		{namedAlg{"tokenbucket", func() (algorithm.Algorithm, error) { return tokenbucket.PerMinute(limit) }},
			func(from, to int64) float64 { return limit + float64(to-from)/6e6 },
			func(int64, int64) bool { return true }},
		{namedAlg{"gcra", func() (algorithm.Algorithm, error) { return gcra.PerMinute(limit) }},
			func(from, to int64) float64 { return limit + float64(to-from)/6e6 },
			func(int64, int64) bool { return true }},
	}
}

// The scenarios' algorithms, built here so that this file is the kit's one
// place that names an algorithm's package: a token bucket of n per period
// (bucketPer) or of a capacity refilled at a rate (bucketOf), a sliding
// log of n per period (logPer) or of limit per window (logOf).
func bucketPer(n int64, period time.Duration) (algorithm.Algorithm, error) {
	return tokenbucket.Per(n, period)
}

func bucketOf(capacity int64, rate float64) (algorithm.Algorithm, error) {
	return tokenbucket.New(tokenbucket.Config{Capacity: capacity, Rate: rate})
}

func logPer(n int64, period time.Duration) (algorithm.Algorithm, error) {
	return slidinglog.Per(n, period)
}

func logOf(limit int64, window time.Duration) (algorithm.Algorithm, error) {
	return slidinglog.New(slidinglog.Config{Limit: limit, Window: window})
}

// roundsToMicros reports whether a booking of alg may read a µs early: the
// continuous bucket's float refill rounds to the µs either way (see
// algorithm.Booker).
func roundsToMicros(alg algorithm.Algorithm) bool {
	_, ok := alg.(*tokenbucket.Bucket)
	return ok
}

// windowPerMinute is a fixed window of n per minute.
func windowPerMinute(n int64) (algorithm.Algorithm, error) { return fixedwindow.PerMinute(n) }

// exactUndoPerMinute returns, by name, the algorithms of n a minute whose
// Reservation.Refund gives back exactly the refunded admission within
// its window, whatever was admitted since: the fixed window, the
// sliding-window counter and the sliding log.
func exactUndoPerMinute(n int64) map[string]func() (algorithm.Algorithm, error) {
	return map[string]func() (algorithm.Algorithm, error){
		"fixedwindow":   func() (algorithm.Algorithm, error) { return fixedwindow.PerMinute(n) },
		"slidingwindow": func() (algorithm.Algorithm, error) { return slidingwindow.PerMinute(n) },
		"slidinglog":    func() (algorithm.Algorithm, error) { return slidinglog.PerMinute(n) },
	}
}

// readsBookingsEarly reports whether alg's state reads a booking made
// for a later instant than alg alone would have booked it as charged
// from the instant alg would have admitted it: the token buckets and
// GCRA (booking.go's delayed).
func readsBookingsEarly(alg algorithm.Algorithm) bool {
	switch alg.(type) {
	case *tokenbucket.Bucket, *tokenbucket.IntervalBucket, *gcra.Meter:
		return true
	}
	return false
}

// setup is a randomly configured algorithm with its reference model.
type setup struct {
	alg   algorithm.Algorithm
	limit int64
	// period is the algorithm's natural time scale in µs (its window or
	// interval, or the time one token takes to refill), to draw clock moves.
	period int64
	// newModel returns the model of a key that is fresh at now.
	newModel func(now int64) model
	// bound returns an error if the admissions of one key since it was
	// last reset, in order, admitted more than the algorithm allows in a
	// span of time that ends at the last of them. Checked at each
	// admission, that covers every span.
	bound func(hist []admission) error
}

// admission is cost admitted at an instant (Unix µs).
type admission struct{ at, cost int64 }

// model is one key's reference model.
type model interface {
	// check returns an error if got, the store's answer at now to
	// AllowN(cost), or to Peek when cost is 0, is not what the model
	// decides, and charges the model with cost when got admitted it.
	check(now, cost int64, got ratelimit.Decision) error
}

// Config ranges: small limits, windows and intervals from 1µs to a few
// seconds, rates from 0.1/s to 1e6/s.
const (
	maxDrawnLimit  = 20
	maxDrawnWindow = 3_000_000 // µs
)

func drawLimit(t *rapid.T, label string) int64 {
	return rapid.Int64Range(1, maxDrawnLimit).Draw(t, label)
}

// drawMicros draws a length in µs, favouring very short ones now and then.
func drawMicros(t *rapid.T, label string) int64 {
	return rapid.OneOf(rapid.Int64Range(1, 10), rapid.Int64Range(1, maxDrawnWindow)).Draw(t, label)
}

// drawn fails the test if a drawn configuration was rejected, and logs it.
func drawn(t *rapid.T, alg algorithm.Algorithm, err error) {
	if err != nil {
		t.Fatalf("a drawn config was rejected: %v", err)
	}
	t.Logf("algorithm: %v", alg)
}

func drawWindow(t *rapid.T) setup {
	limit := drawLimit(t, "limit")
	window := drawMicros(t, "window µs")
	s, err := windowSetup(limit, window)
	drawn(t, s.alg, err)
	return s
}

// windowSetup is the setup of a fixed window of limit per window µs.
func windowSetup(limit, window int64) (setup, error) {
	alg, err := fixedwindow.New(fixedwindow.Config{Limit: limit, Window: micros(window)})
	return setup{
		alg: alg, limit: limit, period: window,
		newModel: func(int64) model { return exact{&windowModel{limit, window, map[int64]int64{}}, limit} },
		bound: func(hist []admission) error {
			// Each aligned window admits at most limit.
			last, sum := hist[len(hist)-1], int64(0)
			for _, a := range hist {
				if a.at/window == last.at/window {
					sum += a.cost
				}
			}
			if sum > limit {
				return fmt.Errorf("%d admitted in the window of the last, more than the limit %d", sum, limit)
			}
			return nil
		},
	}, err
}

func drawLog(t *rapid.T) setup {
	limit := drawLimit(t, "limit")
	window := drawMicros(t, "window µs")
	s, err := logSetup(limit, window)
	drawn(t, s.alg, err)
	return s
}

// logSetup is the setup of a sliding log of limit per window µs.
func logSetup(limit, window int64) (setup, error) {
	alg, err := slidinglog.New(slidinglog.Config{Limit: limit, Window: micros(window)})
	return setup{
		alg: alg, limit: limit, period: window,
		newModel: func(int64) model { return exact{&logModel{limit: limit, window: window}, limit} },
		bound: func(hist []admission) error {
			// Every window (t−window, t] admits at most limit.
			end, sum := hist[len(hist)-1].at, int64(0)
			for _, a := range hist {
				if a.at > end-window && a.at <= end {
					sum += a.cost
				}
			}
			if sum > limit {
				return fmt.Errorf("%d admitted in the %dµs window ending at the last, more than the limit %d", sum, window, limit)
			}
			return nil
		},
	}, err
}

func drawInterval(t *rapid.T) setup {
	capacity := drawLimit(t, "capacity")
	tokens := drawLimit(t, "tokens per interval")
	interval := drawMicros(t, "interval µs")
	s, err := intervalSetup(capacity, tokens, interval)
	drawn(t, s.alg, err)
	return s
}

// intervalSetup is the setup of an interval bucket of capacity that gains
// tokens every interval µs.
func intervalSetup(capacity, tokens, interval int64) (setup, error) {
	alg, err := tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: capacity, Tokens: tokens, Interval: micros(interval)})
	return setup{
		alg: alg, limit: capacity, period: interval,
		newModel: func(int64) model {
			return exact{&intervalModel{capacity: capacity, tokens: tokens, interval: interval, level: capacity}, capacity}
		},
		bound: func(hist []admission) error {
			// Refills come at least interval apart, so (s, e] holds at
			// most ⌈(e−s)/interval⌉ of them; and none within ⌊(e−s)/interval⌋
			// of s if the bucket is full at s, since taking from a full
			// bucket starts the interval. So [s, e] admits at most the larger
			// of a full bucket and ⌊⌋ refills, or one token less and ⌈⌉.
			end, sum := hist[len(hist)-1].at, int64(0)
			for i := len(hist) - 1; i >= 0; i-- {
				sum += hist[i].cost
				d := end - hist[i].at
				if bound := max(capacity+tokens*(d/interval), capacity-1+tokens*ceilDiv(d, interval)); sum > bound {
					return fmt.Errorf("%d admitted within %dµs, more than max(capacity + tokens×⌊%dµs/interval⌋, capacity−1 + tokens×⌈%dµs/interval⌉) = %d",
						sum, d, d, d, bound)
				}
			}
			return nil
		},
	}, err
}

func drawBucket(t *rapid.T) setup {
	capacity := drawLimit(t, "capacity")
	mantissa := rapid.Float64Range(1, 10).Draw(t, "rate mantissa")
	exponent := rapid.IntRange(-1, 5).Draw(t, "rate exponent")
	rate := min(mantissa*math.Pow(10, float64(exponent)), 1e6)
	s, err := bucketSetup(capacity, rate)
	drawn(t, s.alg, err)
	return s
}

// bucketSetup is the setup of a continuous bucket of capacity refilled at
// rate a second.
func bucketSetup(capacity int64, rate float64) (setup, error) {
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: capacity, Rate: rate})
	perMicro := new(big.Rat).SetFloat64(rate) // exact: the rate the bucket was given
	perMicro.Quo(perMicro, big.NewRat(1_000_000, 1))
	return continuous(alg, capacity, perMicro, int64(math.Ceil(1e6/rate))), err
}

// drawGCRA draws a GCRA, whose reference model is the continuous bucket's
// of the same burst and rate (one token per emission interval): GCRA is
// that bucket, computed in whole microseconds.
func drawGCRA(t *rapid.T) setup {
	burst := drawLimit(t, "burst")
	every := drawMicros(t, "every µs")
	s, err := gcraSetup(burst, every)
	drawn(t, s.alg, err)
	return s
}

// gcraSetup is the setup of GCRA of burst, one unit every every µs.
func gcraSetup(burst, every int64) (setup, error) {
	alg, err := gcra.New(gcra.Config{Burst: burst, Every: micros(every)})
	return continuous(alg, burst, big.NewRat(1, every), every), err
}

// continuous is the setup of alg, which must decide as a continuously
// refilled bucket of capacity tokens gaining perMicro per µs does.
func continuous(alg algorithm.Algorithm, capacity int64, perMicro *big.Rat, period int64) setup {
	eps := big.NewRat(capacity, 1_000_000_000)
	return setup{
		alg: alg, limit: capacity, period: period,
		newModel: func(now int64) model {
			return &bucketModel{capacity: capacity, perMicro: perMicro, eps: eps, tokens: big.NewRat(capacity, 1), last: now}
		},
		bound: func(hist []admission) error {
			// [s, e] admits at most a full bucket plus what refills in e−s
			// (give or take the rounding allowed to each decision).
			end, sum := hist[len(hist)-1].at, int64(0)
			for i := len(hist) - 1; i >= 0; i-- {
				sum += hist[i].cost
				d := end - hist[i].at
				bound := new(big.Rat).Mul(perMicro, big.NewRat(d, 1))
				bound.Add(bound, big.NewRat(capacity, 1))
				bound.Add(bound, new(big.Rat).Mul(eps, big.NewRat(int64(len(hist)-i), 1)))
				if big.NewRat(sum, 1).Cmp(bound) > 0 {
					return fmt.Errorf("%d admitted within %dµs, more than capacity + rate×%dµs = %s",
						sum, d, d, bound.FloatString(6))
				}
			}
			return nil
		},
	}
}

// drawSlidingWindow draws a sliding-window counter, with a model that
// counts every window and computes the estimate in exact arithmetic.
func drawSlidingWindow(t *rapid.T) setup {
	limit := drawLimit(t, "limit")
	window := drawMicros(t, "window µs")
	s, err := slidingSetup(limit, window)
	drawn(t, s.alg, err)
	return s
}

// slidingSetup is the setup of a sliding-window counter of limit per
// window µs.
func slidingSetup(limit, window int64) (setup, error) {
	alg, err := slidingwindow.New(slidingwindow.Config{Limit: limit, Window: micros(window)})
	return setup{
		alg: alg, limit: limit, period: window,
		newModel: func(int64) model {
			return exact{&counterModel{limit: limit, window: window, counts: map[int64]int64{}}, limit}
		},
		bound: func(hist []admission) error {
			// At the last admission, what its window admitted plus the
			// previous window's cost weighted by the part of it still in
			// the rolling window, rounded up, is at most the limit.
			last := hist[len(hist)-1].at
			i := last / window
			elapsed := last - i*window
			var cur, prev int64
			for _, a := range hist {
				switch a.at / window {
				case i:
					cur += a.cost
				case i - 1:
					prev += a.cost
				}
			}
			if share := ceilDiv(prev*(window-elapsed), window); cur+share > limit {
				return fmt.Errorf("%d admitted in the window of the last and %d in the one before, weighing %d at %dµs into it: more than the limit %d",
					cur, prev, share, elapsed, limit)
			}
			return nil
		},
	}, err
}

// relimit returns the setup of s's algorithm with another limit (a
// bucket's capacity, GCRA's burst), every other parameter as it is.
func relimit(s setup, limit int64) (setup, error) {
	spec := s.alg.Spec()
	p := spec.Params
	switch spec.Name {
	case "tokenbucket":
		return bucketSetup(limit, p[1])
	case "tokenbucket-interval":
		return intervalSetup(limit, int64(p[1]), int64(p[2]))
	case "gcra":
		return gcraSetup(limit, int64(p[1]))
	case "fixedwindow":
		return windowSetup(limit, int64(p[1]))
	case "slidingwindow":
		return slidingSetup(limit, int64(p[1]))
	case "slidinglog":
		return logSetup(limit, int64(p[1]))
	}
	if r, ok, err := registeredSetup(spec.Name, limit, s.period); ok {
		return r, err
	}
	return setup{}, fmt.Errorf("storetest: no setup of %s with another limit", spec.Name)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// decision builds a Decision from µs.
func decision(allowed bool, limit, remaining, retry, reset int64) ratelimit.Decision {
	return ratelimit.DecisionFields{Allowed: allowed, Limit: limit, Remaining: remaining,
		RetryAfter: micros(retry), ResetAfter: micros(reset)}.Decision()
}

// integerModel is a model whose state and decisions are exact integers.
type integerModel interface {
	// left is the cost that fits at now.
	left(now int64) int64
	// until is how many µs from now until cost fits, if nothing else is
	// admitted; 0 if it fits now.
	until(now, cost int64) int64
	// admit charges cost at now.
	admit(now, cost int64)
	// clone returns an independent copy.
	clone() integerModel
}

// exact turns an integerModel into a model that wants every field of a
// decision to be exactly its own. A key is fresh when the whole limit
// fits, so ResetAfter is until(limit).
type exact struct {
	m     integerModel
	limit int64
}

func (e exact) want(now, cost int64) ratelimit.Decision {
	left := e.m.left(now)
	switch {
	case cost == 0:
		return decision(left >= 1, e.limit, left, e.m.until(now, 1), e.m.until(now, e.limit))
	case cost > left:
		return decision(false, e.limit, left, e.m.until(now, cost), e.m.until(now, e.limit))
	default:
		after := e.m.clone()
		after.admit(now, cost)
		return decision(true, e.limit, after.left(now), 0, after.until(now, e.limit))
	}
}

func (e exact) check(now, cost int64, got ratelimit.Decision) error {
	if want := e.want(now, cost); got != want {
		return fmt.Errorf("got %s, want %s (from the model)", show(got), show(want))
	}
	if cost > 0 && got.Allowed() {
		e.m.admit(now, cost)
	}
	return nil
}

// windowModel counts the cost admitted in each window, by window index.
type windowModel struct {
	limit, window int64
	counts        map[int64]int64
}

func (m *windowModel) left(now int64) int64 { return m.limit - m.counts[now/m.window] }

func (m *windowModel) admit(now, cost int64) { m.counts[now/m.window] += cost }

func (m *windowModel) until(now, cost int64) int64 {
	// Try this window, then each next one from its start.
	for i := now / m.window; ; i++ {
		at := max(now, i*m.window)
		if m.limit-m.counts[i] >= cost {
			return at - now
		}
	}
}

func (m *windowModel) clone() integerModel {
	c := *m
	c.counts = maps.Clone(m.counts)
	return &c
}

// counterModel counts the cost admitted in each window, by window index,
// and estimates the rolling window from the current and previous ones.
type counterModel struct {
	limit, window int64
	counts        map[int64]int64
}

// used is count + ⌈previous·(window − elapsed)/window⌉ at now.
func (m *counterModel) used(now int64) int64 {
	i := now / m.window
	return m.counts[i] + ceilDiv(m.counts[i-1]*(m.window-(now-i*m.window)), m.window)
}

func (m *counterModel) left(now int64) int64 { return max(m.limit-m.used(now), 0) }

func (m *counterModel) admit(now, cost int64) { m.counts[now/m.window] += cost }

func (m *counterModel) until(now, cost int64) int64 {
	// The estimate never rises while nothing is admitted, and is 0 two
	// windows on: bisect for the first instant cost fits.
	lo, hi := now, (now/m.window+2)*m.window
	for lo < hi {
		mid := lo + (hi-lo)/2
		if m.left(mid) >= cost {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo - now
}

func (m *counterModel) clone() integerModel {
	c := *m
	c.counts = maps.Clone(m.counts)
	return &c
}

// logModel lists every admission.
type logModel struct {
	limit, window int64
	log           []admission
}

// used sums the cost admitted in (now−window, now].
func (m *logModel) used(now int64) int64 {
	sum := int64(0)
	for _, a := range m.log {
		if a.at > now-m.window && a.at <= now {
			sum += a.cost
		}
	}
	return sum
}

func (m *logModel) left(now int64) int64 { return m.limit - m.used(now) }

func (m *logModel) admit(now, cost int64) { m.log = append(m.log, admission{now, cost}) }

func (m *logModel) until(now, cost int64) int64 {
	// The sum drops only when an admission leaves the window: try now and
	// each of those instants, earliest first.
	tries := []int64{now}
	for _, a := range m.log {
		if a.at+m.window > now {
			tries = append(tries, a.at+m.window)
		}
	}
	slices.Sort(tries)
	for _, at := range tries {
		if m.left(at) >= cost {
			return at - now
		}
	}
	panic("storetest: the empty log does not fit a cost ≤ limit")
}

func (m *logModel) clone() integerModel {
	c := *m
	c.log = slices.Clone(m.log)
	return &c
}

// intervalModel is a bucket that gains tokens at instants next,
// next+interval, ... while it is not full. Taking from a full bucket starts
// the interval then: a full bucket is a new one.
type intervalModel struct {
	capacity, tokens, interval int64 // config
	level                      int64 // tokens held
	next                       int64 // next refill, while not full
}

// at returns the bucket refilled up to now, one refill at a time.
func (m intervalModel) at(now int64) intervalModel {
	for m.level < m.capacity && m.next <= now {
		m.level = min(m.capacity, m.level+m.tokens)
		m.next += m.interval
	}
	return m
}

func (m *intervalModel) left(now int64) int64 { return m.at(now).level }

func (m *intervalModel) admit(now, cost int64) {
	*m = m.at(now)
	if m.level == m.capacity {
		m.next = now + m.interval
	}
	m.level -= cost
}

func (m *intervalModel) until(now, cost int64) int64 {
	b, when := m.at(now), now
	for b.level < cost {
		when = b.next
		b = b.at(when)
	}
	return when - now
}

func (m *intervalModel) clone() integerModel {
	c := *m
	return &c
}

// bucketModel is a continuously refilled bucket in exact rational
// arithmetic. The implementation computes in doubles, so within eps
// (1e-9 × capacity) of a decision's threshold the model follows it; outside
// that band the decision must be the model's.
type bucketModel struct {
	capacity int64
	perMicro *big.Rat // tokens per µs
	eps      *big.Rat
	tokens   *big.Rat // held at last, possibly a hair below 0 after following the store
	last     int64
}

// raw is the tokens at t ≥ last without the cap.
func (m *bucketModel) raw(t int64) *big.Rat {
	r := new(big.Rat).Mul(m.perMicro, big.NewRat(t-m.last, 1))
	return r.Add(r, m.tokens)
}

func (m *bucketModel) check(now, cost int64, got ratelimit.Decision) error {
	c := max(cost, 1) // a Peek decides for a cost of 1
	capacity := big.NewRat(m.capacity, 1)
	raw := m.raw(now)
	level := raw
	if level.Cmp(capacity) > 0 {
		level = capacity
	}
	plus := func(r *big.Rat, n int64) *big.Rat { return new(big.Rat).Add(r, big.NewRat(n, 1)) }
	above := func(x *big.Rat, n int64) bool { return x.Cmp(new(big.Rat).Add(big.NewRat(n, 1), m.eps)) >= 0 }
	below := func(x *big.Rat, n int64) bool { return x.Cmp(new(big.Rat).Sub(big.NewRat(n, 1), m.eps)) < 0 }
	holds := func(x *big.Rat) string { return x.FloatString(12) }

	switch {
	case !got.Allowed() && above(raw, c):
		return fmt.Errorf("got %s, want allowed: the bucket holds %s tokens, cost %d", show(got), holds(level), c)
	case got.Allowed() && below(raw, c):
		return fmt.Errorf("got %s, want denied: the bucket holds %s tokens, cost %d", show(got), holds(level), c)
	}
	// future(t) is the tokens at t ≥ now (uncapped) if nothing else is admitted.
	admitted := cost > 0 && got.Allowed()
	after := level
	future := m.raw
	if admitted {
		after = plus(level, -cost)
		future = func(t int64) *big.Rat {
			r := new(big.Rat).Mul(m.perMicro, big.NewRat(t-now, 1))
			return r.Add(r, after)
		}
	}
	lo := max(floor(new(big.Rat).Sub(after, m.eps)), 0)
	hi := min(floor(new(big.Rat).Add(after, m.eps)), m.capacity)
	if got.Remaining() < lo || got.Remaining() > hi {
		return fmt.Errorf("got %s, want remaining=⌊%s⌋: the bucket holds that many tokens after this decision", show(got), holds(after))
	}
	if !got.Allowed() {
		r := got.RetryAfter().Microseconds()
		if below(future(now+r), c) || above(future(now+r-1), c) {
			return fmt.Errorf("got %s, want a retry when the bucket reaches %d tokens: it holds %s after %dµs and %s after %dµs",
				show(got), c, holds(future(now+r-1)), r-1, holds(future(now+r)), r)
		}
	}
	r := got.ResetAfter().Microseconds()
	if below(future(now+r), m.capacity) || (r > 0 && above(future(now+r-1), m.capacity)) {
		return fmt.Errorf("got %s, want a reset when the bucket is full (%d tokens): it holds %s after %dµs and %s after %dµs",
			show(got), m.capacity, holds(future(now+r-1)), r-1, holds(future(now+r)), r)
	}
	if admitted {
		m.tokens, m.last = after, now
	}
	return nil
}

// floor returns ⌊r⌋.
func floor(r *big.Rat) int64 {
	return new(big.Int).Div(r.Num(), r.Denom()).Int64() // Euclidean: the floor, as the denominator is positive
}

// drawMove draws how far to move the clock, in µs: 0 or a few µs, up to a
// couple of the algorithm's periods, up to refilling the whole limit, or
// up to a few seconds.
func drawMove(t *rapid.T, s setup, label string) int64 {
	return rapid.OneOf(
		rapid.Int64Range(0, 3),
		rapid.Int64Range(0, 2*s.period),
		rapid.Int64Range(0, 2*s.period*s.limit),
		rapid.Int64Range(0, 5_000_000),
	).Draw(t, label)
}

// drawStart draws the Unix µs a sequence starts at, so that fixed windows
// fall anywhere.
func drawStart(t *rapid.T) int64 {
	return epoch + rapid.Int64Range(0, 10_000_000).Draw(t, "start offset µs")
}
