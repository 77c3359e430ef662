package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// The algorithms the demo offers, by their names in the API.
const (
	algTokenBucket = "tokenbucket"          // tokenbucket.New: Capacity, Rate
	algInterval    = "tokenbucket-interval" // tokenbucket.NewInterval: Capacity, Tokens, Interval
	algSlidingLog  = "slidinglog"           // slidinglog.New: Limit, Window
	algFixedWindow = "fixedwindow"          // fixedwindow.New: Limit, Window
	algGCRA        = "gcra"                 // gcra.New: Burst, Every
	algCounter     = "slidingwindow"        // slidingwindow.New: Limit, Window
)

// The stores the demo offers, by their names in the API and the -store flag.
const (
	storeMemory    = "memory"    // memorystore, in this process
	storeMiniredis = "miniredis" // an embedded miniredis, started on first use
	storeRedis     = "redis"     // the real Redis named by -redis
)

// demoConfig is what GET /api/config reports and PUT /api/config sets: the
// algorithm, its parameters and the store. Every algorithm's parameters are
// kept, so that switching back and forth keeps what was typed; only those
// of Algorithm are used.
type demoConfig struct {
	// Algorithm is one of tokenbucket, tokenbucket-interval, gcra,
	// slidinglog, slidingwindow, fixedwindow.
	Algorithm string `json:"algorithm"`
	// Capacity is the token buckets' capacity.
	Capacity int64 `json:"capacity"`
	// Rate is the continuous bucket's refill in tokens per second.
	Rate float64 `json:"rate"`
	// Tokens is what the interval bucket adds every Interval.
	Tokens int64 `json:"tokens"`
	// Interval is the interval bucket's refill period.
	Interval duration `json:"interval"`
	// Burst is GCRA's burst.
	Burst int64 `json:"burst"`
	// Every is GCRA's emission interval: one unit back every Every.
	Every duration `json:"every"`
	// Limit is the windows' limit.
	Limit int64 `json:"limit"`
	// Window is the windows' length.
	Window duration `json:"window"`
	// SustainedLimit, when above 0, adds a second limit: at most that
	// many requests per SustainedWindow (a sliding log). The two are one
	// ratelimit.Policy, "burst" and "sustained": a request is charged to
	// both or to neither, and the decision names the one that binds.
	SustainedLimit int64 `json:"sustainedLimit"`
	// SustainedWindow is the second limit's window.
	SustainedWindow duration `json:"sustainedWindow"`
	// Store is one of memory, miniredis, redis.
	Store string `json:"store"`
}

// defaultConfig is the configuration a server starts with, on store st.
func defaultConfig(st string) demoConfig {
	return demoConfig{
		Algorithm: algTokenBucket,
		Capacity:  10,
		Rate:      1,
		Tokens:    1,
		Interval:  duration(time.Second),
		Burst:     10,
		Every:     duration(time.Second),
		Limit:     10,
		Window:    duration(10 * time.Second),
		// A burst of 10 refilled at 1/s, and at most 20 a minute: bursts
		// bind first, then the minute.
		SustainedLimit:  20,
		SustainedWindow: duration(time.Minute),
		Store:           st,
	}
}

// limits builds c's policy: its algorithm alone, named "default" (as
// httplimit names a lone limiter), or with the sustained limit, "burst"
// and "sustained". Errors wrap ratelimit.ErrInvalidConfig.
func (c demoConfig) limits() ([]ratelimit.Limit, error) {
	alg, err := c.algorithm()
	if err != nil {
		return nil, err
	}
	if c.SustainedLimit <= 0 {
		return []ratelimit.Limit{{Name: "default", Algorithm: alg}}, nil
	}
	sustained, err := slidinglog.New(slidinglog.Config{Limit: c.SustainedLimit, Window: time.Duration(c.SustainedWindow)})
	if err != nil {
		return nil, fmt.Errorf("sustained limit: %w", err)
	}
	return []ratelimit.Limit{{Name: "burst", Algorithm: alg}, {Name: "sustained", Algorithm: sustained}}, nil
}

// algorithm builds c's algorithm. Errors wrap ratelimit.ErrInvalidConfig.
func (c demoConfig) algorithm() (algorithm.Algorithm, error) {
	switch c.Algorithm {
	case algTokenBucket:
		return tokenbucket.New(tokenbucket.Config{Capacity: c.Capacity, Rate: c.Rate})
	case algInterval:
		return tokenbucket.NewInterval(tokenbucket.IntervalConfig{
			Capacity: c.Capacity, Tokens: c.Tokens, Interval: time.Duration(c.Interval)})
	case algSlidingLog:
		return slidinglog.New(slidinglog.Config{Limit: c.Limit, Window: time.Duration(c.Window)})
	case algFixedWindow:
		return fixedwindow.New(fixedwindow.Config{Limit: c.Limit, Window: time.Duration(c.Window)})
	case algGCRA:
		return gcra.New(gcra.Config{Burst: c.Burst, Every: time.Duration(c.Every)})
	case algCounter:
		return slidingwindow.New(slidingwindow.Config{Limit: c.Limit, Window: time.Duration(c.Window)})
	}
	return nil, fmt.Errorf("%w: unknown algorithm %q (want %s, %s, %s, %s, %s or %s)", ratelimit.ErrInvalidConfig,
		c.Algorithm, algTokenBucket, algInterval, algGCRA, algSlidingLog, algCounter, algFixedWindow)
}

// duration is a time.Duration that JSON carries as a Go duration string
// such as "1.5s" or "10m".
type duration time.Duration

// MarshalJSON writes d as a duration string.
func (d duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string.
func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("interval, every and window are strings such as \"1s\" or \"500ms\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration %q: interval, every and window are numbers with a unit, such as \"1s\" or \"500ms\"", s)
	}
	*d = duration(v)
	return nil
}
