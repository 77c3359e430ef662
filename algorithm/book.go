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

// Undoer is a Booker that gives back one admission of its own, through
// the booking that made it (a Reservation's Refund): all six algorithms
// implement it; stores find it by type assertion.
type Undoer interface {
	Booker
	// Undo gives back, at now, an admission of cost due at act that s
	// has charged. Before act (act > now) it gives back Unused(s, now,
	// act, cost), as a cancel does. At or after act it gives back at most
	// what the key would hold at now had the admission never been made,
	// whatever was charged since: the sliding log the admission's own
	// entry while it is the newest charge, the windows the cost into the
	// window it was counted in while that window counts, a token bucket
	// and GCRA the cost less what can have refilled since act
	// (x/time/rate's CancelAt bound); less where it cannot be known,
	// never more. The result is Peek(next, now, 1). A state with nothing
	// to give back is returned as it is. (A store undoes exactly, by
	// restoring the state before the booking, while the key's state is
	// still the one it left: see ExactUndo.)
	//
	// As with Take, an algorithm that keeps a Log changes it in place.
	Undo(s State, now, act, cost int64) (State, Result)
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

// CheckUndo reports how u.Undo(s, now, act, cost) departs from what
// every undo keeps (see [Undoer]), or nil when it keeps it, and returns
// what Undo returned: the result is Peek of the new state, Remaining grows
// by at most cost and stays within the limit, and at the instants of
// later (each ≥ now) the new state admits no more than a fresh one. That
// it gives back no more than undoing the admission leaves is each
// algorithm's own property, which its tests check against a model.
func CheckUndo(u Undoer, s State, now, act, cost int64, later []int64) (State, Result, error) {
	before := u.Peek(s, now, 1)
	next, r := u.Undo(s, now, act, cost)
	fail := func(format string, args ...any) (State, Result, error) {
		return next, r, fmt.Errorf("undo at %d of %d due at %d: "+format, append([]any{now, cost, act}, args...)...)
	}
	if want := u.Peek(next, now, 1); r != want {
		return fail("got %+v, Peek of the new state says %+v", r, want)
	}
	if r.Remaining < before.Remaining || r.Remaining-before.Remaining > cost || r.Remaining > u.Limit() {
		return fail("Remaining went from %d to %d: want at least as much, at most %d more, at most the limit %d", before.Remaining, r.Remaining, cost, u.Limit())
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
