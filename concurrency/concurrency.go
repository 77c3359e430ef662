// Package concurrency provides an in-flight limit: at most Limit units
// held at once, each hold counting until it is released or its lease runs
// out.
//
// A hold is an admission like any other algorithm's, made by a Limiter or
// a Policy (ratelimit.Limiter.ReserveN, AllowN, WaitN), and it counts from
// the instant it is admitted until it is given back through its
// reservation (ratelimit.Reservation.Release, or Refund) or until Lease has
// passed since it was admitted, whichever comes first: a holder that dies,
// or forgets to release, frees its slot when its lease ends. Leases are
// measured by the clock the limiter decides by: across processes, use one
// clock (clock.Server() on Redis) or keep their skew well under Lease, since
// a process whose clock runs ahead sees another's holds end that much
// early.
//
// Think of it as a sliding log whose window is the lease and whose entries
// can be taken out by hand: the state keeps, per instant at which units
// were admitted, how many of them are still held. A request of cost n is
// admitted when the units held now (those admitted in the last Lease and
// not released) plus n are at most Limit; a denied request holds nothing.
// A denial's RetryAfter is when enough leases end, if nobody releases
// first: an upper bound, not a forecast. A hold is therefore never booked
// ahead at a lease's end, as the rate algorithms book: ReserveN decides it
// now whatever its delay (OK, or not with that RetryAfter), and WaitN
// waits in turn for a release, a lease's end only bounding the wait. A
// WaitN's hold has no reservation: Limiter.Refund by key releases it.
//
// A release gives back the hold's own units, found by the instant it was
// admitted: a release after the lease ended gives nothing back, and units
// another hold admitted later are never touched. A Reservation releases
// once; its second Release or Refund gives nothing.
//
// Memory per key grows with the instants at which held units were
// admitted, at most Limit entries; on Redis, each unit held is a member of
// a sorted set of the key's own, and every decision, release or refund is
// one script of O(log n) commands in the members n.
//
// Pick it to protect what counts concurrent work rather than a rate: a
// database's connections, a model server's batch slots, a partner API that
// limits calls in progress. Combine it with a rate limit in one
// ratelimit.Policy to have a request take a rate token and a slot, or
// neither.
package concurrency

