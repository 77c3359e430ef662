// Package algorithms lists the algorithms of this module, each with the
// configurations that the conformance suites (store/storetest), the Redis
// suites, the benchmarks and the demo run. It is the one place besides
// each algorithm's own package that names them: a seventh algorithm is
// its package plus an entry here.
//
// Importing it registers every algorithm's [algorithm.Kind], Lua body
// included, with package algorithm; the Redis scripts take their bodies
// from there.
package algorithms

import (
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// Entry is one algorithm and its example configurations. Each builds a
// new algorithm on every call.
type Entry struct {
	// Name is the algorithm's Spec name, its registered Kind's Name.
	Name string
	// Per is what its package's Per builds: about n per period, the
	// whole of n available at once (the interval bucket: n tokens every
	// period, from a full bucket of n).
	Per func(n int64, period time.Duration) (algorithm.Algorithm, error)
	// Spread admits n per period with the limit n, refilled (where it
	// refills) a unit at a time, evenly over the period.
	Spread func(n int64, period time.Duration) (algorithm.Algorithm, error)
	// Sample has the limit limit and refills, or forgets, within a
	// second or so (2 units a second for the buckets, a window of a
	// second, an emission interval of half a second).
	Sample func(limit int64) (algorithm.Algorithm, error)
	// Bench holds the benchmarks' configurations.
	Bench Bench
}

// Bench is an algorithm's configurations for the benchmarks' three paths.
type Bench struct {
	// Allowed never denies a cost of 1 during a benchmark; Prime is the
	// cost taken once per key before the timer starts, so that the key's
	// state stays far from fresh for years.
	Allowed func() (algorithm.Algorithm, error)
	Prime   int
	// Generous is a limit never approached whose state is fresh again
	// microseconds after each request, as most keys' are.
	Generous func() (algorithm.Algorithm, error)
	// Denied has a limit of 1 and refills after years.
	Denied func() (algorithm.Algorithm, error)
}

// All returns every algorithm of this module, token buckets first, in
// the order the suites run them.
func All() []Entry { return append([]Entry(nil), all...) }

// Route returns the two limits of an example route that the policy
// benchmarks decide together: 10^5 per second (a token bucket) and 10^9
// per day (a fixed window).
func Route() (second, day algorithm.Algorithm, err error) {
	s, err := tokenbucket.New(tokenbucket.Config{Capacity: 100_000, Rate: 100_000})
	if err != nil {
		return nil, nil, err
	}
	d, err := fixedwindow.New(fixedwindow.Config{Limit: 1_000_000_000, Window: 24 * time.Hour})
	if err != nil {
		return nil, nil, err
	}
	return s, d, nil
}

// maxWindow is the longest window an algorithm accepts, a little under 9
// years; windows aligned to the epoch end next in 2032.
const maxWindow = time.Duration(algorithm.MaxDuration) * time.Microsecond

// alg returns a constructor's result as an algorithm.Algorithm, nil on
// an error (not a typed nil).
func alg[A algorithm.Algorithm](a A, err error) (algorithm.Algorithm, error) {
	if err != nil {
		return nil, err
	}
	return a, nil
}

var all = []Entry{
	{
		Name: "tokenbucket",
		Per: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
			return alg(tokenbucket.Per(n, period))
		},
		Spread: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
			return alg(tokenbucket.New(tokenbucket.Config{Capacity: n, Rate: float64(n) / period.Seconds()}))
		},
		Sample: func(limit int64) (algorithm.Algorithm, error) {
			return alg(tokenbucket.New(tokenbucket.Config{Capacity: limit, Rate: 2}))
		},
		Bench: Bench{
			// 2^40 tokens refilled at 4000/s (8.7 years to fill); priming
			// takes half of them, so the key is full again in 4.4 years.
			Allowed: func() (algorithm.Algorithm, error) {
				return alg(tokenbucket.New(tokenbucket.Config{Capacity: algorithm.MaxLimit, Rate: 4000}))
			},
			Prime: int(algorithm.MaxLimit / 2),
			// A burst of 1e9 and 1e9 per hour: one token back in 3.6µs.
			Generous: func() (algorithm.Algorithm, error) {
				return alg(tokenbucket.New(tokenbucket.Config{Capacity: 1_000_000_000, Rate: 1e9 / 3600}))
			},
			Denied: func() (algorithm.Algorithm, error) {
				return alg(tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1e-8}))
			},
		},
	},
	{
		Name: "tokenbucket-interval",
		Per: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
			return alg(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: n, Tokens: n, Interval: period}))
		},
		Spread: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
			return alg(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: n, Tokens: 1, Interval: period / time.Duration(n)}))
		},
		Sample: func(limit int64) (algorithm.Algorithm, error) {
			return alg(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: limit, Tokens: 2, Interval: time.Second}))
		},
		Bench: Bench{
			// 2^40 tokens, one per 256µs: the slowest refill allowed.
			Allowed: func() (algorithm.Algorithm, error) {
				return alg(tokenbucket.NewInterval(tokenbucket.IntervalConfig{
					Capacity: algorithm.MaxLimit, Tokens: 1, Interval: 256 * time.Microsecond}))
			},
			Prime: int(algorithm.MaxLimit / 2),
			Generous: func() (algorithm.Algorithm, error) {
				return alg(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 1_000_000, Tokens: 1, Interval: time.Microsecond}))
			},
			Denied: func() (algorithm.Algorithm, error) {
				return alg(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 1, Tokens: 1, Interval: maxWindow}))
			},
		},
	},
	{
		Name: "slidinglog",
		Per: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
			return alg(slidinglog.Per(n, period))
		},
		Spread: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
			return alg(slidinglog.New(slidinglog.Config{Limit: n, Window: period}))
		},
		Sample: func(limit int64) (algorithm.Algorithm, error) {
			return alg(slidinglog.New(slidinglog.Config{Limit: limit, Window: time.Second}))
		},
		Bench: Bench{
			// 2^15 per millisecond is never reached. The log keeps one entry
			// per microsecond in which a key was admitted, so a short window
			// keeps a hot key's log at a realistic size (≤ 1000 entries).
			// Keys seen less often than once a millisecond expire between
			// requests and are created again after a sweep.
			Allowed: func() (algorithm.Algorithm, error) {
				return alg(slidinglog.New(slidinglog.Config{Limit: slidinglog.MaxLimit, Window: time.Millisecond}))
			},
			Prime: 1,
			Generous: func() (algorithm.Algorithm, error) {
				return alg(slidinglog.New(slidinglog.Config{Limit: slidinglog.MaxLimit, Window: 10 * time.Microsecond}))
			},
			Denied: func() (algorithm.Algorithm, error) {
				return alg(slidinglog.New(slidinglog.Config{Limit: 1, Window: maxWindow}))
			},
		},
	},
	{
		Name: "fixedwindow",
		Per: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
			return alg(fixedwindow.Per(n, period))
		},
		Spread: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
			return alg(fixedwindow.New(fixedwindow.Config{Limit: n, Window: period}))
		},
		Sample: func(limit int64) (algorithm.Algorithm, error) {
			return alg(fixedwindow.New(fixedwindow.Config{Limit: limit, Window: time.Second}))
		},
		Bench: Bench{
			Allowed: func() (algorithm.Algorithm, error) {
				return alg(fixedwindow.New(fixedwindow.Config{Limit: algorithm.MaxLimit, Window: maxWindow}))
			},
			Prime: 1,
			Generous: func() (algorithm.Algorithm, error) {
				return alg(fixedwindow.New(fixedwindow.Config{Limit: 1_000_000, Window: 10 * time.Microsecond}))
			},
			Denied: func() (algorithm.Algorithm, error) {
				return alg(fixedwindow.New(fixedwindow.Config{Limit: 1, Window: maxWindow}))
			},
		},
	},
	{
		Name: "gcra",
		Per: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
			return alg(gcra.Per(n, period))
		},
		Spread: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
			return alg(gcra.New(gcra.Config{Burst: n, Every: period / time.Duration(n)}))
		},
		Sample: func(limit int64) (algorithm.Algorithm, error) {
			return alg(gcra.New(gcra.Config{Burst: limit, Every: 500 * time.Millisecond}))
		},
		Bench: Bench{
			// A burst of 2^40, one unit per 256µs: the slowest refill
			// allowed; priming takes half, so the key rests in 4.4 years.
			Allowed: func() (algorithm.Algorithm, error) {
				return alg(gcra.New(gcra.Config{Burst: algorithm.MaxLimit, Every: 256 * time.Microsecond}))
			},
			Prime: int(algorithm.MaxLimit / 2),
			// A burst of 1e9, one unit back every 4µs (about 1e9 per hour).
			Generous: func() (algorithm.Algorithm, error) {
				return alg(gcra.New(gcra.Config{Burst: 1_000_000_000, Every: 4 * time.Microsecond}))
			},
			Denied: func() (algorithm.Algorithm, error) {
				return alg(gcra.New(gcra.Config{Burst: 1, Every: maxWindow}))
			},
		},
	},
	{
		Name: "slidingwindow",
		Per: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
			return alg(slidingwindow.Per(n, period))
		},
		Spread: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
			return alg(slidingwindow.New(slidingwindow.Config{Limit: n, Window: period}))
		},
		Sample: func(limit int64) (algorithm.Algorithm, error) {
			return alg(slidingwindow.New(slidingwindow.Config{Limit: limit, Window: time.Second}))
		},
		Bench: Bench{
			Allowed: func() (algorithm.Algorithm, error) {
				return alg(slidingwindow.New(slidingwindow.Config{Limit: algorithm.MaxLimit, Window: maxWindow}))
			},
			Prime: 1,
			Generous: func() (algorithm.Algorithm, error) {
				return alg(slidingwindow.New(slidingwindow.Config{Limit: 1_000_000, Window: 10 * time.Microsecond}))
			},
			Denied: func() (algorithm.Algorithm, error) {
				return alg(slidingwindow.New(slidingwindow.Config{Limit: 1, Window: maxWindow}))
			},
		},
	},
}
