package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"pgregory.net/rapid"
)

// testPolicyReconfigure is testReconfigure for a Policy: random sequences
// of AllowN, Peek, Refund, ReserveN, Cancel, Reset and clock moves on a
// Policy of two to five limits of random kinds, each under a state ID and
// a rule of its own, while Policy.SetLimit changes one limit at a time to
// another configuration of its kind. Every limit's decision is checked
// against a reference that carries each limit's state of each key by the
// algorithms' Inherit: a state written under another Tag is converted at
// the call's instant, the cost is charged to every limit only when every
// limit admits it (a refused request, or a booking not made, writes
// nothing), and a refund (or a cancel's) writes a limit's state only when
// it gives that limit something back.
//
// As in testReconfigure, a limit's state that its writer would report
// fresh may have been dropped (a memory sweep; on Redis the key's hash
// lives as long as its longest field, a sliding log's sorted set as long
// as itself), so each limit may also read fresh then: every combination
// of the limits' candidates is tried, and the reference goes on with the
// one the store's answer matches.
func testPolicyReconfigure(t *testing.T, st store.Store[string]) {
	seq := 0
	rapid.Check(t, func(rt *rapid.T) {
		seq++
		// Up to 5 limits: past the 4 a Redis script nests, to its
		// closures.
		n := rapid.IntRange(2, 5).Draw(rt, "limits")
		m := &policyReconfig{seq: seq, keys: map[string][]*carried{}, gens: map[string][]int{}}
		limits := make([]ratelimit.Limit, n)
		for i := range n {
			k := kinds[rapid.IntRange(0, len(kinds)-1).Draw(rt, "kind")]
			s := k.draw(rt)
			rule := algorithm.AsIs
			if k.proportional && rapid.Bool().Draw(rt, "proportional") {
				rule = algorithm.Proportional
			}
			m.kinds = append(m.kinds, k)
			m.setups = append(m.setups, s)
			m.rules = append(m.rules, rule)
			limits[i] = ratelimit.Limit{Name: fmt.Sprint(i), Algorithm: s.alg, Inherit: rule}
		}
		m.start = drawStart(rt)
		m.now = m.start
		m.clk = clock.NewFake(time.UnixMicro(m.start))
		p, err := ratelimit.NewPolicy(st, limits, ratelimit.WithName(fmt.Sprint("prc", seq)), ratelimit.WithClock(m.clk))
		if err != nil {
			rt.Fatalf("NewPolicy: %v", err)
		}
		m.p = p
		steps := 0
		capped := func(action func(*rapid.T)) func(*rapid.T) {
			return func(t *rapid.T) {
				if steps < maxSteps {
					action(t)
					steps++
				}
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"advance":  capped(m.advance),
			"allow":    capped(m.allow),
			"peek":     capped(m.peek),
			"refund":   capped(m.refund),
			"reset":    capped(m.reset),
			"setLimit": capped(m.setLimit),
			"reserve":  capped(m.reserve),
			"cancel":   capped(m.cancel),
		})
	})
}

type policyReconfig struct {
	seq    int
	kinds  []kind
	setups []setup // each limit's configuration in force
	rules  []algorithm.Rule
	p      *ratelimit.Policy[string]
	clk    *clock.Fake
	start  int64
	now    int64
	keys   map[string][]*carried // by short name, a state per limit (nil: none)
	// gens is each key's limits' generations: one moves on when its
	// state goes (Reset, a cancel that gives back the booking that made
	// it), so that a state made after is another generation.
	gens  map[string][]int
	books []policyBooking // made by reserve, not yet cancelled
}

// policyBooking is a booking the reference may cancel: each limit's
// carried state before it (nil where the limit had none, or read fresh)
// and after it, whose writer is the limit that booked.
type policyBooking struct {
	name      string
	res       *ratelimit.Reservation[string]
	act, cost int64
	pre, post []*carried
	gen       []int // the generation of each limit's state it charged
}

func (m *policyReconfig) at() string { return fmt.Sprintf("+%dµs", m.now-m.start) }

func (m *policyReconfig) key(t *rapid.T) (string, string) {
	name := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "key")
	if m.keys[name] == nil {
		m.keys[name] = make([]*carried, len(m.setups))
	}
	return name, fmt.Sprintf("prc%d:%s", m.seq, name)
}

