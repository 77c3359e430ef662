// Package fixedwindow provides the fixed-window counter algorithm.
//
// Time is cut into windows of length Window aligned to the Unix epoch: the
// window of instant t is ⌊t/Window⌋. At most Limit units of cost are
// admitted per window; a denied request does not count. The count starts
// again at 0 in each window.
//
// A window books admissions ahead (algorithm.Booker): a booking counts in
// the window it is due in, and the windows before it that it could not fit
// in count as full (see [Window.Book]).
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
	_ algorithm.Booker    = (*Window)(nil)
	_ algorithm.Settler   = (*Window)(nil)
	_ algorithm.Narrow    = (*Window)(nil)
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

// Tag returns {Kind, limit, window}.
func (w *Window) Tag() algorithm.Tag {
	return algorithm.Tag{Kind: Kind, P0: w.limit, P1: w.window}
}

// Spec returns {"fixedwindow", [limit, window µs]}.
func (w *Window) Spec() algorithm.Spec {
	return algorithm.Spec{Name: "fixedwindow", Params: []float64{float64(w.limit), float64(w.window)}}
}

// String describes the window, for logs.
func (w *Window) String() string {
	return fmt.Sprintf("fixedwindow(limit=%d, window=%v)", w.limit, time.Duration(w.window)*time.Microsecond)
}

// A window's state is N0, the index of a window, and N1, a fill pointer
// counted from it: window N0+j holds the units [j·Limit, (j+1)·Limit) of
// N1. Without bookings N1 is the cost admitted in window N0, at most
// Limit; bookings into later windows take it further, but never past
// 2·Limit: a booking that passes whole windows moves N0 on (see Book).
// Read at a later window N0+k, the pointer is max(0, N1 − k·Limit).

// NarrowState declares that the window's state is N0 and N1 alone (see
// algorithm.Narrow).
func (w *Window) NarrowState() {}

// Init returns a window with nothing counted.
func (w *Window) Init(_ algorithm.State, _ int64) algorithm.State {
	return algorithm.State{}
}

// at returns the window index of now and the fill pointer counted from
// it, given the state's. A clock that stepped back into an earlier window
// stays in the counted one, unless that window starts more than
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
	case s.N0 == index-1: // what was booked into the window of now
		count = max(s.N1-w.limit, 0)
	}
	return index, count
}

// resetAfter is the end of the last window the pointer reaches (the one
// after index at most: the pointer is within 2·Limit).
func (w *Window) resetAfter(index, count, now int64) int64 {
	if count == 0 {
		return 0
	}
	if count > w.limit {
		index++
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
		Remaining:  max(w.limit-count, 0), // booked ahead, or counted under a limit lowered since
		ResetAfter: w.resetAfter(index, count, now),
	}
	if count += cost; count > w.limit {
		// The first window j ≥ 1 whose part of the pointer leaves room,
		// count − j·Limit ≤ Limit − cost: the next one, or the one after
		// (the pointer is within 2·Limit).
		if count > 2*w.limit {
			index++
		}
		r.RetryAfter = (index+1)*w.window - now
	}
	return r
}

// Book charges cost at now for an admission due at act (see
// algorithm.Booker), in the window of act, index+j from now's: the
// pointer becomes max(pointer, j·Limit) + cost, so that a booking that
// does not fit a window's remainder skips it, and every window before the
// booked one counts as full. A booking that passes whole windows moves
// the state's index to the window before the booked one (an index ahead of
// now's, read as a clock that stepped back: full), keeping the pointer
// within 2·Limit, so act must be at most algorithm.MaxDuration after now,
// as stores book.
func (w *Window) Book(s algorithm.State, now, act, cost int64) (algorithm.State, algorithm.Result) {
	index, count := w.at(s, now)
	switch j := algorithm.FloorDiv(act, w.window) - index; {
	case j <= 0, j == 1 && count >= w.limit:
		count += cost
	default:
		index, count = index+j-1, w.limit+cost
	}
	r := w.report(index, count, 0, now)
	r.RetryAfter = act - now
	return algorithm.State{N0: index, N1: count}, r
}

