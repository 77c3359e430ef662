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
// The counter books admissions ahead (algorithm.Booker): a booking counts
// in the window it is due in, and the windows before it that it could not
// fit in count as full (see [Window.Book]).
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
	_ algorithm.Booker    = (*Window)(nil)
	_ algorithm.Settler   = (*Window)(nil)
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

// Tag returns {Kind, limit, window}.
func (w *Window) Tag() algorithm.Tag {
	return algorithm.Tag{Kind: Kind, P0: w.limit, P1: w.window}
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
// before it. N1 is a fill pointer: with bookings it goes past Limit, window
// N0+j holding its units [j·Limit, (j+1)·Limit), so that read at window
// N0+k, the count is max(0, N1 − k·Limit) and the previous window's
// min(Limit, max(0, N1 − (k−1)·Limit)). It never goes past 2·Limit: a
// booking that passes whole windows moves N0 on (see Book).

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
		v.count, v.prev = max(s.N1-w.limit, 0), min(s.N1, w.limit)
	case s.N0 == v.index-2 && s.N1 > w.limit:
		v.prev = min(s.N1-w.limit, w.limit)
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
		if v.count > w.limit {
			r.ResetAfter += w.window // booked into the next window (the pointer is within 2·Limit)
		}
	case v.prev > 0:
		r.ResetAfter = start + w.window - now
	}
	if used+cost <= w.limit {
		return r
	}
	// The cost fits once the previous window's share is at most what the
	// count leaves: prev·(Window − e) ≤ a·Window, at elapsed e =
	// Window − ⌊a·Window/prev⌋. If the count itself leaves no room, it
	// fits in the first window j whose part of the pointer does, count −
	// j·Limit ≤ Limit − cost, once the part of the window before weighs
	// little enough.
	if a := w.limit - v.count - cost; a >= 0 {
		q, _ := mulDiv(a, w.window, v.prev)
		r.RetryAfter = start + w.window - q - now
	} else if v.count+cost <= 2*w.limit {
		q, _ := mulDiv(w.limit-max(v.count-w.limit, 0)-cost, w.window, min(v.count, w.limit))
		r.RetryAfter = start + 2*w.window - q - now
	} else {
		j := (v.count + cost - 1) / w.limit
		part := v.count - (j-1)*w.limit // in window j−1, above Limit − cost
		q, _ := mulDiv(w.limit-max(part-w.limit, 0)-cost, w.window, min(part, w.limit))
		r.RetryAfter = start + (j+1)*w.window - q - now
	}
	return r
}

// Book charges cost at now for an admission due at act (see
// algorithm.Booker), in the window of act, index+j from now's: the
// pointer becomes max(pointer, j·Limit) + cost, so that a booking that
// does not fit a window's remainder skips it, and the windows before the
// booked one count as full, the one before it too as the previous window
// (never less than exact). A booking that passes whole windows moves the
// state's index to the window before the booked one (an index ahead of
// now's, read as a clock that stepped back: full), keeping the pointer
// within 2·Limit, so act must be at most algorithm.MaxDuration after now,
// as stores book.
func (w *Window) Book(s algorithm.State, now, act, cost int64) (algorithm.State, algorithm.Result) {
	v := w.at(s, now)
	switch j := algorithm.FloorDiv(act, w.window) - v.index; {
	case j <= 0, j == 1 && v.count >= w.limit:
		v.count += cost
	case j == 1:
		v.count = w.limit + cost
	default:
		v.index, v.count, v.prev = v.index+j-1, w.limit+cost, w.limit
		v.elapsed = max(now-v.index*w.window, 0)
	}
	s.N0, s.N1, s.N2 = v.index, v.count, v.prev
	r := w.report(v, w.used(v), now, 0)
	r.RetryAfter = act - now
	return s, r
}

