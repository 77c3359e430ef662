package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// The comparison puts the same traffic through six limiters of one nominal
// limit, compareLimit per compareWindow, over compareSpan.
const (
	compareLimit  = 10
	compareWindow = 10 * time.Second
	compareSpan   = 3 * compareWindow
	// compareTimeout bounds a comparison's calls to the store, together.
	// On Redis, keys must outlive their state by as much
	// (goredisstore.WithTTLMargin): Redis expires them on its own clock,
	// which runs on while the fake clock waits for the store.
	compareTimeout = 10 * time.Second
)

// compareStart is the fake clock's instant at the start of every comparison:
// a whole number of windows after the Unix epoch, so that the fixed windows
// (aligned to the epoch) start with the traffic.
var compareStart = time.Unix(1_700_000_000, 0).UTC()

// A contender is one row of the comparison: an algorithm built for a limit of
// n per window.
type contender struct {
	name  string // the demo's name for the algorithm (algTokenBucket, ...)
	title string
	build func(n int64, window time.Duration) (algorithm.Algorithm, error)
}

// contenders are the comparison's rows, in the order shown.
var contenders = []contender{
	{algTokenBucket, "Token bucket (continuous)", func(n int64, w time.Duration) (algorithm.Algorithm, error) {
		return tokenbucket.Per(n, w)
	}},
	{algInterval, "Token bucket (interval)", func(n int64, w time.Duration) (algorithm.Algorithm, error) {
		// Half the limit every half window: the same nominal limit as the
		// others, in clumps that show what the interval flavour changes.
		return tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: n, Tokens: n / 2, Interval: w / 2})
	}},
	{algGCRA, "GCRA, Burst(1)", func(n int64, w time.Duration) (algorithm.Algorithm, error) {
		return gcra.Per(n, w, gcra.Burst(1))
	}},
	{algSlidingLog, "Sliding log", func(n int64, w time.Duration) (algorithm.Algorithm, error) {
		return slidinglog.Per(n, w)
	}},
	{algCounter, "Sliding-window counter", func(n int64, w time.Duration) (algorithm.Algorithm, error) {
		return slidingwindow.Per(n, w)
	}},
	{algFixedWindow, "Fixed window", func(n int64, w time.Duration) (algorithm.Algorithm, error) {
		return fixedwindow.Per(n, w)
	}},
}

// A pattern is a traffic schedule: the instants of its requests, as offsets
// from the start, in order. Its description states them in words.
type pattern struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	requests    []time.Duration
}

// patterns are the comparison's traffic schedules, in the order offered,
// each over compareSpan and meant for a limit of 10 per 10 s.
var patterns = []pattern{
	{Name: "steady", Title: "Steady",
		Description: "2 requests a second, evenly spaced, for 30 s: twice the limit's rate.",
		requests:    every(500*time.Millisecond, 0, compareSpan)},
	{Name: "bursty", Title: "Bursty",
		Description: "A burst of 12 requests 100 ms apart every 6 s: bursts above the limit, closer together than a window.",
		requests: slices.Concat(
			every(100*time.Millisecond, 0, 1200*time.Millisecond),
			every(100*time.Millisecond, 6*time.Second, 7200*time.Millisecond),
			every(100*time.Millisecond, 12*time.Second, 13200*time.Millisecond),
			every(100*time.Millisecond, 18*time.Second, 19200*time.Millisecond),
			every(100*time.Millisecond, 24*time.Second, 25200*time.Millisecond))},
	{Name: "boundary", Title: "Window-boundary burst",
		Description: "10 requests 100 ms apart in the last second of the first window, 10 more in the first second of the next: the limit twice within 2 s.",
		requests:    every(100*time.Millisecond, compareWindow-time.Second, compareWindow+time.Second)},
	{Name: "drip", Title: "Slow drip",
		Description: "1 request a second for 30 s: exactly the limit's rate.",
		requests:    every(time.Second, 0, compareSpan)},
}

// every returns the instants from, from+step, ... before to.
func every(step, from, to time.Duration) []time.Duration {
	var out []time.Duration
	for t := from; t < to; t += step {
		out = append(out, t)
	}
	return out
}

// patternNamed returns the pattern called name.
func patternNamed(name string) (pattern, bool) {
	for _, p := range patterns {
		if p.Name == name {
			return p, true
		}
	}
	return pattern{}, false
}

// comparison is the outcome of one pattern's requests through every
// contender.
type comparison struct {
	Pattern  pattern
	Limit    int64
	Window   time.Duration
	Span     time.Duration
	Requests []time.Duration // the pattern's instants, as offsets from the start
	Rows     []compareRow    // one per contender, in order
}

