package slidinglog_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/slidinglog"
)

// TestBookHoldsItsPlace is the case that decides how a stepped-back
// clock is read: 3 of 3 taken at 0, a booking of 1 made at 5 for 10
// (when the 3 leave), then 2 asked at 6. The window (−4, 6] holds the 3
// of 0: deciding at the booking's instant, the newest entry's, would
// admit them.
func TestBookHoldsItsPlace(t *testing.T) {
	l := mustNew(t, slidinglog.Config{Limit: 3, Window: 10 * time.Microsecond})
	s := l.Init(algorithm.State{}, t0)
	s, r := l.Take(s, t0, 3)
	if !r.Allowed() {
		t.Fatalf("Take(3) at 0: %+v", r)
	}
	if act := algorithm.Earliest(l, s, t0+5, 1); act != t0+10 {
		t.Fatalf("Earliest for 1 from 5: got t0%+d, want t0+10", act-t0)
	}
	s, r = l.Book(s, t0+5, t0+10, 1)
	if want := (algorithm.Result{Remaining: 0, RetryAfter: 5, ResetAfter: 15}); r != want {
		t.Errorf("Book(1) at 5 for 10: got %+v, want %+v", r, want)
	}
	if s, r = l.Take(s, t0+6, 2); r.Allowed() {
		t.Fatalf("Take(2) at 6 after the booking: admitted (%+v), with 3 taken at 0 still in (−4, 6]", r)
	}
	// At 10 the 3 of 0 leave: the booking's 1 is in, 2 remain.
	if r = l.Peek(s, t0+10, 2); r != ok(2, 10) {
		t.Errorf("Peek(2) at 10: got %+v, want %+v", r, ok(2, 10))
	}
	// A stepped-back clock (5, then 0): still decided at 5, the latest
	// instant the log charged at, not at the booking's 10.
	if r = l.Peek(s, t0, 1); r != no(0, 10, 20) {
		t.Errorf("Peek(1) at 0 after a charge at 5: got %+v, want %+v", r, no(0, 10, 20))
	}
}

func TestBookSteps(t *testing.T) {
	// 4 per 1s (4d).
	l := mustNew(t, slidinglog.Config{Limit: 4, Window: time.Second})
	s := l.Init(algorithm.State{}, t0)
	step := func(what string, got, want algorithm.Result) {
		t.Helper()
		if got != want {
			t.Errorf("%s: got %+v, want %+v", what, got, want)
		}
	}
	s, r := l.Take(s, t0, 3)
	step("Take(3) at t0", r, ok(1, 4*d))
	s, r = l.Book(s, t1, t4, 2) // 2 fit once the 3 of t0 leave
	step("Book(2) at t1 for t4", r, algorithm.Result{Remaining: 0, RetryAfter: 3 * d, ResetAfter: 7 * d})
	if got := algorithm.Earliest(l, s, t1, 1); got != t4 {
		t.Errorf("Earliest(1) from t1 after the booking: got t0%+dµs, want t4", got-t0)
	}
	s, r = l.Book(s, t2, t4, 1) // a second booking at the same instant: one entry
	step("Book(1) at t2 for t4", r, algorithm.Result{Remaining: 0, RetryAfter: 2 * d, ResetAfter: 6 * d})
	if got := s.Log.Entries[s.Log.Head:]; !slices.Equal(got, []algorithm.Entry{{At: t0, Cost: 3}, {At: t4, Cost: 6}}) {
		t.Errorf("entries: got %+v", got)
	}
	if u := l.Unused(s, t2, t4, 1); u != 1 {
		t.Errorf("Unused of the newest booking: got %d, want 1", u)
	}
	if u := l.Unused(s, t2, t4, 4); u != 0 {
		t.Errorf("Unused of 4 at t4, which holds 3: got %d, want 0", u)
	}
	if u := l.Unused(s, t4, t4, 1); u != 0 {
		t.Errorf("Unused once due: got %d, want 0", u)
	}
	// Refund 4 by key: nothing, the 3 booked for t4 are not due. Given
	// back by their handle (Undo), then 1 of the 3 of t0 by key, which
	// stays an entry of 2.
	before := l.Peek(s, t2, 1)
	s, r = l.Refund(s, t2, 4)
	step("Refund(4) at t2", r, before)
	s, _, _ = l.Undo(s, t2, t4, 3, 3, false)
	s, r = l.Refund(s, t2, 1)
	step("Refund(1) at t2", r, ok(2, 2*d))
	if got := s.Log.Entries[s.Log.Head:]; !slices.Equal(got, []algorithm.Entry{{At: t0, Cost: 2}}) {
		t.Errorf("entries after the refund: got %+v", got)
	}
	s, r = l.Refund(s, t4, 5) // nothing in the window at t4
	step("Refund(5) at t4", r, ok(4, 0))
	s, r = l.Refund(s, t2, 5) // all of it
	step("Refund(5) at t2", r, ok(4, 0))
	if s.N2 != 0 || len(s.Log.Entries) != s.Log.Head {
		t.Errorf("a log that gave everything back: got %+v, entries %+v, want fresh", s, s.Log.Entries[s.Log.Head:])
	}
	s, r = l.Take(s, t1, 1) // the clock is forgotten with the log
	step("Take(1) at t1", r, ok(3, 4*d))
}

