package slidinglog

import (
	"sort"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Book charges cost at now for an admission due at act (now ≤ act, and
// Peek(s, act, cost) admits cost; the store finds act with
// algorithm.Earliest). The cost is logged at act, or at the newest entry
// when that is later (a booking behind another one, which a clock that
// stepped back may ask for): it counts from now on, as every entry does
// once logged, until it leaves the window W after act. The log's clock
// stays at max(now, clock): a booking is no admission at act, and a Take
// at now after it is still decided at now. The result is Peek of the new
// state at now for a cost of 1, with RetryAfter act − now. Booking at
// act = now is Take.
//
// As Take, Book changes s.Log in place and returns a state pointing to it.
func (l *Log) Book(s algorithm.State, now, act, cost int64) (algorithm.State, algorithm.Result) {
	l.charge(&s, now, act, cost, true)
	r := l.Peek(s, now, 1)
	r.RetryAfter = act - now
	return s, r
}

// Refund gives back up to n of the cost in the window at now (decided at
// the log's clock when that is later, as Peek), newest first: bookings,
// then admissions, newest first. It shortens the log from its end, and
// lowers the cumulative cost of the entry in which n ends, so that the
// entries kept mean what they did. The clock does not move (the entries
// the log forgot left the window there). A log with nothing in the window
// is returned as it is. The result is Peek(next, now, 1).
//
// A log whose newest entry is after now (or after its clock, when that is
// later) gives nothing back: that entry is a booking not yet due, which
// only its Reservation gives back (Cancel), and the cost due before it
// counts in its cumulative cost.
//
// As Take, Refund changes s.Log in place and returns a state pointing to
// it.
func (l *Log) Refund(s algorithm.State, now, n int64) (algorithm.State, algorithm.Result) {
	if entries := live(&s); len(entries) > 0 && entries[len(entries)-1].At > at(&s, now) {
		n = 0
	}
	next, _, r := l.give(s, now, n)
	return next, r
}

// Undo gives back up to n of an admission of cost due at act (see
// algorithm.Undoer), from its own entry, found in the log whether exact
// or not: before act up to its Unused; at or after it, while act is in
// the window at now, n comes off the entry at act (which holds at least
// cost of its own) and off the cumulative cost of every later entry (at
// most maxRewrite of them), as if the admission had cost n less; the
// entry goes when nothing of its own is left. Nothing once act has left
// the window.
//
// As Take, Undo changes s.Log in place and returns a state pointing to
// it.
func (l *Log) Undo(s algorithm.State, now, act, cost, n int64, _ bool) (algorithm.State, int64, algorithm.Result) {
	n = min(n, cost)
	if n < 1 {
		return s, 0, l.Peek(s, now, 1)
	}
	give := min(n, l.Unused(s, now, act, cost))
	if act <= now && act > at(&s, now)-l.window && removeOwn(&s, act, cost, n) {
		return s, n, l.Peek(s, now, 1)
	}
	if act <= now {
		t := at(&s, now)
		entries := live(&s)
		if k := len(entries); s.N2 > 0 && k > 0 && entries[k-1].At == act && act > t-l.window {
			prev := s.N0
			if k > 1 {
				prev = entries[k-2].Cost
			}
			if entries[k-1].Cost-prev >= cost {
				give = n
			}
		}
	}
	return l.give(s, now, give)
}

// Owe charges n more at max(now, act) (see algorithm.Settler), whether
// or not the window has room: an entry logged there as a booking is, or
// added to the newest when that is later, that keeps later requests
// waiting until it leaves the window. n is cut at algorithm.MaxLimit,
// which keeps any window waiting as long.
//
// As Take, Owe changes s.Log in place and returns a state pointing to it.
func (l *Log) Owe(s algorithm.State, now, act, n int64) (algorithm.State, algorithm.Result) {
	l.charge(&s, now, act, min(n, algorithm.MaxLimit), true)
	return s, l.Peek(s, now, 1)
}

// maxRewrite is the most later entries an Undo rewrites: the script's
// trim bound, so that a refund stays O(1000) commands on Redis.
const maxRewrite = 1000

// removeOwn takes n off the entry at act, when it holds at least cost of
// its own and is not the newest (the newest is given back from the end,
// as Refund does), and off every later entry's cumulative cost, dropping
// the entry when nothing of its own is left. It reports whether it did.
func removeOwn(s *algorithm.State, act, cost, n int64) bool {
	entries := live(s)
	i := sort.Search(len(entries), func(i int) bool { return entries[i].At >= act })
	if s.N2 <= 0 || i >= len(entries)-1 || entries[i].At != act || len(entries)-1-i > maxRewrite {
		return false
	}
	prev := s.N0
	if i > 0 {
		prev = entries[i-1].Cost
	}
	if entries[i].Cost-prev < cost {
		return false
	}
	for j := i; j < len(entries); j++ {
		entries[j].Cost -= n
	}
	if entries[i].Cost == prev {
		g := s.Log
		k := g.Head + i
		copy(g.Entries[k:], g.Entries[k+1:])
		g.Entries = g.Entries[:len(g.Entries)-1]
	}
	s.N2 -= n
	return true
}

// give takes up to n off the cost in the window at now, newest first,
// and returns how much it took.
func (l *Log) give(s algorithm.State, now, n int64) (algorithm.State, int64, algorithm.Result) {
	t := at(&s, now)
	entries := live(&s)
	i, base := split(&s, entries, t-l.window)
	used := s.N2 - base
	if used <= 0 || n < 1 {
		return s, 0, l.Peek(s, now, 1)
	}
	given := min(n, used)
	total := s.N2 - given
	// The first entry in the window whose cumulative cost is above what
	// is left: it shrinks to total, unless the entry before it ends
	// there, and every later one goes. The newest entry is above it.
	in := entries[i:]
	j := sort.Search(len(in), func(j int) bool { return in[j].Cost > total })
	prev := base
	if j > 0 {
		prev = in[j-1].Cost
	}
	keep := i + j
	if prev < total {
		in[j].Cost = total
		keep++
	}
	g := s.Log
	g.Entries = g.Entries[:g.Head+keep]
	s.N2 = total
	if total == 0 {
		// All that the log ever admitted is given back: a fresh log.
		g.Entries, g.Head = g.Entries[:0], 0
		s.N0, s.N1 = 0, 0
	}
	return s, given, l.Peek(s, now, 1)
}

// Unused returns cost when a booking of cost due at act is still ahead
// (of now, and of the log's clock when that is later: a booking due there
// is used) and is still the newest charge: the newest entry is at act and
// holds at least cost (a Take logged at the booking's instant since, which
// only counts longer, leaves it so). Otherwise 0: a later booking was
// admitted with it counted, and the log does not tell what was charged
// when.
func (l *Log) Unused(s algorithm.State, now, act, cost int64) int64 {
	entries := live(&s)
	k := len(entries)
	if act <= at(&s, now) || s.N2 <= 0 || k == 0 || entries[k-1].At != act {
		return 0
	}
	prev := s.N0
	if k > 1 {
		prev = entries[k-2].Cost
	}
	if entries[k-1].Cost-prev < cost {
		return 0
	}
	return cost
}