// Refund gives back up to n of the count of the window of now (see
// algorithm.Booker), only while nothing is booked past it: a pointer
// beyond the limit, or one in a later window, holds bookings not yet
// due, which only their Reservation gives back (Cancel).
func (w *Window) Refund(s algorithm.State, now, n int64) (algorithm.State, algorithm.Result) {
	index, count := w.at(s, now)
	if index != algorithm.FloorDiv(now, w.window) || count > w.limit {
		n = 0
	}
	next, _, r := w.give(s, now, n)
	return next, r
}

// give takes up to n off the pointer at now, and returns how much it took.
// A pointer whose index lies ahead of now's window (a booking or a debt
// that passed whole windows, each before the index full) and that it
// empties is put back one window, full: the window before the index
// keeps its units, where an empty count would read as a fresh window of
// now.
func (w *Window) give(s algorithm.State, now, n int64) (algorithm.State, int64, algorithm.Result) {
	index, count := w.at(s, now)
	if count == 0 || n < 1 {
		return algorithm.State{N0: s.N0, N1: s.N1}, 0, w.report(index, count, 1, now)
	}
	given := min(n, count)
	count -= given
	if count == 0 && index > algorithm.FloorDiv(now, w.window) {
		index, count = index-1, w.limit
	}
	return algorithm.State{N0: index, N1: count}, given, w.report(index, count, 1, now)
}

// Undo gives back up to n of an admission of cost due at act (see
// algorithm.Undoer): for the state the admission left (exact), n off the
// pointer, whose newest units are its own, as far as the window of now
// still counts them (the window they were charged into, which is not
// act's when a clock stepped back); otherwise before act nothing (Unused), and at or after
// it n from the count of the window of now, when act lies in that window
// and nothing is booked past it. Nothing once the window of act has ended.
func (w *Window) Undo(s algorithm.State, now, act, cost, n int64, exact bool) (algorithm.State, int64, algorithm.Result) {
	n = min(n, cost)
	index, count := w.at(s, now)
	cur, due := algorithm.FloorDiv(now, w.window), algorithm.FloorDiv(act, w.window)
	var give int64
	switch {
	case exact:
		give = n
	case act > now: // Unused
	case due == cur && index == cur && count <= w.limit:
		give = n
	}
	return w.give(s, now, give)
}

// Owe charges n more into the window of max(now, act) (see
// algorithm.Settler), as Book charges a booking there, whether or not it
// has room: units past a window's limit are counted in the next window,
// and so on, a debt that later requests wait out. A debt that passes whole
// windows moves the state's index on, keeping the pointer within 2·Limit,
// as Book does; it is cut where the index would lie more than
// algorithm.MaxDuration after now's (where the state would read as
// fresh).
func (w *Window) Owe(s algorithm.State, now, act, n int64) (algorithm.State, algorithm.Result) {
	index, count := w.at(s, now)
	n = min(n, 1<<61) // no overflow below; far beyond the cut
	switch j := algorithm.FloorDiv(max(now, act), w.window) - index; {
	case j <= 0, j == 1 && count >= w.limit:
		count += n
	default:
		index, count = index+j-1, w.limit+n
	}
	if count > 2*w.limit {
		k := (count - w.limit - 1) / w.limit // count − k·Limit is within (Limit, 2·Limit]
		if most := algorithm.FloorDiv(now, w.window) + algorithm.MaxDuration/w.window - 1 - index; k > most {
			k, count = max(most, 0), 2*w.limit+max(most, 0)*w.limit
		}
		index, count = index+k, count-k*w.limit
	}
	next := algorithm.State{N0: index, N1: count}
	return next, w.Peek(next, now, 1)
}

// Unused is 0: a window gives back a booking only through a store's exact
// undo of the booking (the state before it), or through Refund.
func (w *Window) Unused(_ algorithm.State, _, _, _ int64) int64 { return 0 }
