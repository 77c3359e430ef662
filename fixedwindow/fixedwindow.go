// Package fixedwindow provides the fixed-window counter algorithm.
//
// Time is cut into windows of length Window aligned to the Unix epoch: the
// window of instant t is ⌊t/Window⌋. At most Limit units of cost are
// admitted per window; a denied request does not count. The count starts
// again at 0 in each window.
//
// [Per] and its shorthands say the limit as people do: PerMinute(1000) is
// New(Config{Limit: 1000, Window: time.Minute}).
//
// Pick a fixed window when the cheapest state and script matter most and
// clients may burst up to 2×Limit across a window edge; or when limits are
// naturally calendar-like ("1000 per minute, resetting on the minute").
package fixedwindow

import (
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Config configures a fixed window.
type Config struct {
	// Limit is the most cost admitted per window, 1 ≤ Limit ≤ algorithm.MaxLimit.
	Limit int64
	// Window is the window length, at least 1µs and at most
	// algorithm.MaxDuration; it is truncated to whole microseconds.
	Window time.Duration
}

// Window is a fixed-window counter. Create it with [New] or [Per].
type Window struct {
	limit  int64
	window int64 // µs
}

var (
	_ algorithm.Algorithm = (*Window)(nil)
	_ algorithm.Quoter    = (*Window)(nil)
)

// New returns a fixed window admitting cfg.Limit per cfg.Window, or an
// error wrapping algorithm.ErrInvalidConfig.
func New(cfg Config) (*Window, error) {
	if err := algorithm.CheckLimit("fixedwindow: Limit", cfg.Limit); err != nil {
		return nil, err
	}
	window := cfg.Window.Microseconds()
	if err := algorithm.CheckDuration("fixedwindow: Window", window); err != nil {
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

// Tag returns {KindFixedWindow, limit, window}.
func (w *Window) Tag() algorithm.Tag {
	return algorithm.Tag{Kind: algorithm.KindFixedWindow, P0: w.limit, P1: w.window}
}

// Spec returns {"fixedwindow", [limit, window µs]}.
func (w *Window) Spec() algorithm.Spec {
	return algorithm.Spec{Name: "fixedwindow", Params: []float64{float64(w.limit), float64(w.window)}}
}

// String describes the window, for logs.
func (w *Window) String() string {
	return fmt.Sprintf("fixedwindow(limit=%d, window=%v)", w.limit, time.Duration(w.window)*time.Microsecond)
}

// A window's state is N0, the index of the window counted, and N1, the
// cost admitted in it.

// NarrowState declares that the window's state is N0 and N1 alone (see
// algorithm.Narrow).
func (w *Window) NarrowState() {}

// Init returns a window with nothing counted.
func (w *Window) Init(_ algorithm.State, _ int64) algorithm.State {
	return algorithm.State{}
}

// at returns the window index of now and the cost counted in it, given
// the state's. A clock that stepped back into an earlier window stays in
// the counted one, unless that window starts more than
// algorithm.MaxDuration after now's: no clock steps back that far, and in
// Redis such an index is another window length's (a minute's index read
// as an hour's lies centuries ahead), so the state counts as fresh rather
// than make every wait that long. The script does the same.
func (w *Window) at(s algorithm.State, now int64) (index, count int64) {
	index = algorithm.FloorDiv(now, w.window)
	switch {
	case s.N1 == 0, s.N0 > index+algorithm.MaxDuration/w.window:
		return index, 0
	case s.N0 >= index:
		return s.N0, s.N1
	default:
		return index, 0
	}
}

func (w *Window) resetAfter(index, count, now int64) int64 {
	if count == 0 {
		return 0
	}
	return (index+1)*w.window - now
}

// Take admits cost when the window of now has room for it.
func (w *Window) Take(s algorithm.State, now, cost int64) (algorithm.State, algorithm.Result) {
	index, count := w.at(s, now)
	if count+cost > w.limit {
		return algorithm.State{N0: s.N0, N1: s.N1}, w.report(index, count, cost, now)
	}
	count += cost
	return algorithm.State{N0: index, N1: count}, w.report(index, count, 0, now)
}

// Peek reports the window of now for a request of cost.
func (w *Window) Peek(s algorithm.State, now, cost int64) algorithm.Result {
	index, count := w.at(s, now)
	return w.report(index, count, cost, now)
}

func (w *Window) report(index, count, cost, now int64) algorithm.Result {
	r := algorithm.Result{
		Remaining:  max(w.limit-count, 0), // a count may exceed a limit lowered since
		ResetAfter: w.resetAfter(index, count, now),
	}
	if count+cost > w.limit {
		r.RetryAfter = (index+1)*w.window - now
	}
	return r
}
