// Package slidingwindow provides the sliding-window counter: the rolling
// window approximated from two fixed windows' counts, as Cloudflare,
// @upstash/ratelimit and most API gateways do.
//
// Time is cut into windows of length Window aligned to the Unix epoch, as
// a fixed window's are, and each key counts the cost admitted in the
// current window and in the one before. The cost in the rolling window
// ending at now is estimated by assuming the previous window's cost was
// spread evenly over it, so that only the part still inside the rolling
// window counts:
//
//	used = current + ⌈previous × (Window − elapsed) / Window⌉
//
// elapsed being the time since the current window started. A request of
// cost n is admitted when used + n ≤ Limit; a denied request does not
// count. The estimate is rounded up, so it never counts less of the
// previous window than the even spread would, and it is computed exactly
// (in whole numbers, on Go and in the Redis script alike).
//
// The estimate falls continuously as the window slides (at a window's
// start, the whole of what was the current count becomes the previous
// one, weighted 1), so a denied request waits for the exact instant it
// fits, which RetryAfter reports, and a key is fresh two windows after its
// last admission at most. Within one aligned window at most Limit is
// admitted, and within any rolling window at most Limit plus what the
// even-spread assumption missed of the previous window: up to 2×Limit when
// a whole window's cost came at its very end and then again at the start
// of the next, far less on real traffic (see the README's measurements
// against the exact sliding log). A clock that steps back into an earlier
// window is counted in the current one, at its start.
//
// [Per] and its shorthands say the limit as people do: PerMinute(1000) is
// New(Config{Limit: 1000, Window: time.Minute}).
//
// Pick it for limits too large to log (its state is three numbers,
// whatever the limit) with no 2×Limit burst at every window edge, as a
// fixed window allows.
package slidingwindow

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Config configures a sliding-window counter.
type Config struct {
	// Limit is the most cost admitted in a window, 1 ≤ Limit ≤ algorithm.MaxLimit.
	Limit int64
	// Window is the window length, at least 1µs and at most
	// algorithm.MaxDuration; it is truncated to whole microseconds.
	Window time.Duration
}

// Window is a sliding-window counter. Create it with [New] or [Per].
type Window struct {
	limit  int64
	window int64 // µs
}

var (
	_ algorithm.Algorithm = (*Window)(nil)
	_ algorithm.Quoter    = (*Window)(nil)
)

// New returns a sliding-window counter admitting about cfg.Limit per
// rolling cfg.Window, or an error wrapping algorithm.ErrInvalidConfig.
func New(cfg Config) (*Window, error) {
	if err := algorithm.CheckLimit("slidingwindow: Limit", cfg.Limit); err != nil {
		return nil, err
	}
	window := cfg.Window.Microseconds()
	if err := algorithm.CheckDuration("slidingwindow: Window", window); err != nil {
		return nil, err
	}
	return &Window{limit: cfg.Limit, window: window}, nil
}

// Limit returns the most cost admitted per window.
func (w *Window) Limit() int64 { return w.limit }

// Window returns the window length.
func (w *Window) Window() time.Duration { return time.Duration(w.window) * time.Microsecond }

// Quota returns Limit per Window, the quota as Config and [Per] say it
// alike. It changes no decision, nor Spec.
func (w *Window) Quota() algorithm.Quota {
	return algorithm.Quota{Limit: w.limit, Window: time.Duration(w.window) * time.Microsecond}
}

// Tag returns {KindSlidingWindow, limit, window}.
func (w *Window) Tag() algorithm.Tag {
	return algorithm.Tag{Kind: algorithm.KindSlidingWindow, P0: w.limit, P1: w.window}
}

// Spec returns {"slidingwindow", [limit, window µs]}.
func (w *Window) Spec() algorithm.Spec {
	return algorithm.Spec{Name: "slidingwindow", Params: []float64{float64(w.limit), float64(w.window)}}
}

// String describes the counter, for logs.
func (w *Window) String() string {
	return fmt.Sprintf("slidingwindow(limit=%d, window=%v)", w.limit, time.Duration(w.window)*time.Microsecond)
}

