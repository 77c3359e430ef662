// Package slidinglog provides the sliding-log algorithm: an exact rolling
// window.
//
// At most Limit units of cost are admitted in any window of length Window:
// a request at instant t is admitted when the cost admitted in (t−Window, t]
// plus its own cost is at most Limit. Admitted requests are logged with
// their instant; a denied request is not logged and consumes nothing.
// Memory per key grows with the cost admitted in one window, so it is
// bounded by Limit entries.
//
// Pick a sliding log when the bound must hold for every window, with no
// burst at window edges (which a fixed window allows: up to 2×Limit across
// one edge), and Limit is small enough to keep a log of (hundreds or
// thousands, not millions).
package slidinglog

import (
	"fmt"
	"sort"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// MaxLimit is the largest Limit a sliding log accepts. Its memory per key
// is proportional to Limit.
const MaxLimit = int64(1) << 24

// Config configures a sliding log.
type Config struct {
	// Limit is the most cost admitted in any window, 1 ≤ Limit ≤ MaxLimit.
	Limit int64
	// Window is the length of the rolling window, at least 1µs and at most
	// algorithm.MaxDuration; it is truncated to whole microseconds.
	Window time.Duration
}

// Log is a sliding-log algorithm. Create it with [New].
type Log struct {
	limit  int64
	window int64 // µs
}

var _ algorithm.Algorithm = (*Log)(nil)

// New returns a sliding log admitting cfg.Limit per cfg.Window, or an error
// wrapping algorithm.ErrInvalidConfig.
func New(cfg Config) (*Log, error) {
	if cfg.Limit < 1 || cfg.Limit > MaxLimit {
		return nil, fmt.Errorf("%w: slidinglog: Limit must be in [1, %d], got %d", algorithm.ErrInvalidConfig, MaxLimit, cfg.Limit)
	}
	window := cfg.Window.Microseconds()
	if err := algorithm.CheckDuration("slidinglog: Window", window); err != nil {
		return nil, err
	}
	return &Log{limit: cfg.Limit, window: window}, nil
}

// Limit returns the most cost admitted in one window.
func (l *Log) Limit() int64 { return l.limit }

// Window returns the length of the rolling window.
func (l *Log) Window() time.Duration { return time.Duration(l.window) * time.Microsecond }

// Spec returns {"slidinglog", [limit, window µs]}.
func (l *Log) Spec() algorithm.Spec {
	return algorithm.Spec{Name: "slidinglog", Params: []float64{float64(l.limit), float64(l.window)}}
}

// String describes the log, for logs.
func (l *Log) String() string {
	return fmt.Sprintf("slidinglog(limit=%d, window=%v)", l.limit, time.Duration(l.window)*time.Microsecond)
}

// NewState returns an empty log.
func (l *Log) NewState(int64) algorithm.State { return &logState{l: l} }

// entry is cost admitted at one instant.
type entry struct {
	at, cost int64
}

// logState keeps the admitted entries ordered by instant, oldest first,
// merging entries of the same instant; used is the sum of their costs.
type logState struct {
	l       *Log
	entries []entry
	used    int64
}

// expire forgets entries that have left the window at now: those at or
// before now−window. Forgetting them changes no decision.
func (s *logState) expire(now int64) {
	cut := now - s.l.window
	n := 0
	for n < len(s.entries) && s.entries[n].at <= cut {
		s.used -= s.entries[n].cost
		n++
	}
	if n == 0 {
		return
	}
	if n == len(s.entries) {
		s.entries = s.entries[:0]
		return
	}
	// Shift rather than reslice, so the backing array is reused and the
	// log never holds more than the entries of one window.
	m := copy(s.entries, s.entries[n:])
	s.entries = s.entries[:m]
}

// record logs cost at now, keeping entries ordered even when now is
// earlier than the newest entry (a clock that stepped back).
func (s *logState) record(now, cost int64) {
	s.used += cost
	last := len(s.entries) - 1
	switch {
	case last < 0 || s.entries[last].at < now:
		s.entries = append(s.entries, entry{now, cost})
	case s.entries[last].at == now:
		s.entries[last].cost += cost
	default:
		i := sort.Search(len(s.entries), func(i int) bool { return s.entries[i].at >= now })
		if s.entries[i].at == now {
			s.entries[i].cost += cost
			return
		}
		s.entries = append(s.entries, entry{})
		copy(s.entries[i+1:], s.entries[i:])
		s.entries[i] = entry{now, cost}
	}
}

// retryAfter returns the microseconds from now until cost fits: when enough
// of the oldest entries have left the window.
func (s *logState) retryAfter(cost, now int64) int64 {
	excess := s.used + cost - s.l.limit
	if excess <= 0 {
		return 0
	}
	for _, e := range s.entries {
		excess -= e.cost
		if excess <= 0 {
			return e.at + s.l.window - now
		}
	}
	// Only a cost above the limit gets here (callers check costs first):
	// it never fits, and the best answer is when the log is empty.
	return s.resetAfter(now)
}

// resetAfter returns the microseconds from now until the newest entry
// leaves the window.
func (s *logState) resetAfter(now int64) int64 {
	if len(s.entries) == 0 {
		return 0
	}
	return s.entries[len(s.entries)-1].at + s.l.window - now
}

func (s *logState) Take(now, cost int64) algorithm.Result {
	s.expire(now)
	if s.used+cost > s.l.limit {
		return algorithm.Result{
			Limit:      s.l.limit,
			Remaining:  s.l.limit - s.used,
			RetryAfter: s.retryAfter(cost, now),
			ResetAfter: s.resetAfter(now),
		}
	}
	s.record(now, cost)
	return algorithm.Result{
		Allowed:    true,
		Limit:      s.l.limit,
		Remaining:  s.l.limit - s.used,
		ResetAfter: s.resetAfter(now),
	}
}

func (s *logState) Peek(now int64) algorithm.Result {
	s.expire(now)
	return algorithm.Result{
		Allowed:    s.used < s.l.limit,
		Limit:      s.l.limit,
		Remaining:  s.l.limit - s.used,
		RetryAfter: s.retryAfter(1, now),
		ResetAfter: s.resetAfter(now),
	}
}