// model is the sliding log kept the obvious way, with bookings: every
// charge that is still counted, with the instant it was logged at and the
// one it is due at (where it is used), and the log's clock.
type model struct {
	limit, window int64
	clock         int64 // the latest instant a charge was decided at
	units         []unit
	// total is the cost of every charge not given back, the units
	// dropped included: the log is fresh, and its clock forgotten, when
	// it is 0.
	total int64
}

type unit struct{ due, rec, cost int64 }

// at is the instant a decision at now is made at.
func (m *model) at(now int64) int64 {
	if m.total > 0 {
		return max(now, m.clock)
	}
	return now
}

// used sums the cost logged after x − window, later instants included.
func (m *model) used(x int64) int64 {
	sum := int64(0)
	for _, u := range m.units {
		if u.rec > x-m.window {
			sum += u.cost
		}
	}
	return sum
}

func (m *model) newest() int64 {
	n := int64(0)
	for i, u := range m.units {
		if i == 0 || u.rec > n {
			n = u.rec
		}
	}
	return n
}

func (m *model) peek(now, cost int64) algorithm.Result {
	t := m.at(now)
	used := m.used(t)
	r := algorithm.Result{Remaining: max(m.limit-used, 0)}
	if used > 0 {
		r.ResetAfter = m.newest() + m.window - now
	}
	if used+cost > m.limit {
		// The first instant at which a unit leaves and cost fits.
		first := int64(-1)
		for _, u := range m.units {
			if leave := u.rec + m.window; leave > t && m.used(leave)+cost <= m.limit && (first < 0 || leave < first) {
				first = leave
			}
		}
		if first < 0 {
			r.RetryAfter = max(r.ResetAfter, 1)
		} else {
			r.RetryAfter = first - now
		}
	}
	return r
}

func (m *model) charge(now, due, cost int64) {
	t := m.at(now)
	rec := max(due, t)
	if len(m.units) > 0 {
		rec = max(rec, m.newest())
	}
	m.units = append(m.units, unit{due: max(due, t), rec: rec, cost: cost})
	m.clock, m.total = t, m.total+cost
	// Units logged at or before clock − window never count again, nor
	// share a window with a unit charged from now on (due at the clock or
	// later): drop them, so that a long history stays cheap to check.
	m.units = slices.DeleteFunc(m.units, func(u unit) bool { return u.rec <= t-m.window })
}

// refund gives back up to n of what counts at now, the latest logged
// first (of those logged at one instant, the latest due); by key
// (keyed), nothing while a unit is logged after the instant a decision at
// now is made at (a booking not yet due).
func (m *model) refund(now, n int64, keyed bool) {
	t := m.at(now)
	if keyed && len(m.units) > 0 && m.newest() > t {
		return
	}
	slices.SortStableFunc(m.units, func(a, b unit) int {
		if a.rec != b.rec {
			return int(a.rec - b.rec)
		}
		return int(a.due - b.due)
	})
	for i := len(m.units) - 1; i >= 0 && n > 0 && m.units[i].rec > t-m.window; i-- {
		give := min(n, m.units[i].cost)
		m.units[i].cost -= give
		m.total -= give
		n -= give
	}
	m.units = slices.DeleteFunc(m.units, func(u unit) bool { return u.cost == 0 })
}