// Refund gives back up to n of what counts at now, the latest first: from
// the count (the pointer), then from the previous window's count (see
// algorithm.Booker), only while nothing is booked past the window of now:
// a pointer beyond the limit, or one in a later window, holds bookings not
// yet due, which only their Reservation gives back (Cancel).
func (w *Window) Refund(s algorithm.State, now, n int64) (algorithm.State, algorithm.Result) {
	if v := w.at(s, now); v.index != algorithm.FloorDiv(now, w.window) || v.count > w.limit {
		n = 0
	}
	next, _, r := w.give(s, now, n)
	return next, r
}

// give takes up to n off the count at now, then off the previous
// window's, and returns how much it took.
func (w *Window) give(s algorithm.State, now, n int64) (algorithm.State, int64, algorithm.Result) {
	v := w.at(s, now)
	if v.count == 0 && v.prev == 0 || n < 1 {
		return s, 0, w.report(v, w.used(v), now, 1)
	}
	c := min(n, v.count)
	p := min(n-c, v.prev)
	v.count -= c
	v.prev -= p
	s.N0, s.N1, s.N2 = v.index, v.count, v.prev
	return s, c + p, w.report(v, w.used(v), now, 1)
}

// Undo gives back up to n of an admission of cost due at act (see
// algorithm.Undoer): for the state the admission left (exact), n off the
// count and then the previous window's (its newest units are the
// admission's own) as far as the state still counts them at now (in the
// windows they were charged into, later than act's when a clock stepped
// back); otherwise
// before act nothing (Unused), and at or after it, when nothing is booked
// past the window of now, n from the count when act lies in the window of
// now, or from the previous window's count when it lies there and the
// window of now has counted nothing (a cost taken from the count instead
// would count longer); nothing once act's window no longer counts.
func (w *Window) Undo(s algorithm.State, now, act, cost, n int64, exact bool) (algorithm.State, int64, algorithm.Result) {
	n = min(n, cost)
	v := w.at(s, now)
	cur, due := algorithm.FloorDiv(now, w.window), algorithm.FloorDiv(act, w.window)
	var give int64
	switch {
	case exact:
		give = n
	case act > now: // Unused
	case v.index == cur && v.count <= w.limit && (due == cur || due == cur-1 && v.count == 0):
		give = n
	}
	return w.give(s, now, give)
}

// Owe charges n more into the window of max(now, act) (see
// algorithm.Settler), as Book charges a booking there, whether or not it
// has room: units past a window's limit are counted in the next window,
// and so on, a debt that later requests wait out. A debt that passes whole
// windows moves the state's index on, the window before it full, keeping
// the pointer within 2·Limit, as Book does; it is cut where the index
// would lie more than algorithm.MaxDuration after now's (where the state
// would read as fresh).
func (w *Window) Owe(s algorithm.State, now, act, n int64) (algorithm.State, algorithm.Result) {
	v := w.at(s, now)
	n = min(n, 1<<61) // no overflow below; far beyond the cut
	switch j := algorithm.FloorDiv(max(now, act), w.window) - v.index; {
	case j <= 0, j == 1 && v.count >= w.limit:
		v.count += n
	case j == 1:
		v.count = w.limit + n
	default:
		v.index, v.count, v.prev = v.index+j-1, w.limit+n, w.limit
	}
	if v.count > 2*w.limit {
		k := (v.count - w.limit - 1) / w.limit // count − k·Limit is within (Limit, 2·Limit]
		if most := algorithm.FloorDiv(now, w.window) + algorithm.MaxDuration/w.window - 1 - v.index; k > most {
			k = max(most, 0)
			v.count = 2*w.limit + k*w.limit
		}
		v.index, v.count = v.index+k, v.count-k*w.limit
		if k > 0 {
			v.prev = w.limit
		}
	}
	s.N0, s.N1, s.N2 = v.index, v.count, v.prev
	return s, w.Peek(s, now, 1)
}

// Unused is 0: a counter gives back a booking only through a store's
// exact undo of the booking (the state before it), or through Refund.
func (w *Window) Unused(_ algorithm.State, _, _, _ int64) int64 { return 0 }
