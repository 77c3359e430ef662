// Package slidinglog provides the sliding-log algorithm: an exact rolling
// window.
//
// At most Limit units of cost are admitted in any window of length Window:
// a request at instant t is admitted when the cost admitted in (t−Window, t]
// plus its own cost is at most Limit. Admitted requests are logged with
// their instant; a denied request is not logged and consumes nothing.
//
// The log keeps one entry per instant (microsecond) at which cost was
// admitted, whatever the cost: memory per key grows with the number of
// admissions in one window, never with their cost, and is at most Limit
// entries. Each entry holds the cumulative cost admitted up to it, so a
// decision finds the cost in the window, and the instant enough of it
// leaves, by binary search: O(log n) for a log of n entries, whatever the
// cost and however many entries have expired since the last request.
//
// Admissions may be booked ahead (Book, behind a Limiter's Reserve and
// Wait): a booking is logged at the instant it is due, and every entry
// after t−Window counts at t, those still to come included, so a booking
// holds its place from the moment it is made. Refund gives back the newest
// cost first.
//
// An instant earlier than the latest one the log charged at (a clock that
// stepped back) is taken as that latest instant, the log's clock: the
// entries it forgot had left the window there, and a key seen by a clock
// that stepped back is no freer than it was. Without bookings, the log's
// clock is its newest entry's instant.
//
// [Per] and its shorthands say the limit as people do: PerMinute(1000) is
// New(Config{Limit: 1000, Window: time.Minute}).
//
// Pick a sliding log when the bound must hold for every window, with no
// burst at window edges (which a fixed window allows: up to 2×Limit across
// one edge), and Limit is small: at most [MaxLimit]. For larger limits, the
// sliding-window counter (package slidingwindow) approximates the same
// rule in constant memory.
package slidinglog

import (
	"fmt"
	"sort"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// MaxLimit is the largest Limit a sliding log accepts, 2^15.
//
// A key's log holds up to Limit entries (more when it admitted more than
// one unit per entry, fewer when admissions share instants), and in Redis
// each entry is a sorted-set member. Redis frees a key in one piece when
// its time to live ends (or on Reset), synchronously unless the server
// runs with lazyfree-lazy-expire, and that takes time proportional to its
// members: 3.7–4.0 ms measured on Redis 7.0 for a full log of 2^15 (about
// 0.12 µs each; a log being trimmed may hold up to 1,001 expired members
// more). A larger limit would let one key's expiry hold up every client
// of the server for longer than a decision's 5 ms budget.
const MaxLimit = int64(1) << 15

// Config configures a sliding log.
type Config struct {
	// Limit is the most cost admitted in any window, 1 ≤ Limit ≤ MaxLimit.
	Limit int64
	// Window is the length of the rolling window, at least 1µs and at most
	// algorithm.MaxDuration; it is truncated to whole microseconds.
	Window time.Duration
}

// Log is a sliding-log algorithm. Create it with [New] or [Per].
type Log struct {
	limit  int64
	window int64 // µs
}

var (
	_ algorithm.Algorithm = (*Log)(nil)
	_ algorithm.Quoter    = (*Log)(nil)
	_ algorithm.Booker    = (*Log)(nil)
	_ algorithm.Settler   = (*Log)(nil)
)

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

// Quota returns Limit per Window, the quota as Config and [Per] say it
// alike. It changes no decision, nor Spec.
func (l *Log) Quota() algorithm.Quota {
	return algorithm.Quota{Limit: l.limit, Window: time.Duration(l.window) * time.Microsecond}
}

// Tag returns {Kind, window}: entries are instants and costs,
// which mean the same whatever the limit.
func (l *Log) Tag() algorithm.Tag {
	return algorithm.Tag{Kind: Kind, P0: l.window}
}

// Spec returns {"slidinglog", [limit, window µs]}.
func (l *Log) Spec() algorithm.Spec {
	return algorithm.Spec{Name: "slidinglog", Params: []float64{float64(l.limit), float64(l.window)}}
}

// String describes the log, for logs.
func (l *Log) String() string {
	return fmt.Sprintf("slidinglog(limit=%d, window=%v)", l.limit, time.Duration(l.window)*time.Microsecond)
}

// A log's state is its entries, Log.Entries[Log.Head:], oldest first, one
// per instant at which cost was admitted (or is booked), their instants
// rising; each entry's Cost field holds the cumulative cost the state
// admitted up to and including that entry, so the cost of the entries
// after one is a subtraction. N0 is the cumulative cost before the first
// entry kept (that of the entries forgotten), N1 the log's clock, the
// latest instant a charge was decided at, and N2 the cumulative cost up to
// the newest entry; a state that never admitted anything, or gave all of
// it back, has N2 = 0 (and N1 then means nothing). N1 is the newest
// entry's instant but while a booking is ahead of the clock (or after a
// refund removed the newest entries).
//
// A decision at now is made at t = max(now, N1): the cost in the window is
// that of the entries after t−Window, those after t (bookings) included.
// A charge decided at t logs its cost at the newest entry's instant when
// that is later (a Take while bookings are ahead: logged later, it only
// counts longer), so that instants and cumulative costs rise together, and
// a booking at its due instant, or the newest entry's when that is later.
//
// A charge forgets the entries that left the window at its instant:
// they can never count again, since every later decision is made at that
// instant or later. Forgetting advances Head past them (found by binary
// search); the dead prefix is reclaimed by compaction when appending would
// otherwise grow the buffer, so each entry is copied O(1) times on average
// and a steady log allocates nothing.
//
// The Redis script keeps the same log as a sorted set (see slidinglog.lua
// in internal/luascript): decisions are the same, entry for entry.

// Init returns an empty log, keeping the buffer old.Log holds: it empties
// that Log in place and returns a state pointing to it.
func (l *Log) Init(old algorithm.State, _ int64) algorithm.State {
	if old.Log != nil {
		old.Log.Entries, old.Log.Head = old.Log.Entries[:0], 0
	}
	return algorithm.State{Log: old.Log}
}

// live returns the entries kept.
func live(s *algorithm.State) []algorithm.Entry {
	if s.Log == nil {
		return nil
	}
	return s.Log.Entries[s.Log.Head:]
}

// at returns the instant a decision at now is made at: now, or the log's
// clock when it is later.
func at(s *algorithm.State, now int64) int64 {
	if s.N2 > 0 && s.N1 > now {
		return s.N1
	}
	return now
}

// split returns the index of the first entry of entries after cut, and
// the cumulative cost before it: the cost admitted at or before cut.
func split(s *algorithm.State, entries []algorithm.Entry, cut int64) (int, int64) {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].At > cut })
	if i == 0 {
		return 0, s.N0
	}
	return i, entries[i-1].Cost
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

