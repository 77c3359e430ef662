// Package gcra provides the generic cell rate algorithm (GCRA), the token
// bucket kept as a single number.
//
// A key's state is its theoretical arrival time (TAT): the instant at
// which it would be at rest (back to a full burst) if nothing else were
// admitted. Admitting a cost of n moves TAT n emission intervals later
// (from now, if TAT had passed), and is allowed when the new TAT is at
// most Burst intervals ahead of now. A denied request changes nothing.
//
// This is, decision for decision, the continuous token bucket of
// tokenbucket.New with Capacity Burst and Rate one token per Every: the
// bucket holds Burst − (TAT − now)/Every tokens. GCRA keeps one number
// where the bucket keeps two, and every number is a whole microsecond, so
// its arithmetic is exact integer arithmetic (in Go and in the Redis
// script alike). The differences from tokenbucket.New are these:
//
//   - the rate is one unit per whole number of microseconds (Every), so
//     rates above 10^6 per second, or whose interval is not a whole
//     number of microseconds (3 per second is one per 333,333 µs, 3.000003
//     per second), are not available;
//   - a clock that steps back finds the key less free (TAT is an absolute
//     instant, so the time to it grows), where the bucket holds still.
//
// [Per] and its shorthands build a meter from a quota and a burst, as
// people say limits: PerMinute(100, Burst(20)) admits 100 per minute in
// bursts of up to 20, one unit back every 600ms.
//
// Pick GCRA for the smallest state per key (in Redis, one integer) and
// the cheapest script, with the token bucket's behaviour: bursts up to
// Burst, one unit per Every in the long run.
package gcra

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Config configures a GCRA.
type Config struct {
	// Burst is the most cost admitted at once by a key at rest, the
	// equivalent bucket's capacity, and the largest cost of one request.
	// 1 ≤ Burst ≤ algorithm.MaxLimit.
	Burst int64
	// Every is the emission interval: one unit of cost is replenished
	// every Every, so the long-run rate is 1/Every. At least 1µs,
	// truncated to whole microseconds; Burst×Every (the time a key takes
	// to come to rest) must be at most algorithm.MaxDuration.
	Every time.Duration
}

// Meter is a GCRA. Create it with [New] or [Per].
type Meter struct {
	burst int64
	every int64           // µs
	tau   int64           // µs: burst × every, the most TAT may be ahead of now
	quota algorithm.Quota // what Quota reports; no decision reads it
}

var (
	_ algorithm.Narrow  = (*Meter)(nil)
	_ algorithm.Quoter  = (*Meter)(nil)
	_ algorithm.Settler = (*Meter)(nil)
)

// New returns a GCRA admitting bursts of cfg.Burst and one unit per
// cfg.Every, or an error wrapping algorithm.ErrInvalidConfig.
func New(cfg Config) (*Meter, error) {
	if err := algorithm.CheckLimit("gcra: Burst", cfg.Burst); err != nil {
		return nil, err
	}
	every := cfg.Every.Microseconds()
	if err := algorithm.CheckDuration("gcra: Every", every); err != nil {
		return nil, err
	}
	if hi, tau := bits.Mul64(uint64(cfg.Burst), uint64(every)); hi != 0 || tau > uint64(algorithm.MaxDuration) {
		return nil, fmt.Errorf("%w: gcra: a burst of %d every %v takes longer than %dµs to replenish",
			algorithm.ErrInvalidConfig, cfg.Burst, cfg.Every, algorithm.MaxDuration)
	}
	m := &Meter{burst: cfg.Burst, every: every, tau: cfg.Burst * every}
	m.quota = algorithm.Quota{Limit: cfg.Burst, Window: m.Window()}
	return m, nil
}

// Limit returns the burst.
func (m *Meter) Limit() int64 { return m.burst }

// Window returns how long a key takes to come to rest after using its
// whole burst: Burst×Every.
func (m *Meter) Window() time.Duration { return time.Duration(m.tau) * time.Microsecond }