func (m *policyReconfig) advance(t *rapid.T) {
	s := m.setups[rapid.IntRange(0, len(m.setups)-1).Draw(t, "time scale of limit")]
	d := drawMove(t, s, "advance µs")
	m.clk.Advance(micros(d))
	m.now += d
	t.Logf("%s: clock moved %dµs", m.at(), d)
}

func (m *policyReconfig) setLimit(t *rapid.T) {
	i := rapid.IntRange(0, len(m.setups)-1).Draw(t, "limit")
	next := m.kinds[i].draw(t)
	if err := m.p.SetLimit(i, next.alg); err != nil {
		t.Fatalf("SetLimit(%d, %v): %v", i, next.alg, err)
	}
	t.Logf("%s: limit %d changed to %v (%v)", m.at(), i, next.alg, m.rules[i])
	m.setups[i] = next
}

// candidates returns, for each limit, the states the store may read for
// name's key in the terms of the limit in force (see reconfig.candidates).
func (m *policyReconfig) candidates(t *rapid.T, name string) [][]algorithm.State {
	out := make([][]algorithm.State, len(m.setups))
	for i, s := range m.setups {
		r := reconfig{s: s, rule: m.rules[i], now: m.now}
		out[i] = r.candidates(t, m.keys[name][i])
	}
	return out
}

// combinations calls f with every choice of one candidate per limit, by
// index, until f returns true.
func combinations(cands [][]algorithm.State, f func(pick []int) bool) bool {
	pick := make([]int, len(cands))
	for {
		if f(pick) {
			return true
		}
		i := 0
		for ; i < len(pick); i++ {
			if pick[i]++; pick[i] < len(cands[i]) {
				break
			}
			pick[i] = 0
		}
		if i == len(pick) {
			return false
		}
	}
}

// expect returns the decisions the limits' results rs stand for.
func (m *policyReconfig) expect(rs []algorithm.Result) []ratelimit.Decision {
	ds := make([]ratelimit.Decision, len(rs))
	for i, r := range rs {
		ds[i] = ratelimit.DecisionFields{Allowed: r.Allowed(), Limit: m.setups[i].limit, Remaining: r.Remaining,
			RetryAfter: micros(r.RetryAfter), ResetAfter: micros(r.ResetAfter)}.Decision()
	}
	return ds
}

// decide checks got, the answer to call, against every combination of
// candidates, each limit's result being what result returns for its
// candidate state, and returns the combination it matches, or fails.
func (m *policyReconfig) decide(t *rapid.T, call string, got ratelimit.Decision, err error, cands [][]algorithm.State,
	result func(pick []int) []algorithm.Result) []int {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %s: %v", m.at(), call, err)
	}
	t.Logf("%s: %s = %s binding=%d", m.at(), call, show(got), got.Binding())
	if err := checkCombined(got, len(m.setups)); err != nil {
		t.Fatalf("%s: %s: %v", m.at(), call, err)
	}
	return m.pick(t, call, got, cands, result)
}

// pick returns the combination of candidates whose limits' results match
// got's limits' decisions, or fails.
func (m *policyReconfig) pick(t *rapid.T, call string, got ratelimit.Decision, cands [][]algorithm.State,
	result func(pick []int) []algorithm.Result) []int {
	t.Helper()
	var match []int
	var tried []string
	combinations(cands, func(pick []int) bool {
		want := m.expect(result(pick))
		same := true
		var shown []string
		for i, d := range want {
			same = same && d == got.Limits()[i]
			shown = append(shown, show(d))
		}
		if same {
			match = append([]int(nil), pick...)
			return true
		}
		tried = append(tried, fmt.Sprint(shown))
		return false
	})
	if match == nil {
		var shown []string
		for i, d := range got.Limits() {
			shown = append(shown, fmt.Sprintf("limit %d (%v): %s", i, m.setups[i].alg, show(d)))
		}
		t.Fatalf("%s: %s: got %v, want one of %v (each limit's state carried by its rule, or fresh when its writer would say so)", m.at(), call, shown, tried)
	}
	return match
}

