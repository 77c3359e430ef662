package concurrency

import (
	"sort"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Book holds cost from now for an admission due at act (now ≤ act, and
// Peek(st, act, cost) admits cost): the units are logged at act, count
// from now on and until act + lease. The result is Peek of the new state
// at now for a cost of 1, with RetryAfter act − now. Booking at act = now
// is Take.
//
// A Limiter does not book holds ahead (it waits for a release instead):
// Book is here for the contract every algorithm keeps, and for a Policy
// whose other limits ask for a later instant.
//
// As Take, Book changes st.Log in place and returns a state pointing to
// it.
func (s *Slots) Book(st algorithm.State, now, act, cost int64) (algorithm.State, algorithm.Result) {
	s.charge(&st, now, act, cost)
	r := s.Peek(st, now, 1)
	r.RetryAfter = act - now
	return st, r
}

// Refund releases up to n of the units held at now, newest first: a
// release by key, for callers that kept no reservation. A state whose
// newest entry is after now gives nothing back: that entry is a booking
// not yet due, which only its own reservation gives back. The result is
// Peek(next, now, 1).
//
// As Take, Refund changes st.Log in place and returns a state pointing to
// it.
func (s *Slots) Refund(st algorithm.State, now, n int64) (algorithm.State, algorithm.Result) {
	es := entries(&st)
	if len(es) == 0 || es[len(es)-1].At > now || n < 1 {
		return st, s.Peek(st, now, 1)
	}
	i, _ := live(es, now-s.lease)
	for k := len(es) - 1; k >= i && n > 0; k-- {
		give := min(n, es[k].Cost)
		n -= give
		s.takeOff(&st, k, give)
	}
	return st, s.Peek(st, now, 1)
}

// Unused returns how much of a booking of cost due at act may be given
// back at now: none once it is due (act ≤ now), otherwise the units its
// entry holds, up to cost. Holds admitted since do not depend on it, since
// a release only lowers what is held.
func (s *Slots) Unused(st algorithm.State, now, act, cost int64) int64 {
	if act <= now {
		return 0
	}
	es := entries(&st)
	if k, ok := find(es, act); ok {
		return min(cost, es[k].Cost)
	}
	return 0
}

// Undo releases up to n (1 ≤ n ≤ cost) of a hold of cost admitted at
// act: the units of its own entry, while its lease has not ended (act >
// now − lease), as if it had cost n less; nothing once it has, so that a
// release after the lease's end never frees what another hold took since.
// It returns the new state, the units it released (0 when the lease has
// ended or the entry is gone) and Peek(next, now, 1). The hold is found in
// the Log by its instant, so exact changes nothing.
//
// The entry of act is shared by the holds admitted at the same instant,
// which end together: a hold given back twice would give back another's
// units, which is why a Reservation gives its hold back once.
//
// As Take, Undo changes st.Log in place and returns a state pointing to
// it.
func (s *Slots) Undo(st algorithm.State, now, act, cost, n int64, _ bool) (algorithm.State, int64, algorithm.Result) {
	es := entries(&st)
	var given int64
	if act > now-s.lease && n > 0 {
		if k, ok := find(es, act); ok {
			given = min(n, cost, es[k].Cost)
			s.takeOff(&st, k, given)
		}
	}
	return st, given, s.Peek(st, now, 1)
}

// find returns the index of the entry of es at act, and whether there is
// one.
func find(es []algorithm.Entry, act int64) (int, bool) {
	k := sort.Search(len(es), func(k int) bool { return es[k].At >= act })
	return k, k < len(es) && es[k].At == act
}

// takeOff takes n units (at most what it holds) off the kept entry k, and
// the entry itself when it holds none after; a state left holding nothing
// is emptied.
func (s *Slots) takeOff(st *algorithm.State, k int, n int64) {
	g := st.Log
	i := g.Head + k
	g.Entries[i].Cost -= n
	st.N2 -= n
	if g.Entries[i].Cost <= 0 {
		copy(g.Entries[i:], g.Entries[i+1:])
		g.Entries = g.Entries[:len(g.Entries)-1]
	}
	if st.N2 <= 0 {
		g.Entries, g.Head, st.N2 = g.Entries[:0], 0, 0
	}
}