// Quota returns the quota the meter was built with: n per period for
// [Per] and its shorthands. A meter built by [New] reports Burst per
// [Meter.Window], Burst×Every: the quota at its long-run rate whose Limit
// is the largest burst, as tokenbucket's Config-built buckets report and
// as ratelimit.Limiter.Quota reports for an algorithm that does not say, so
// that adapters advertise what they did before meters had a Quota.
// Config{Burst: 20, Every: 3 * time.Second} reports 20 per minute. The
// quota changes no decision, nor Spec.
func (m *Meter) Quota() algorithm.Quota { return m.quota }

// Tag returns {Kind, burst, emission interval}.
func (m *Meter) Tag() algorithm.Tag {
	return algorithm.Tag{Kind: Kind, P0: m.burst, P1: m.every}
}

// Spec returns {"gcra", [burst, every µs]}.
func (m *Meter) Spec() algorithm.Spec {
	return algorithm.Spec{Name: "gcra", Params: []float64{float64(m.burst), float64(m.every)}}
}

// String describes the meter, for logs.
func (m *Meter) String() string {
	return fmt.Sprintf("gcra(burst=%d, every=%v)", m.burst, time.Duration(m.every)*time.Microsecond)
}

// A meter's state is N0, the theoretical arrival time (Unix µs). A key is
// at rest, the same as a new one, once it has passed; a new key's is
// math.MinInt64, which has passed at every instant.

// NarrowState declares that the meter's state fits in N0 and N1 (see
// algorithm.Narrow): it is N0 alone.
func (m *Meter) NarrowState() {}

// Init returns a key at rest.
func (m *Meter) Init(_ algorithm.State, _ int64) algorithm.State {
	return algorithm.State{N0: math.MinInt64}
}

// Take admits cost when TAT, moved cost intervals later, is at most the
// burst's intervals ahead of now; the new TAT is then the key's debt.
func (m *Meter) Take(s algorithm.State, now, cost int64) (algorithm.State, algorithm.Result) {
	tat := max(s.N0, now) + cost*m.every
	if tat-now > m.tau {
		return algorithm.State{N0: s.N0}, m.Peek(s, now, cost)
	}
	return algorithm.State{N0: tat}, m.report(tat-now, 0)
}

// Peek reports the key at now for a request of cost. Its debt, the time
// until TAT, is what it would take to come to rest; it has room for
// ⌊(tau − debt)/Every⌋ more units, and a cost that does not fit waits
// until the debt has shrunk enough.
func (m *Meter) Peek(s algorithm.State, now, cost int64) algorithm.Result {
	debt := int64(0)
	if s.N0 > now { // not s.N0-now: a fresh key's TAT is math.MinInt64
		debt = s.N0 - now
	}
	return m.report(debt, cost)
}

// report is Peek of a key whose debt is debt, for a request of cost (0 to
// describe the key alone).
func (m *Meter) report(debt, cost int64) algorithm.Result {
	r := algorithm.Result{ResetAfter: debt}
	if debt < m.tau {
		r.Remaining = (m.tau - debt) / m.every
	}
	r.RetryAfter = max(debt+cost*m.every-m.tau, 0)
	return r
}

// Book charges cost at now for an admission due at act (see
// algorithm.Booker): the TAT a Take at act would leave. TAT is an
// instant, not a count dated by the last decision, so the booked state is
// that Take's itself, and lends nothing when read before act: the units
// it admits then are those that fit before the booking's.
func (m *Meter) Book(s algorithm.State, now, act, cost int64) (algorithm.State, algorithm.Result) {
	next := algorithm.State{N0: max(s.N0, act) + cost*m.every}
	r := m.Peek(next, now, 1)
	r.RetryAfter = act - now
	return next, r
}

