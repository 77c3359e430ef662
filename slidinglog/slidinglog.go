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

// A log's state is N0, the cost its live entries add up to, and Log,
// the entries: cost admitted per instant, oldest first, merging entries of
// the same instant. The live entries are Log.Entries[Log.Head:]: expiring
// entries advances Head, and the dead prefix is reclaimed by compaction
// when appending would otherwise grow the buffer, so each entry is copied
// O(1) times on average and a steady log allocates nothing.

// Init sets s to an empty log, keeping the buffer s.Log holds.
func (l *Log) Init(s *algorithm.State, _ int64) {
	s.N0, s.N1, s.N2 = 0, 0, 0
	if s.Log != nil {
		s.Log.Entries, s.Log.Head = s.Log.Entries[:0], 0
	}
}

// live returns the live entries.
func live(s *algorithm.State) []algorithm.Entry {
	if s.Log == nil {
		return nil
	}
	return s.Log.Entries[s.Log.Head:]
}

// expire forgets entries that have left the window at now: those at or
// before now−window. Forgetting them changes no decision.
func (l *Log) expire(s *algorithm.State, now int64) {
	g := s.Log
	if g == nil {
		return
	}
	cut := now - l.window
	for g.Head < len(g.Entries) && g.Entries[g.Head].At <= cut {
		s.N0 -= g.Entries[g.Head].Cost
		g.Head++
	}
	if g.Head == len(g.Entries) {
		g.Entries, g.Head = g.Entries[:0], 0
	}
}

// grow makes room for one more entry at the end of the buffer, compacting
// the live entries to the front when at least half of it is dead.
func grow(g *algorithm.Log) {
	if len(g.Entries) == cap(g.Entries) && g.Head > 0 && g.Head >= len(g.Entries)/2 {
		n := copy(g.Entries, g.Entries[g.Head:])
		g.Entries, g.Head = g.Entries[:n], 0
	}
	g.Entries = append(g.Entries, algorithm.Entry{})
}

// record logs cost at now, keeping entries ordered even when now is
// earlier than the newest entry (a clock that stepped back).
func record(s *algorithm.State, now, cost int64) {
	if s.Log == nil {
		s.Log = new(algorithm.Log)
	}
	g := s.Log
	s.N0 += cost
	entries := g.Entries[g.Head:]
	last := len(entries) - 1
	switch {
	case last < 0 || entries[last].At < now:
		grow(g)
		g.Entries[len(g.Entries)-1] = algorithm.Entry{At: now, Cost: cost}
	case entries[last].At == now:
		entries[last].Cost += cost
	default:
		i := sort.Search(len(entries), func(i int) bool { return entries[i].At >= now })
		if entries[i].At == now {
			entries[i].Cost += cost
			return
		}
		grow(g)
		entries = g.Entries[g.Head:]
		copy(entries[i+1:], entries[i:])
		entries[i] = algorithm.Entry{At: now, Cost: cost}
	}
}

// inWindow returns the entries of s in the window ending at now, those
// after now−window, and the cost they add up to, without changing s.
func (l *Log) inWindow(s *algorithm.State, now int64) ([]algorithm.Entry, int64) {
	entries, used := live(s), s.N0
	cut := now - l.window
	i := 0
	for i < len(entries) && entries[i].At <= cut {
		used -= entries[i].Cost
		i++
	}
	return entries[i:], used
}

// Charge admits cost when the cost admitted in (now−Window, now] leaves
// room for it.
func (l *Log) Charge(s *algorithm.State, now, cost int64) bool {
	l.expire(s, now)
	if s.N0+cost > l.limit {
		return false
	}
	record(s, now, cost)
	return true
}

// Peek reports the window ending at now for a request of cost. A request
// that does not fit waits until enough of the oldest entries have left the
// window; the key is fresh once the newest has.
func (l *Log) Peek(s algorithm.State, now, cost int64) algorithm.Result {
	entries, used := l.inWindow(&s, now)
	r := algorithm.Result{Remaining: l.limit - used}
	if len(entries) > 0 {
		r.ResetAfter = entries[len(entries)-1].At + l.window - now
	}
	if excess := used + cost - l.limit; excess > 0 {
		for _, e := range entries {
			if excess -= e.Cost; excess <= 0 {
				r.RetryAfter = e.At + l.window - now
				break
			}
		}
	}
	return r
}
