package algorithm

import (
	"fmt"
	"math"
)

// Booker is an algorithm that books admissions ahead of the instant they
// are due, gives back what it charged, and gives back bookings that will
// not be used: the transitions behind a Limiter's Reserve, Wait, Cancel
// and Refund. All six algorithms implement it; stores find it by type
// assertion.
//
// A booking is made at now for an instant act ≥ now at which the cost fits
// ([Earliest] finds the first one): the state is charged at now, so that
// the booking holds its place. Every algorithm books by its own rule: a
// token bucket and GCRA go into debt, a fixed window counts the cost in
// the window of act, the sliding-window counter and the sliding log count
// it from act. [CheckBook] states the contract.
type Booker interface {
	Algorithm
	// Book charges cost (1 ≤ cost ≤ Limit) to s at now for an admission
	// due at act, where now ≤ act and Peek(s, act, cost) admits cost. The
	// new state is read at now like any other. From act on, it admits no
	// more than the state Take(s, act, cost) leaves (every algorithm but
	// the sliding-window counter: exactly what it admits, to the µs; the
	// continuous token bucket's float refill may round to the µs either
	// side, and the check allows that µs); before act, no
	// cost it admits keeps the booked one from fitting at act. The result
	// is Peek(next, now, 1)'s Remaining and ResetAfter (which covers the
	// booking: a key in debt is not fresh before its last booking is
	// due), with RetryAfter act − now. Booking at act = now is Take of an
	// admitted cost: the same state and result.
	//
	// As with Take, an algorithm that keeps a Log changes it in place.
	Book(s State, now, act, cost int64) (State, Result)
	// Refund gives back up to n (n ≥ 1) of what s has charged, newest
	// first, as far as what was charged still counts at now: the new
	// state's Remaining is at most n more than s's, and it never admits
	// more than a fresh state would. It never gives back a booking not
	// yet due: a state holding one gives nothing back (only the
	// booking's own Undo may). The result is Peek(next, now, 1). A state
	// with nothing to give back is returned as it is.
	Refund(s State, now, n int64) (State, Result)
	// Unused returns how much of a booking of cost due at act may be
	// given back at now, between 0 and cost: none once act ≤ now (the
	// booking is due, and used), all of it when nothing was charged after
	// it, and, when something was, as far as that does not depend on it
	// (x/time/rate's rule): a bucket and GCRA give back the part of the
	// booking later bookings did not consume; the windows and the log give
	// back a booking only while it is the newest charge.
	Unused(s State, now, act, cost int64) int64
}

// Undoer is a Booker that gives back one admission of its own, in whole
// or in part, through the booking that made it (a Reservation's Refund,
// Cancel and Settle): all six algorithms implement it; stores find it by
// type assertion.
type Undoer interface {
	Booker
	// Undo gives back, at now, up to n (1 ≤ n ≤ cost) of an admission of
	// cost due at act that s has charged, and returns the new state, what
	// it gave back (between 0 and n) and Peek(next, now, 1).
	//
	// exact says that s is the state the admission left (or a Settle of
	// it, see Settler), read under the same configuration: nothing was
	// charged or given back since, only time passed. The store knows it
	// (the same generation, the same header and numbers); the algorithm
	// then gives back the n newest units of what s charged, as if the
	// admission had cost n less: its n newest units, wherever they were
	// counted (a booking ahead, a debt). An algorithm that keeps a Log
	// finds its admission in the Log, and may ignore exact.
	//
	// Otherwise, before act (act > now) it gives back no more than
	// Unused(s, now, act, cost) says, as a cancel does. At or after act
	// it gives back at most what the key would hold at now had the
	// admission cost n less, whatever was charged since: the sliding log
	// from the admission's own entry while it is in the window, the
	// windows from the window it was counted in while that window
	// counts, a token bucket and GCRA n less what can have refilled since
	// act (x/time/rate's CancelAt bound); less where it cannot be known,
	// never more.
	//
	// What it gives back is in units of cost: those it took off what s
	// still counted at now (a window's count, a bucket's missing tokens,
	// GCRA's intervals ahead of now, the log's entry). It is 0 when the
	// admission no longer counts (its window has ended, the bucket has
	// refilled), when later charges built on it, or when n < 1. A state
	// with nothing to give back is returned as it is.
	//
	// As with Take, an algorithm that keeps a Log changes it in place.
	Undo(s State, now, act, cost, n int64, exact bool) (State, int64, Result)
}