func (m *policyReconfig) allow(t *rapid.T) {
	name, key := m.key(t)
	cost := rapid.Int64Range(1, m.p.Limit()).Draw(t, "cost")
	got, err := m.p.AllowN(t.Context(), key, int(cost))
	cands := m.candidates(t, name)
	var taken []algorithm.State
	admitted := false
	take := func(pick []int) []algorithm.Result {
		rs := make([]algorithm.Result, len(pick))
		taken = make([]algorithm.State, len(pick))
		all := true
		for i, j := range pick {
			taken[i], rs[i] = m.setups[i].alg.Take(copyState(cands[i][j]), m.now, cost)
			all = all && rs[i].Allowed()
		}
		if !all {
			// Refused: nothing is charged, and each limit reports its
			// state as it stands for this cost.
			for i, j := range pick {
				rs[i] = m.setups[i].alg.Peek(copyState(cands[i][j]), m.now, cost)
			}
		}
		admitted = all
		return rs
	}
	pick := m.decide(t, fmt.Sprintf("AllowN(%s, %d)", name, cost), got, err, cands, take)
	take(pick)
	if admitted != got.Allowed() {
		t.Fatalf("%s: AllowN(%s, %d): allowed %v, the reference %v", m.at(), name, cost, got.Allowed(), admitted)
	}
	if admitted {
		for i := range m.setups {
			m.keys[name][i] = &carried{s: taken[i], writer: m.setups[i].alg}
		}
	}
}

func (m *policyReconfig) peek(t *rapid.T) {
	name, key := m.key(t)
	got, err := m.p.Peek(t.Context(), key)
	cands := m.candidates(t, name)
	m.decide(t, fmt.Sprintf("Peek(%s)", name), got, err, cands, func(pick []int) []algorithm.Result {
		rs := make([]algorithm.Result, len(pick))
		for i, j := range pick {
			rs[i] = m.setups[i].alg.Peek(copyState(cands[i][j]), m.now, 1)
		}
		return rs
	})
}

// refund gives units back to every limit: each refunds on a state it
// wrote (its own Tag), and is written only when that gave it something
// back; a state written under other parameters is read converted and
// gives nothing back.
func (m *policyReconfig) refund(t *rapid.T) {
	name, key := m.key(t)
	n := rapid.Int64Range(1, m.p.Limit()+2).Draw(t, "refund")
	got, err := m.p.Refund(t.Context(), key, int(n))
	cands := m.candidates(t, name)
	var next []algorithm.State
	refund := func(pick []int) []algorithm.Result {
		rs := make([]algorithm.Result, len(pick))
		next = make([]algorithm.State, len(pick))
		for i, j := range pick {
			b, ok := m.setups[i].alg.(algorithm.Booker)
			if !ok {
				t.Fatalf("%v refunds through the policy but is no algorithm.Booker", m.setups[i].alg)
			}
			if c := m.keys[name][i]; c != nil && j == 0 && !sameTag(c.writer, m.setups[i].alg) {
				next[i], rs[i] = cands[i][j], b.Peek(copyState(cands[i][j]), m.now, 1)
				continue
			}
			next[i], rs[i] = b.Refund(copyState(cands[i][j]), m.now, n)
		}
		return rs
	}
	pick := m.decide(t, fmt.Sprintf("Refund(%s, %d)", name, n), got, err, cands, refund)
	refund(pick)
	for i, j := range pick {
		if !sameState(next[i], cands[i][j]) {
			m.keys[name][i] = &carried{s: next[i], writer: m.setups[i].alg}
		}
	}
}

func (m *policyReconfig) reset(t *rapid.T) {
	name, key := m.key(t)
	if err := m.p.Reset(t.Context(), key); err != nil {
		t.Fatalf("Reset(%s): %v", name, err)
	}
	m.keys[name] = make([]*carried, len(m.setups))
	for i := range m.setups {
		m.gen(name)[i]++
	}
	t.Logf("%s: Reset(%s)", m.at(), name)
}