// Refund gives back up to n units: TAT moves n intervals earlier, but not
// before now. What was charged counts until TAT, so at now what is left
// of it is TAT − now: a TAT moved before now would give a clock that
// steps back more than that. A key at rest has nothing to give back.
//
// A key whose TAT is more than tau ahead gives nothing back: no Take
// leaves it so, only bookings not yet due, which only their Reservation
// gives back (Cancel).
func (m *Meter) Refund(s algorithm.State, now, n int64) (algorithm.State, algorithm.Result) {
	if s.N0 > now && s.N0-now > m.tau { // not s.N0-now > tau alone: MinInt64
		n = 0
	}
	next, _, r := m.give(s, now, n)
	return next, r
}

// Undo gives back up to n of an admission of cost due at act (see
// algorithm.Undoer): for the state the admission left (exact), n
// intervals off TAT; otherwise before act up to its Unused, and at or
// after it n less the intervals that have begun since act,
// n − ⌈(now − act)/Every⌉: TAT had the admission cost n less would be
// n·Every earlier until it fell behind the clock, and from then on less
// so by at most the time since act (x/time/rate's CancelAt bound). Exact
// at act, less as time passes, never more; TAT never before now. A TAT
// more than tau ahead (bookings not yet due) gives nothing back but
// exactly, as tokenbucket.Bucket.Undo.
func (m *Meter) Undo(s algorithm.State, now, act, cost, n int64, exact bool) (algorithm.State, int64, algorithm.Result) {
	n = min(n, cost)
	var give int64
	switch {
	case exact:
		give = n
	case act > now:
		give = min(n, m.Unused(s, now, act, cost))
	case s.N0 > now && s.N0-now > m.tau: // bookings ahead; not s.N0-m.tau: MinInt64
	default:
		if begun := (now - act + m.every - 1) / m.every; begun < n { // not n·every: a settled cost may be past the burst
			give = n - begun
		}
	}
	return m.give(s, now, give)
}

// give moves TAT up to n intervals earlier, but not before now, and
// returns how many intervals it moved it: n, or those that were ahead of
// now when that is less, a part of one counting whole.
func (m *Meter) give(s algorithm.State, now, n int64) (algorithm.State, int64, algorithm.Result) {
	if s.N0 <= now || n < 1 { // not s.N0-now: a fresh key's TAT is math.MinInt64
		return algorithm.State{N0: s.N0}, 0, m.Peek(s, now, 1)
	}
	debt := s.N0 - now
	tat, given := now, (debt+m.every-1)/m.every
	if n <= (debt-1)/m.every { // n·every < debt, with no overflow
		tat, given = s.N0-n*m.every, n
	}
	next := algorithm.State{N0: tat}
	return next, given, m.Peek(next, now, 1)
}

// Owe charges n more units at now (see algorithm.Settler): TAT moves n
// intervals later, from now when it is behind, past the burst if need be.
// The debt is cut where it would keep the key waiting longer than
// algorithm.MaxDuration (a TAT already later stays as it is).
func (m *Meter) Owe(s algorithm.State, now, act, n int64) (algorithm.State, algorithm.Result) {
	from := max(s.N0, now)
	limit := max(from, now+m.tau+algorithm.MaxDuration)
	tat := limit
	if n <= (limit-from)/m.every {
		tat = from + n*m.every
	}
	next := algorithm.State{N0: tat}
	return next, m.Peek(next, now, 1)
}

// Unused returns how much of a booking of cost due at act the meter may
// give back at now, by x/time/rate's rule: the cost, less the intervals
// by which later bookings' due instants pass act. The last booking is due
// at TAT − tau, where the key's burst is used up, so that is
// (cost·every − (TAT − tau − act))/every units, rounded to the nearest
// (a tie down), as tokenbucket.Bucket.Unused rounds its tokens.
func (m *Meter) Unused(s algorithm.State, now, act, cost int64) int64 {
	if act <= now {
		return 0
	}
	if s.N0 <= act+m.tau { // nothing due after act; not s.N0-m.tau: MinInt64
		return cost
	}
	v := cost*m.every - (s.N0 - m.tau - act)
	if v <= 0 {
		return 0
	}
	return (2*v + m.every - 1) / (2 * m.every)
}