import (
	"fmt"
	"sort"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// MaxLimit is the largest Limit accepted, 2^15: on Redis each unit held is
// a sorted-set member, as each entry of a sliding log is (see
// slidinglog.MaxLimit for what a larger set costs a server when it
// expires).
const MaxLimit = int64(1) << 15

// Config configures an in-flight limit.
type Config struct {
	// Limit is the most units held at once, 1 ≤ Limit ≤ MaxLimit.
	Limit int64
	// Lease is how long a hold counts when it is not released: at least
	// 1µs and at most algorithm.MaxDuration, truncated to whole
	// microseconds. Make it longer than the longest request, by a margin:
	// a hold whose lease ends while its request still runs no longer
	// counts.
	Lease time.Duration
}

// Slots is an in-flight limit. Create it with [New].
type Slots struct {
	limit int64
	lease int64 // µs
}

var (
	_ algorithm.Algorithm = (*Slots)(nil)
	_ algorithm.Booker    = (*Slots)(nil)
	_ algorithm.Undoer    = (*Slots)(nil)
	_ algorithm.Holder    = (*Slots)(nil)
)

// New returns an in-flight limit of cfg.Limit units held at once, each for
// at most cfg.Lease, or an error wrapping algorithm.ErrInvalidConfig.
func New(cfg Config) (*Slots, error) {
	if cfg.Limit < 1 || cfg.Limit > MaxLimit {
		return nil, fmt.Errorf("%w: concurrency: Limit must be in [1, %d], got %d", algorithm.ErrInvalidConfig, MaxLimit, cfg.Limit)
	}
	lease := cfg.Lease.Microseconds()
	if err := algorithm.CheckDuration("concurrency: Lease", lease); err != nil {
		return nil, err
	}
	return &Slots{limit: cfg.Limit, lease: lease}, nil
}

// Limit returns the most units held at once.
func (s *Slots) Limit() int64 { return s.limit }

// Lease returns how long a hold counts when it is not released.
func (s *Slots) Lease() time.Duration { return time.Duration(s.lease) * time.Microsecond }

// Tag returns {Kind, lease}: entries are instants and units, which mean
// the same whatever the limit.
func (s *Slots) Tag() algorithm.Tag { return algorithm.Tag{Kind: Kind, P0: s.lease} }

// Spec returns {"concurrency", [limit, lease µs]}.
func (s *Slots) Spec() algorithm.Spec {
	return algorithm.Spec{Name: "concurrency", Params: []float64{float64(s.limit), float64(s.lease)}}
}

// String describes the limit, for logs.
func (s *Slots) String() string {
	return fmt.Sprintf("concurrency(limit=%d, lease=%v)", s.limit, s.Lease())
}

// Describe returns the limit in words, for errors: "at most 5 held at once,
// each for up to 30s".
func (s *Slots) Describe() string {
	return fmt.Sprintf("at most %d held at once, each for up to %v", s.limit, s.Lease())
}

// A state's entries, Log.Entries[Log.Head:], are the instants at which
// units still held were admitted, rising, each with the units admitted
// there and not given back (Cost, at least 1); N2 is the sum of their
// units. N0 and N1 are 0. An entry at At counts from the moment it is
// logged until At + lease: at now, the entries after now − lease count,
// those after now (booked ahead, or logged by a clock ahead of this
// one) included. A charge at now first forgets the entries that no longer
// count there (advancing Head); a release takes units off its own entry,
// which goes when it holds none.
//
// The Redis script keeps the same holds as a sorted set, one member per
// unit (see concurrency.lua): the decisions are the same.

// Init returns an empty state, keeping the buffer old.Log holds: it empties
// that Log in place and returns a state pointing to it.
func (s *Slots) Init(old algorithm.State, _ int64) algorithm.State {
	if old.Log != nil {
		old.Log.Entries, old.Log.Head = old.Log.Entries[:0], 0
	}
	return algorithm.State{Log: old.Log}
}

// entries returns the entries kept.
func entries(st *algorithm.State) []algorithm.Entry {
	if st.Log == nil || st.N2 <= 0 {
		return nil
	}
	return st.Log.Entries[st.Log.Head:]
}

// live returns the index of the first entry of es that counts at now
// (after cut = now − lease) and the units of the entries before it.
func live(es []algorithm.Entry, cut int64) (int, int64) {
	var dead int64
	i := 0
	for ; i < len(es) && es[i].At <= cut; i++ {
		dead += es[i].Cost
	}
	return i, dead
}

// Peek reports the units held at now. A cost that does not fit waits
// until enough of the oldest holds' leases end, if nobody releases before;
// the key is fresh once the newest hold's lease has ended.
func (s *Slots) Peek(st algorithm.State, now, cost int64) algorithm.Result {
	es := entries(&st)
	i, dead := live(es, now-s.lease)
	held := st.N2 - dead
	r := algorithm.Result{Remaining: max(s.limit-held, 0)} // held may exceed a limit lowered since
	if held <= 0 {
		return r
	}
	r.ResetAfter = es[len(es)-1].At + s.lease - now
	if excess := held + cost - s.limit; excess > 0 {
		r.RetryAfter = max(r.ResetAfter, 1) // a cost above the limit, which stores never ask for
		var out int64
		for _, e := range es[i:] {
			if out += e.Cost; out >= excess {
				r.RetryAfter = e.At + s.lease - now
				break
			}
		}
	}
	return r
}

// Take admits cost when the units held at now leave room for it, and holds
// them from now. An admission changes st.Log in place (or, when st has
// none, makes one) and returns a state pointing to it.
func (s *Slots) Take(st algorithm.State, now, cost int64) (algorithm.State, algorithm.Result) {
	if p := s.Peek(st, now, cost); !p.Allowed() {
		return st, p
	}
	s.charge(&st, now, now, cost)
	r := s.Peek(st, now, cost)
	r.RetryAfter = 0
	return st, r
}

// charge forgets the entries that no longer count at now and logs cost
// at act.
func (s *Slots) charge(st *algorithm.State, now, act, cost int64) {
	if st.Log == nil {
		st.Log = new(algorithm.Log)
	}
	g := st.Log
	if st.N2 <= 0 {
		g.Entries, g.Head, st.N2 = g.Entries[:0], 0, 0
	}
	es := g.Entries[g.Head:]
	if i, dead := live(es, now-s.lease); i > 0 {
		g.Head += i
		st.N2 -= dead
		es = es[i:]
	}
	st.N2 += cost
	j := sort.Search(len(es), func(j int) bool { return es[j].At >= act })
	if j < len(es) && es[j].At == act {
		es[j].Cost += cost
		return
	}
	if j == len(es) {
		grow(g)
		g.Entries[len(g.Entries)-1] = algorithm.Entry{At: act, Cost: cost}
		return
	}
	// Before a later entry (a booking, or a clock that stepped back):
	// inserted in place.
	g.Entries = append(g.Entries, algorithm.Entry{})
	k := g.Head + j
	copy(g.Entries[k+1:], g.Entries[k:])
	g.Entries[k] = algorithm.Entry{At: act, Cost: cost}
}

// grow makes room for one more entry at the end of the buffer, compacting
// the entries kept to the front when at least half of it is forgotten.
func grow(g *algorithm.Log) {
	if len(g.Entries) == cap(g.Entries) && g.Head > 0 && g.Head >= len(g.Entries)/2 {
		n := copy(g.Entries, g.Entries[g.Head:])
		g.Entries, g.Head = g.Entries[:n], 0
	}
	g.Entries = append(g.Entries, algorithm.Entry{})
}