// reserve books a request on every limit at the earliest instant all
// admit it, within a random delay: the reference books each limit's
// carried state, converted as for a decision, at that instant. A booking
// not made writes nothing.
func (m *policyReconfig) reserve(t *rapid.T) {
	name, key := m.key(t)
	cost := rapid.Int64Range(1, m.p.Limit()).Draw(t, "cost")
	s := m.setups[rapid.IntRange(0, len(m.setups)-1).Draw(t, "delay scale of limit")]
	maxDelay := rapid.OneOf(rapid.Int64Range(0, 4*s.period), rapid.Int64Range(0, 2*s.period*s.limit)).Draw(t, "max delay µs")
	res, err := m.p.ReserveN(t.Context(), key, int(cost), micros(maxDelay))
	if err != nil {
		t.Fatalf("%s: ReserveN(%s, %d, %dµs): %v", m.at(), name, cost, maxDelay, err)
	}
	call := fmt.Sprintf("ReserveN(%s, %d, %dµs)", name, cost, maxDelay)
	t.Logf("%s: %s = ok %v, delay %v, %s", m.at(), call, res.OK(), res.Delay(), show(res.Decision()))
	cands := m.candidates(t, name)
	algs := make([]algorithm.Algorithm, len(m.setups))
	bookers := make([]algorithm.Booker, len(m.setups))
	for i, s := range m.setups {
		b, ok := s.alg.(algorithm.Booker)
		if !ok {
			t.Fatalf("%v books through the policy but is no algorithm.Booker", s.alg)
		}
		algs[i], bookers[i] = s.alg, b
	}
	until := algorithm.BookingDeadline(m.now, holdsNow(algs, maxDelay))
	var next []algorithm.State
	var act int64
	var booked bool
	book := func(pick []int) []algorithm.Result {
		states := make([]algorithm.State, len(pick))
		for i, j := range pick {
			states[i] = copyState(cands[i][j])
		}
		act, booked = algorithm.EarliestAll(algs, states, m.now, until, cost)
		rs := make([]algorithm.Result, len(pick))
		next = make([]algorithm.State, len(pick))
		for i, b := range bookers {
			if booked {
				next[i], rs[i] = b.Book(copyState(states[i]), m.now, act, cost)
			} else {
				rs[i] = b.Peek(copyState(states[i]), m.now, cost)
			}
		}
		return rs
	}
	pick := m.pick(t, call, res.Decision(), cands, book)
	book(pick)
	if res.OK() != booked {
		t.Fatalf("%s: %s: OK %v, the reference %v", m.at(), call, res.OK(), booked)
	}
	if !booked {
		return
	}
	if got := m.now + res.Delay().Microseconds(); got != act {
		t.Fatalf("%s: %s: booked for +%dµs, the reference +%dµs", m.at(), call, got-m.start, act-m.start)
	}
	bk := policyBooking{name: name, res: res, act: act, cost: cost, gen: slices.Clone(m.gen(name)),
		pre: make([]*carried, len(m.setups)), post: make([]*carried, len(m.setups))}
	for i, j := range pick {
		if c := m.keys[name][i]; c != nil && j == 0 { // read converted, not fresh
			bk.pre[i] = &carried{s: copyState(c.s), writer: c.writer}
		}
		bk.post[i] = &carried{s: copyState(next[i]), writer: m.setups[i].alg}
		m.keys[name][i] = &carried{s: next[i], writer: m.setups[i].alg}
	}
	m.books = append(m.books, bk)
}

// cancel gives a pending booking back, each limit as afterCancel has it
// for one: under the limit that booked it, exactly where the limit's
// state is still the one the booking left, else by refunding what the
// booking left unused, written only when that gives something back.
func (m *policyReconfig) cancel(t *rapid.T) {
	if len(m.books) == 0 {
		t.Skip("nothing booked")
	}
	j := rapid.IntRange(0, len(m.books)-1).Draw(t, "booking")
	bk := m.books[j]
	next := make([]*carried, len(m.setups))
	exact := make([]bool, len(m.setups))
	for i := range m.setups {
		var dropped bool
		next[i], exact[i], dropped = afterCancel(m.keys[bk.name][i], bk.pre[i], bk.post[i], m.now, bk.act, bk.cost, bk.gen[i] == m.gen(bk.name)[i])
		if dropped {
			t.Skip("a limit's state may have been dropped") // not modelled: either way gives nothing back
		}
	}
	m.books = append(m.books[:j], m.books[j+1:]...)
	if err := bk.res.Cancel(t.Context()); err != nil {
		t.Fatalf("%s: Cancel of %d booked on %s for +%dµs: %v", m.at(), bk.cost, bk.name, bk.act-m.start, err)
	}
	t.Logf("%s: cancelled %d booked on %s for +%dµs (exactly: %v)", m.at(), bk.cost, bk.name, bk.act-m.start, exact)
	for i := range next {
		if next[i] == nil && m.keys[bk.name][i] != nil {
			m.gen(bk.name)[i]++ // gone: the next state is another generation
		}
	}
	m.keys[bk.name] = next
}

// gen returns the generations of key name's limits.
func (m *policyReconfig) gen(name string) []int {
	if m.gens[name] == nil {
		m.gens[name] = make([]int, len(m.setups))
	}
	return m.gens[name]
}