// Settler is an Undoer whose admissions can be charged more afterwards:
// a Reservation's Settle to a cost above the one booked. Stores find it
// by type assertion; an algorithm that is not one cannot be settled up
// (its Undo still settles down).
type Settler interface {
	Undoer
	// Owe charges n more (n ≥ 1) to an admission due at act that s has
	// charged, at now, whether or not the limit has room: what goes past
	// the limit is a debt that later requests wait out, Peek's RetryAfter
	// exact. From now on, the new state admits no more, at any instant,
	// than s would had the admission cost n more when it was charged
	// (settling up never leaves the key better off than charging the
	// actual cost from the start): a bucket and GCRA charge n at now, the
	// windows into the window of max(now, act), the log an entry at
	// max(now, act). A debt is cut where waiting it out would take
	// longer than MaxDuration (8.9 years). The result is Peek(next, now,
	// 1).
	//
	// As with Take, an algorithm that keeps a Log changes it in place.
	Owe(s State, now, act, n int64) (State, Result)
}

// Earliest returns the first instant at or after from at which Peek of s
// admits cost: from + Peek(s, from, cost).RetryAfter.
func Earliest(alg Algorithm, s State, from, cost int64) int64 {
	return from + alg.Peek(s, from, cost).RetryAfter
}

// MaxBookingRounds bounds the search of [EarliestAll] for the instant at
// which every limit of a Policy admits a cost: each round moves the
// instant to the latest of the limits' earliest ones.
const MaxBookingRounds = 8

// EarliestAll returns the first instant at or after from at which every
// alg admits cost on its state, and whether it found it within
// [MaxBookingRounds] rounds and at most until (a later instant is not
// looked for). states[i] is algs[i]'s.
func EarliestAll(algs []Algorithm, states []State, from, until, cost int64) (int64, bool) {
	act := from
	for range MaxBookingRounds {
		next := act
		for i, alg := range algs {
			next = max(next, Earliest(alg, states[i], act, cost))
		}
		if next > until {
			return next, false
		}
		if next == act {
			return act, true
		}
		act = next
	}
	return act, false
}

// BookingDeadline returns the latest instant a booking at now may be
// due at with a maximum delay of maxDelay µs (MaxDuration past now for a
// negative or larger one: no limit), without overflow.
func BookingDeadline(now, maxDelay int64) int64 {
	if maxDelay < 0 || maxDelay > MaxDuration {
		maxDelay = MaxDuration
	}
	if now > math.MaxInt64-maxDelay {
		return math.MaxInt64
	}
	return now + maxDelay
}

// CloneState returns s with a Log of its own, so that a check may run
// transitions on it and on s.
func CloneState(s State) State {
	if s.Log != nil {
		l := &Log{Entries: append([]Entry(nil), s.Log.Entries[s.Log.Head:]...)}
		s.Log = l
	}
	return s
}