// A counter's state is N0, the index of the current window (⌊t/Window⌋),
// N1, the cost admitted in it, and N2, the cost admitted in the window
// before it.

// Init returns a counter with nothing counted.
func (w *Window) Init(_ algorithm.State, _ int64) algorithm.State {
	return algorithm.State{}
}

// window is a state as seen at an instant.
type window struct {
	index, count, prev int64
	elapsed            int64 // µs since the window started, 0 when now is earlier
}

// at returns s seen at now: the window of now with its count and the
// previous one's. A clock that stepped back into an earlier window stays
// in the counted one, at its start, unless that window starts more than
// algorithm.MaxDuration after now's: no clock steps back that far, and in
// Redis such an index is another window length's, so the state counts as
// fresh rather than make every wait that long. The script does the same.
func (w *Window) at(s algorithm.State, now int64) window {
	v := window{index: algorithm.FloorDiv(now, w.window)}
	switch {
	case s.N1 == 0 && s.N2 == 0, s.N0 > v.index+algorithm.MaxDuration/w.window:
	case s.N0 >= v.index:
		v.index, v.count, v.prev = s.N0, s.N1, s.N2
	case s.N0 == v.index-1:
		v.prev = s.N1
	}
	v.elapsed = max(now-v.index*w.window, 0)
	return v
}

// mulDiv returns ⌊a·b/c⌋ and the remainder, for a, b ≥ 0 and c > 0 with
// a quotient below 2^64; the product is taken in 128 bits. The script
// computes the same numbers by long division.
func mulDiv(a, b, c int64) (q, r int64) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	uq, ur := bits.Div64(hi, lo, uint64(c))
	return int64(uq), int64(ur)
}

// used is the estimated cost in the rolling window: the count plus the
// previous window's share, ⌈prev·(Window − elapsed)/Window⌉.
func (w *Window) used(v window) int64 {
	if v.prev == 0 {
		return v.count
	}
	q, r := mulDiv(v.prev, w.window-v.elapsed, w.window)
	if r > 0 {
		q++
	}
	return v.count + q
}

// Take admits cost when the estimate leaves room for it. The charged
// state is the same window with cost more counted, whose estimate grows by
// exactly cost.
func (w *Window) Take(s algorithm.State, now, cost int64) (algorithm.State, algorithm.Result) {
	v := w.at(s, now)
	used := w.used(v)
	if used+cost > w.limit {
		return s, w.report(v, used, now, cost)
	}
	v.count += cost
	s.N0, s.N1, s.N2 = v.index, v.count, v.prev
	return s, w.report(v, used+cost, now, 0)
}

// Peek reports the rolling window ending at now for a request of cost.
func (w *Window) Peek(s algorithm.State, now, cost int64) algorithm.Result {
	v := w.at(s, now)
	return w.report(v, w.used(v), now, cost)
}

// report is Peek of v, whose estimate is used, for a request of cost (0 to
// describe the window alone).
func (w *Window) report(v window, used, now, cost int64) algorithm.Result {
	start := v.index * w.window
	r := algorithm.Result{Remaining: max(w.limit-used, 0)}
	switch {
	case v.count > 0:
		r.ResetAfter = start + 2*w.window - now // the count weighs nothing two windows on
	case v.prev > 0:
		r.ResetAfter = start + w.window - now
	}
	if used+cost <= w.limit {
		return r
	}
	// The cost fits once the previous window's share is at most what the
	// count leaves: prev·(Window − e) ≤ a·Window, at elapsed e =
	// Window − ⌊a·Window/prev⌋. If the count itself leaves no room, it
	// becomes the previous window's share in the next window.
	if a := w.limit - v.count - cost; a >= 0 {
		q, _ := mulDiv(a, w.window, v.prev)
		r.RetryAfter = start + w.window - q - now
	} else {
		q, _ := mulDiv(w.limit-cost, w.window, v.count)
		r.RetryAfter = start + 2*w.window - q - now
	}
	return r
}