// unused is cost when a booking due at act, after the instant a decision
// at now is made at, is the newest charge: the units logged at the newest
// instant, act, add up to cost at least.
func (m *model) unused(now, act, cost int64) int64 {
	if act <= m.at(now) || len(m.units) == 0 || m.newest() != act {
		return 0
	}
	sum := int64(0)
	for _, u := range m.units {
		if u.rec == act {
			sum += u.cost
		}
	}
	if sum < cost {
		return 0
	}
	return cost
}

// undo gives back an admission of cost due at act ≤ now by its handle,
// and returns what it gave: cost off the units logged at act (the latest
// due first), when they hold that much and act is in the window at now,
// as if it had never been admitted, whatever was logged since.
func (m *model) undo(now, act, cost int64) int64 {
	t := m.at(now)
	if act > now || act <= t-m.window {
		return 0
	}
	sum := int64(0)
	for _, u := range m.units {
		if u.rec == act {
			sum += u.cost
		}
	}
	if sum < cost {
		return 0
	}
	n := cost
	for i := len(m.units) - 1; i >= 0 && n > 0; i-- {
		if m.units[i].rec == act {
			give := min(n, m.units[i].cost)
			m.units[i].cost -= give
			n -= give
		}
	}
	m.total -= cost
	m.units = slices.DeleteFunc(m.units, func(u unit) bool { return u.cost == 0 })
	return cost
}

// overfull returns a window (x − window, x] in which the units counted at
// their due instants exceed the limit, or false.
func (m *model) overfull() (int64, int64, bool) {
	for _, e := range m.units {
		x, sum := e.due, int64(0)
		for _, u := range m.units {
			if u.due > x-m.window && u.due <= x {
				sum += u.cost
			}
		}
		if sum > m.limit {
			return x, sum, true
		}
	}
	return 0, 0, false
}

// booking is one made in a history, for Unused and its cancel.
type booking struct{ at, act, cost int64 }

// TestBookHistories replays random histories of Take, Peek, Book,
// Refund and cancels (Refund of Unused) with a clock that goes forward,
// idles and steps back, checking every transition against its contract
// (algorithm.CheckTake, CheckBook, CheckRefund, CheckUnused), every
// result against the model, and, after every step, that no window of the
// units admitted, counted at the instants they are due, holds more than
// the limit.
func TestBookHistories(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1))
	for seq := range 400 {
		limit := []int64{1, 3, 5, 40}[seq%4]
		window := []int64{1, 7, 10, 1000}[seq/4%4]
		seed := rng.Uint64()
		t.Run(fmt.Sprintf("%d/limit=%d/window=%d", seq, limit, window), func(t *testing.T) {
			history(t, rand.New(rand.NewPCG(seed, 0)), limit, window, 150)
		})
	}
}