// CheckBook reports how b.Book(s, now, act, cost) departs from its
// contract (see [Booker]), or nil when it keeps it, and returns what Book
// returned. act must be an instant at which Peek(s, act, cost) admits
// cost. later lists instants (each ≥ now) at which the check compares the
// booked state with the state a Take at act leaves, and tries admissions
// before act against the booking.
func CheckBook(b Booker, s State, now, act, cost int64, later []int64) (State, Result, error) {
	fail := func(next State, r Result, format string, args ...any) (State, Result, error) {
		return next, r, fmt.Errorf("book at %d for %d of %d: "+format, append([]any{now, act, cost}, args...)...)
	}
	if act < now {
		return s, Result{}, fmt.Errorf("book at %d for %d: act before now", now, act)
	}
	if p := b.Peek(s, act, cost); !p.Allowed() {
		return s, Result{}, fmt.Errorf("book at %d for %d of %d: Peek at act denies it (%+v): not a bookable instant", now, act, cost, p)
	}
	// The reference: the cost taken at act.
	taken, _ := b.Take(CloneState(s), act, cost)
	var took State
	var tookR Result
	if act == now {
		took, tookR = b.Take(CloneState(s), now, cost)
	}
	orig := CloneState(s)
	next, r := b.Book(s, now, act, cost)
	peek := b.Peek(next, now, 1)
	if r.RetryAfter != act-now || r.Remaining != peek.Remaining || r.ResetAfter != peek.ResetAfter {
		return fail(next, r, "got %+v, want RetryAfter %d and Peek of the new state's Remaining and ResetAfter (%+v)", r, act-now, peek)
	}
	if r.Remaining < 0 || r.Remaining > b.Limit() {
		return fail(next, r, "Remaining %d out of [0, %d]", r.Remaining, b.Limit())
	}
	if r.ResetAfter < act-now {
		return fail(next, r, "ResetAfter %d ends before the booking is due (%d)", r.ResetAfter, act-now)
	}
	if act == now {
		if r != tookR {
			return fail(next, r, "booking due now gives %+v, Take %+v", r, tookR)
		}
		for _, c := range []int64{1, b.Limit()} {
			if got, want := b.Peek(next, now, c), b.Peek(took, now, c); got != want {
				return fail(next, r, "booking due now leaves a state whose Peek of %d is %+v, Take's %+v", c, got, want)
			}
		}
	}
	for _, t := range later {
		if t < now {
			continue
		}
		for _, c := range []int64{1, max(1, b.Limit()/2), b.Limit()} {
			got := b.Peek(next, t, c)
			if t >= act {
				// Against Take's state a µs later: the continuous token
				// bucket's booked state refills from now, Take's from act,
				// and their float roundings (a few ulps) may cross a whole
				// count a µs apart either way. A µs of refill is far more
				// than those ulps; no algorithm departs by a whole µs.
				want := b.Peek(taken, t+1, c)
				if got.Allowed() && !want.Allowed() || got.Remaining > want.Remaining {
					return fail(next, r, "at %d the booked state admits more than a Take at act leaves a µs later: Peek of %d %+v, Take's %+v", t, c, got, want)
				}
				continue
			}
			if !got.Allowed() {
				continue
			}
			// A cost admitted before act, on the original state, must
			// leave the booked cost fitting at act.
			mid, _ := b.Take(CloneState(orig), t, c)
			if p := b.Peek(mid, act, cost); !p.Allowed() {
				return fail(next, r, "the booked state admits %d at %d, after which the booking no longer fits at act (%+v)", c, t, p)
			}
		}
	}
	return next, r, nil
}

// CheckRefund reports how b.Refund(s, now, n) departs from its contract
// (see [Booker]), or nil when it keeps it, and returns what Refund
// returned. later lists instants (each ≥ now) at which the refunded state
// must admit no more than a fresh one.
func CheckRefund(b Booker, s State, now, n int64, later []int64) (State, Result, error) {
	before := b.Peek(s, now, 1)
	next, r := b.Refund(s, now, n)
	fail := func(format string, args ...any) (State, Result, error) {
		return next, r, fmt.Errorf("refund at %d of %d: "+format, append([]any{now, n}, args...)...)
	}
	if want := b.Peek(next, now, 1); r != want {
		return fail("got %+v, Peek of the new state says %+v", r, want)
	}
	if r.Remaining < before.Remaining || r.Remaining-before.Remaining > n || r.Remaining > b.Limit() { // not before.Remaining+n: n may be as large as anyone asks
		return fail("Remaining went from %d to %d: want at least as much, at most %d more, at most the limit %d", before.Remaining, r.Remaining, n, b.Limit())
	}
	fresh := b.Init(State{}, now)
	for _, t := range later {
		if t < now {
			continue
		}
		for _, c := range []int64{1, b.Limit()} {
			if got, f := b.Peek(next, t, c), b.Peek(fresh, t, c); got.Allowed() && !f.Allowed() || got.Remaining > f.Remaining {
				return fail("at %d the refunded state admits more than a fresh one: Peek of %d %+v, fresh %+v", t, c, got, f)
			}
		}
	}
	return next, r, nil
}