// compareRow is one contender's decisions on a comparison's requests.
type compareRow struct {
	Name        string
	Title       string
	Algorithm   string          // the algorithm's String()
	Admitted    []time.Duration // the instants of the admitted requests
	Denied      []time.Duration // the instants of the denied requests
	PerWindow   []int           // admitted in each window of the span, aligned to the start
	MaxInWindow int             // the most admitted in any span of one window's length
}

// compare puts p's requests through every contender, each a Limiter on st
// keyed by its name, all on one fake clock that steps from instant to
// instant: the outcome depends on p and on the algorithms alone, not on how
// fast the store answers. st must hold no state for those keys; on Redis it
// must keep keys compareTimeout past their state's end, and the run gives
// up after compareTimeout, so no key expires while the run still needs it.
func compare(ctx context.Context, st store.Store[string], p pattern) (comparison, error) {
	ctx, cancel := context.WithTimeout(ctx, compareTimeout)
	defer cancel()
	c := comparison{Pattern: p, Limit: compareLimit, Window: compareWindow, Span: compareSpan,
		Requests: slices.Clone(p.requests)}
	fake := clock.NewFake(compareStart)
	lims := make([]*ratelimit.Limiter[string], len(contenders))
	for i, ct := range contenders {
		alg, err := ct.build(compareLimit, compareWindow)
		if err != nil {
			return comparison{}, fmt.Errorf("%s: %w", ct.name, err)
		}
		if lims[i], err = ratelimit.New(alg, st, ratelimit.WithName(ct.name), ratelimit.WithClock(fake)); err != nil {
			return comparison{}, fmt.Errorf("%s: %w", ct.name, err)
		}
		c.Rows = append(c.Rows, compareRow{Name: ct.name, Title: ct.title, Algorithm: fmt.Sprint(alg)})
	}
	for _, at := range c.Requests {
		fake.Set(compareStart.Add(at))
		for i, lim := range lims {
			d, err := lim.Allow(ctx, contenders[i].name)
			if err != nil {
				return comparison{}, fmt.Errorf("%s at %v: %w", contenders[i].name, at, err)
			}
			row := &c.Rows[i]
			if d.Allowed() {
				row.Admitted = append(row.Admitted, at)
			} else {
				row.Denied = append(row.Denied, at)
			}
		}
	}
	for i := range c.Rows {
		row := &c.Rows[i]
		row.PerWindow = make([]int, int((c.Span+c.Window-1)/c.Window))
		for _, at := range row.Admitted {
			row.PerWindow[int(at/c.Window)]++
		}
		row.MaxInWindow = maxWithin(row.Admitted, c.Window)
	}
	return c, nil
}

// maxWithin returns the most instants of sorted within any half-open span
// [t, t+d).
func maxWithin(sorted []time.Duration, d time.Duration) int {
	most, j := 0, 0
	for i := range sorted {
		for sorted[i]-sorted[j] >= d {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// compareJSON is the body of GET /api/compare. Instants are milliseconds
// from the start of the traffic.
type compareJSON struct {
	Pattern    pattern          `json:"pattern"`
	Patterns   []pattern        `json:"patterns"` // every pattern, to choose from
	Store      string           `json:"store"`
	Limit      int64            `json:"limit"`
	WindowMs   float64          `json:"windowMs"`
	SpanMs     float64          `json:"spanMs"`
	RequestsMs []float64        `json:"requestsMs"`
	Rows       []compareRowJSON `json:"rows"`
}

// compareRowJSON is a compareRow in compareJSON.
type compareRowJSON struct {
	Name        string    `json:"name"`
	Title       string    `json:"title"`
	Algorithm   string    `json:"algorithm"`
	AdmittedMs  []float64 `json:"admittedMs"`
	DeniedMs    []float64 `json:"deniedMs"`
	PerWindow   []int     `json:"perWindow"`
	MaxInWindow int       `json:"maxInWindow"`
}

func (c comparison) json(storeName string) compareJSON {
	out := compareJSON{Pattern: c.Pattern, Patterns: patterns, Store: storeName, Limit: c.Limit,
		WindowMs: millis(c.Window), SpanMs: millis(c.Span), RequestsMs: allMillis(c.Requests)}
	for _, r := range c.Rows {
		out.Rows = append(out.Rows, compareRowJSON{Name: r.Name, Title: r.Title, Algorithm: r.Algorithm,
			AdmittedMs: allMillis(r.Admitted), DeniedMs: allMillis(r.Denied), PerWindow: r.PerWindow, MaxInWindow: r.MaxInWindow})
	}
	return out
}

// allMillis returns ds in milliseconds; never nil, so JSON shows [].
func allMillis(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = millis(d)
	}
	return out
}
