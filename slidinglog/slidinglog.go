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
// The live entries are buf[head:]: expiring entries advances head, and the
// dead prefix is reclaimed by compaction when appending would otherwise
// grow the buffer, so each entry is copied O(1) times on average and a
// steady log allocates nothing.
type logState struct {
	l    *Log
	buf  []entry
	head int
	used int64
}

// entries returns the live entries.
func (s *logState) entries() []entry { return s.buf[s.head:] }

// expire forgets entries that have left the window at now: those at or
// before now−window. Forgetting them changes no decision.
func (s *logState) expire(now int64) {
	cut := now - s.l.window
	for s.head < len(s.buf) && s.buf[s.head].at <= cut {
		s.used -= s.buf[s.head].cost
		s.head++
	}
	if s.head == len(s.buf) {
		s.buf, s.head = s.buf[:0], 0
	}
}

// grow makes room for one more entry at the end of buf, compacting the
// live entries to the front when at least half of buf is dead.
func (s *logState) grow() {
	if len(s.buf) == cap(s.buf) && s.head > 0 && s.head >= len(s.buf)/2 {
		n := copy(s.buf, s.buf[s.head:])
		s.buf, s.head = s.buf[:n], 0
	}
	s.buf = append(s.buf, entry{})
}

// record logs cost at now, keeping entries ordered even when now is
// earlier than the newest entry (a clock that stepped back).
func (s *logState) record(now, cost int64) {
	s.used += cost
	live := s.entries()
	last := len(live) - 1
	switch {
	case last < 0 || live[last].at < now:
		s.grow()
		s.buf[len(s.buf)-1] = entry{now, cost}
	case live[last].at == now:
		live[last].cost += cost
	default:
		i := sort.Search(len(live), func(i int) bool { return live[i].at >= now })
		if live[i].at == now {
			live[i].cost += cost
			return
		}
		s.grow()
		live = s.entries()
		copy(live[i+1:], live[i:])
		live[i] = entry{now, cost}
	}
}

// retryAfter returns the microseconds from now until cost fits: when enough
// of the oldest entries have left the window.
func (s *logState) retryAfter(cost, now int64) int64 {
	excess := s.used + cost - s.l.limit
	if excess <= 0 {
		return 0
	}
	for _, e := range s.entries() {
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
	live := s.entries()
	if len(live) == 0 {
		return 0
	}
	return live[len(live)-1].at + s.l.window - now
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