// CheckUndo reports how u.Undo(s, now, act, cost, n, exact) departs
// from what every undo keeps (see [Undoer]), or nil when it keeps it, and
// returns what Undo returned: the result is Peek of the new state, what it
// gave back is within [0, n], Remaining grows by at most n and stays
// within the limit, and at the instants of later (each ≥ now) the new
// state admits no more than a fresh one. That it gives back no more than
// undoing n of the admission leaves is each algorithm's own property,
// which its tests check against a model.
func CheckUndo(u Undoer, s State, now, act, cost, n int64, exact bool, later []int64) (State, int64, Result, error) {
	before := u.Peek(s, now, 1)
	next, given, r := u.Undo(s, now, act, cost, n, exact)
	fail := func(format string, args ...any) (State, int64, Result, error) {
		return next, given, r, fmt.Errorf("undo at %d of %d of %d due at %d (exact %v): "+format, append([]any{now, n, cost, act, exact}, args...)...)
	}
	if want := u.Peek(next, now, 1); r != want {
		return fail("got %+v, Peek of the new state says %+v", r, want)
	}
	if given < 0 || given > max(n, 0) {
		return fail("gave back %d, want within [0, %d]", given, max(n, 0))
	}
	if r.Remaining < before.Remaining || r.Remaining-before.Remaining > max(n, 0) || r.Remaining > u.Limit() {
		return fail("Remaining went from %d to %d: want at least as much, at most %d more, at most the limit %d", before.Remaining, r.Remaining, n, u.Limit())
	}
	if r.Remaining > before.Remaining && given == 0 {
		return fail("Remaining went from %d to %d, but it says it gave back nothing", before.Remaining, r.Remaining)
	}
	fresh := u.Init(State{}, now)
	for _, t := range later {
		if t < now {
			continue
		}
		for _, c := range []int64{1, u.Limit()} {
			if got, f := u.Peek(next, t, c), u.Peek(fresh, t, c); got.Allowed() && !f.Allowed() || got.Remaining > f.Remaining {
				return fail("at %d the state admits more than a fresh one: Peek of %d %+v, fresh %+v", t, c, got, f)
			}
		}
	}
	return next, given, r, nil
}

// CheckOwe reports how s.Owe(st, now, act, n) departs from its contract
// (see [Settler]), or nil when it keeps it, and returns what Owe
// returned: the result is Peek of the new state, Remaining does not grow,
// and at the instants of later (each ≥ now) the new state admits no more
// than st does.
func CheckOwe(s Settler, st State, now, act, n int64, later []int64) (State, Result, error) {
	orig := CloneState(st)
	before := s.Peek(orig, now, 1)
	next, r := s.Owe(st, now, act, n)
	fail := func(format string, args ...any) (State, Result, error) {
		return next, r, fmt.Errorf("owe at %d of %d for %d: "+format, append([]any{now, n, act}, args...)...)
	}
	if want := s.Peek(next, now, 1); r != want {
		return fail("got %+v, Peek of the new state says %+v", r, want)
	}
	if r.Remaining > before.Remaining {
		return fail("Remaining went from %d to %d", before.Remaining, r.Remaining)
	}
	for _, t := range later {
		if t < now {
			continue
		}
		for _, c := range []int64{1, max(1, s.Limit()/2), s.Limit()} {
			got, was := s.Peek(next, t, c), s.Peek(orig, t, c)
			if got.Allowed() && !was.Allowed() || got.Remaining > was.Remaining {
				return fail("at %d the state owing admits more than before: Peek of %d %+v, before %+v", t, c, got, was)
			}
		}
	}
	return next, r, nil
}

// CheckUnused reports how b.Unused(s, now, act, cost) departs from its
// contract: a number in [0, cost], 0 once act ≤ now.
func CheckUnused(b Booker, s State, now, act, cost int64) (int64, error) {
	u := b.Unused(s, now, act, cost)
	if u < 0 || u > cost || (act <= now && u != 0) {
		return u, fmt.Errorf("unused at %d of a booking of %d due at %d: got %d, want within [0, %d] (0 once due)", now, cost, act, u, cost)
	}
	return u, nil
}

// ExactUndo reports whether a store gives a booking of alg back by
// restoring the state before it, while the key's state is still the one
// the booking left (nothing was charged since): so for every Tagged
// algorithm whose registered Kind keeps no Log. A Log changes in place
// (the sliding log's), and an algorithm without a Tag may keep one, so
// theirs are given back by Unused alone.
func ExactUndo(alg Algorithm) bool {
	tag, ok := TagOf(alg)
	if !ok {
		return false
	}
	k := kindOf(tag.Kind)
	return k == nil || !k.Log
}