// Take admits cost when the cost admitted in the window ending at now
// leaves room for it, then reports the log it left. An admission changes
// s.Log in place (or, when s has none, makes one) and returns a state
// pointing to it; s then no longer means what it did.
func (l *Log) Take(s algorithm.State, now, cost int64) (algorithm.State, algorithm.Result) {
	if !l.charge(&s, now, now, cost, false) {
		return s, l.Peek(s, now, cost)
	}
	r := l.Peek(s, now, cost)
	r.RetryAfter = 0
	return s, r
}

// charge is Take's transition, and Book's: it charges cost to *s, decided
// at now (at the log's clock when that is later), when it fits there or
// when book is set (Book's caller has checked that it fits at act), and
// reports whether it did. The cost is logged at max(act, t), or at the
// newest entry when that is later; Take passes act = now.
func (l *Log) charge(s *algorithm.State, now, act, cost int64, book bool) bool {
	t := at(s, now)
	entries := live(s)
	i, base := split(s, entries, t-l.window)
	if !book && s.N2-base+cost > l.limit {
		return false
	}
	due := max(act, t)
	if s.Log == nil {
		s.Log = new(algorithm.Log)
	}
	g := s.Log
	// Forget the entries that left the window, the first i kept ones,
	// before appending, so that their room is reused.
	if i > 0 {
		s.N0 = base
		g.Head += i
		if g.Head == len(g.Entries) {
			g.Entries, g.Head = g.Entries[:0], 0
		}
		entries = g.Entries[g.Head:]
	}
	total := s.N2 + cost
	if n := len(entries); n > 0 && entries[n-1].At >= due {
		// At the newest entry, at due or (booked) later: one entry per
		// instant, and instants never fall.
		entries[n-1].Cost = total
	} else {
		grow(g)
		g.Entries[len(g.Entries)-1] = algorithm.Entry{At: due, Cost: total}
	}
	s.N1, s.N2 = t, total
	return true
}

// Peek reports the window ending at now for a request of cost. A request
// that does not fit waits until enough of the oldest entries have left the
// window (the first instant at which it fits: entries only leave); the key
// is fresh once the newest, booked or not, has.
func (l *Log) Peek(s algorithm.State, now, cost int64) algorithm.Result {
	t := at(&s, now)
	entries := live(&s)
	i, base := split(&s, entries, t-l.window)
	used := s.N2 - base
	r := algorithm.Result{Remaining: max(l.limit-used, 0)} // used may exceed a limit lowered since
	if used > 0 {
		// The newest entry counts (used > 0): fresh once it has left,
		// bookings included.
		r.ResetAfter = entries[len(entries)-1].At + l.window - now
	}
	if excess := used + cost - l.limit; excess > 0 {
		// The first entry whose leaving takes excess out of the window.
		in := entries[i:]
		j := sort.Search(len(in), func(j int) bool { return in[j].Cost-base >= excess })
		if j < len(in) {
			r.RetryAfter = in[j].At + l.window - now
		} else {
			// Only a cost above the limit, which stores never ask for,
			// gets here: it is never admitted. Deny it until the log is
			// fresh rather than fail.
			r.RetryAfter = max(r.ResetAfter, 1)
		}
	}
	return r
}