func history(t *testing.T, rng *rand.Rand, limit, window int64, steps int) {
	l := mustNew(t, slidinglog.Config{Limit: limit, Window: time.Duration(window) * time.Microsecond})
	m := &model{limit: limit, window: window}
	s := l.Init(algorithm.State{}, t0)
	now := int64(t0)
	var books []booking
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		var entries []algorithm.Entry
		if s.Log != nil {
			entries = s.Log.Entries[s.Log.Head:]
		}
		t.Fatalf("%s\nafter:\n  %s\nstate %d %d %d %v\nmodel clock %d, units %v", fmt.Sprintf(format, args...), joinLines(trace),
			s.N0, s.N1-t0, s.N2, entries, m.clock-t0, m.units)
	}
	later := func(from int64, more ...int64) []int64 {
		ts := append([]int64{from, from + 1, from + window/2, from + window - 1, from + window, from + rng.Int64N(3*window+1)}, more...)
		return ts
	}
	for range steps {
		switch rng.IntN(12) {
		case 0:
			now -= rng.Int64N(2*window + 1) // steps back
		case 1:
			now += rng.Int64N(3*window + 1)
		case 2, 3, 4:
			now += rng.Int64N(window/3 + 2)
		}
		cost := 1 + rng.Int64N(limit)
		if rng.IntN(3) > 0 {
			cost = 1 + rng.Int64N(min(limit, 2))
		}
		// The log agrees with the model, for this cost and for 1.
		for _, c := range []int64{cost, 1} {
			if got, want := l.Peek(s, now, c), m.peek(now, c); got != want {
				fail("Peek(%d) at t0%+d: got %+v, model %+v", c, now-t0, got, want)
			}
		}
		var err error
		var r algorithm.Result
		switch op := rng.IntN(10); {
		case op < 4:
			fits := m.peek(now, cost).Allowed()
			s, r, err = algorithm.CheckTake(l, s, now, cost)
			if fits {
				m.charge(now, now, cost)
			}
			trace = append(trace, fmt.Sprintf("Take(%d) at t0%+d: %+v", cost, now-t0, r))
		case op < 7:
			from := now
			if rng.IntN(3) == 0 {
				from += rng.Int64N(2*window + 1)
			}
			act := algorithm.Earliest(l, s, from, cost)
			if got, want := act-now, m.peek(from, cost).RetryAfter+from-now; got != want {
				fail("Earliest(%d) from t0%+d: got t0%+d, model t0%+d", cost, from-t0, act-t0, want+now-t0)
			}
			s, r, err = algorithm.CheckBook(l, s, now, act, cost, later(now, act-1, act, act+1, act+window-1, act+window))
			m.charge(now, act, cost)
			books = append(books, booking{now, act, cost})
			trace = append(trace, fmt.Sprintf("Book(%d) at t0%+d for t0%+d: %+v", cost, now-t0, act-t0, r))
		case op < 9:
			n := 1 + rng.Int64N(limit+1)
			s, r, err = algorithm.CheckRefund(l, s, now, n, later(now))
			m.refund(now, n, true)
			trace = append(trace, fmt.Sprintf("Refund(%d) at t0%+d: %+v", n, now-t0, r))
		default:
			if len(books) == 0 {
				continue
			}
			b := books[rng.IntN(len(books))]
			if rng.IntN(2) == 0 {
				b = books[len(books)-1]
			}
			var u int64
			if u, err = algorithm.CheckUnused(l, s, now, b.act, b.cost); err == nil && u != m.unused(now, b.act, b.cost) {
				fail("Unused of Book(%d) for t0%+d at t0%+d: got %d, model %d", b.cost, b.act-t0, now-t0, u, m.unused(now, b.act, b.cost))
			}
			before := l.Peek(s, now, 1)
			if err == nil {
				s, _, r, err = algorithm.CheckUndo(l, s, now, b.act, b.cost, b.cost, false, later(now))
				if b.act <= now {
					// Due: given back by its handle (Undo), its own units.
					u = m.undo(now, b.act, b.cost)
				} else {
					m.refund(now, u, false)
				}
			}
			if err == nil && r.Remaining-before.Remaining > u {
				fail("Undo of Book(%d) for t0%+d at t0%+d gave back %d, model %d", b.cost, b.act-t0, now-t0, r.Remaining-before.Remaining, u)
			}
			trace = append(trace, fmt.Sprintf("Undo of Book(%d) for t0%+d at t0%+d: gives %d, %+v", b.cost, b.act-t0, now-t0, u, r))
		}
		if err != nil {
			fail("%v", err)
		}
		if want := m.peek(now, 1); r.Remaining != want.Remaining || r.ResetAfter != want.ResetAfter {
			fail("%s: model says %+v", trace[len(trace)-1], want)
		}
		if x, sum, bad := m.overfull(); bad {
			fail("the window (t0%+d, t0%+d] holds %d, over the limit %d", x-window-t0, x-t0, sum, limit)
		}
	}
}

func joinLines(lines []string) string {
	if len(lines) > 12 {
		lines = lines[len(lines)-12:]
	}
	out := ""
	for i, s := range lines {
		if i > 0 {
			out += "\n  "
		}
		out += s
	}
	return out
}

// TestBookFarApart books far ahead of a busy log, and refunds across
// many entries, where the log forgets and compacts: every result against
// the model.
func TestBookFarApart(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 26))
	for range 20 {
		history(t, rand.New(rand.NewPCG(rng.Uint64(), 1)), 100, 50, 3000)
	}
}
