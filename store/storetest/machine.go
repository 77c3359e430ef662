package storetest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"pgregory.net/rapid"
)

// maxSteps caps the actions of one sequence, whatever -rapid.steps says,
// to keep the suite quick on networked stores. Past it, actions do nothing.
const maxSteps = 50

// testModel runs random sequences of actions on two keys of st and checks
// every decision against the key's model, against what earlier decisions
// promised, and the admissions against the algorithm's bound.
func testModel(t *testing.T, k kind, st store.Store[string]) {
	seq := 0
	rapid.Check(t, func(rt *rapid.T) {
		seq++ // fresh keys for each sequence, shrinking runs included
		s := k.draw(rt)
		start := drawStart(rt)
		clk := clock.NewFake(time.UnixMicro(start))
		// A quota of each sequence's own.
		lim, err := ratelimit.New(s.alg, st, ratelimit.WithClock(clk), ratelimit.WithName(fmt.Sprint("model-", seq)))
		if err != nil {
			rt.Fatalf("ratelimit.New(%v, store, fake clock): %v", s.alg, err)
		}
		m := &machine{s: s, lim: lim, clk: clk, start: start, now: start}
		for _, name := range []string{"a", "b"} {
			key := &keyState{name: name, key: fmt.Sprintf("m%d:%s", seq, name)}
			key.forget(start, s)
			m.keys = append(m.keys, key)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"advance":    m.capped(m.advance),
			"jump":       m.capped(m.jump),
			"allow":      m.capped(m.allow),
			"allowOne":   m.capped(m.allowOne),
			"allowLimit": m.capped(m.allowLimit),
			"retry":      m.capped(m.retry),
			"reset":      m.capped(m.reset),
			"":           m.check,
		})
	})
}

// machine is the state of one sequence: a limiter on a fake clock and what
// is known about each key.
type machine struct {
	s     setup
	lim   *ratelimit.Limiter[string]
	clk   *clock.Fake
	start int64 // Unix µs
	now   int64 // Unix µs, the fake clock's time
	steps int
	idle  bool // maxSteps reached
	keys  []*keyState
}

// keyState is what the test knows of one key.
type keyState struct {
	name  string // for the story: "a", "b"
	key   string // in the store
	model model
	hist  []admission // admitted since the key was last reset

	// What decisions made since the key's state last changed (by an
	// admission or a Reset) promise, as long as nothing is admitted:
	freshAt int64           // the key is fresh from this instant on
	retryAt map[int64]int64 // cost → the instant from which it is admitted
	seenAt  int64           // the instant of the last decision,
	seenRem int64           // and its Remaining
	denied  int64           // the cost of the last denied AllowN, or 0

	// unpeeked is set when the key was asked for or reset, or the clock
	// moved, since the last Peek: only then can a Peek tell something new.
	unpeeked bool
}

// forget makes k a key fresh at now, as a new or reset key is.
func (k *keyState) forget(now int64, s setup) {
	k.model = s.newModel(now)
	k.hist = nil
	k.freshAt = now
	k.retryAt = map[int64]int64{}
	k.seenAt, k.seenRem = now, s.limit
	k.denied = 0
	k.unpeeked = true
}

// at formats an instant relative to the start, for the story.
func (m *machine) at(t int64) string { return fmt.Sprintf("+%dµs", t-m.start) }

func (m *machine) capped(action func(*rapid.T)) func(*rapid.T) {
	return func(t *rapid.T) {
		if m.steps >= maxSteps {
			m.idle = true
			return
		}
		action(t)
		m.steps++
	}
}

func (m *machine) drawKey(t *rapid.T) *keyState {
	return m.keys[rapid.IntRange(0, len(m.keys)-1).Draw(t, "key index")]
}

func (m *machine) moveTo(t *rapid.T, to int64, why string) {
	m.clk.Advance(micros(to - m.now))
	m.now = to
	for _, k := range m.keys {
		k.unpeeked = true
	}
	t.Logf("%s: clock %s", m.at(m.now), why)
}

func (m *machine) advance(t *rapid.T) {
	d := drawMove(t, m.s, "advance µs")
	m.moveTo(t, m.now+d, fmt.Sprintf("advanced %dµs", d))
}

// boundary is an instant some decision named.
type boundary struct {
	at   int64
	what string
}

// jump moves the clock to an instant an earlier decision promised
// something for, or a microsecond before it.
func (m *machine) jump(t *rapid.T) {
	var to []boundary
	add := func(at int64, what string) {
		if at > m.now {
			to = append(to, boundary{at, what})
		}
		if at-1 > m.now {
			to = append(to, boundary{at - 1, "1µs before " + what})
		}
	}
	for _, k := range m.keys {
		add(k.freshAt, fmt.Sprintf("%s fresh at %s", k.name, m.at(k.freshAt)))
		for _, cost := range slices.Sorted(maps.Keys(k.retryAt)) {
			add(k.retryAt[cost], fmt.Sprintf("%s admits cost %d at %s", k.name, cost, m.at(k.retryAt[cost])))
		}
	}
	if len(to) == 0 {
		t.SkipNow()
	}
	slices.SortStableFunc(to, func(a, b boundary) int { return cmp.Compare(a.at, b.at) })
	b := rapid.SampledFrom(to).Draw(t, "jump to")
	m.moveTo(t, b.at, "jumped to "+b.what)
}

func (m *machine) allow(t *rapid.T) {
	k := m.drawKey(t)
	m.take(t, k, rapid.Int64Range(1, m.s.limit).Draw(t, "cost"))
}

func (m *machine) allowOne(t *rapid.T) { m.take(t, m.drawKey(t), 1) }

func (m *machine) allowLimit(t *rapid.T) { m.take(t, m.drawKey(t), m.s.limit) }

// retry repeats the last denied request of a key.
func (m *machine) retry(t *rapid.T) {
	var denied []*keyState
	for _, k := range m.keys {
		if k.denied > 0 {
			denied = append(denied, k)
		}
	}
	if len(denied) == 0 {
		t.SkipNow()
	}
	k := denied[rapid.IntRange(0, len(denied)-1).Draw(t, "denied key index")]
	m.take(t, k, k.denied)
}

func (m *machine) reset(t *rapid.T) {
	k := m.drawKey(t)
	if err := m.lim.Reset(t.Context(), k.key); err != nil {
		t.Fatalf("%s: Reset(%s): %v", m.at(m.now), k.name, err)
	}
	t.Logf("%s: Reset(%s)", m.at(m.now), k.name)
	k.forget(m.now, m.s)
}

func (m *machine) take(t *rapid.T, k *keyState, cost int64) {
	d, err := m.lim.AllowN(t.Context(), k.key, int(cost))
	if err != nil {
		t.Fatalf("%s: AllowN(%s, %d): %v", m.at(m.now), k.name, cost, err)
	}
	t.Logf("%s: AllowN(%s, %d) = %s", m.at(m.now), k.name, cost, show(d))
	k.unpeeked = true
	m.observe(t, k, cost, d)
}

// check peeks at every key whose Peek could tell something new.
func (m *machine) check(t *rapid.T) {
	if m.idle {
		return
	}
	for _, k := range m.keys {
		if !k.unpeeked {
			continue
		}
		k.unpeeked = false
		d, err := m.lim.Peek(t.Context(), k.key)
		if err != nil {
			t.Fatalf("%s: Peek(%s): %v", m.at(m.now), k.name, err)
		}
		m.observe(t, k, 0, d)
	}
}

// story lists admissions relative to the start.
func (m *machine) story(hist []admission) string {
	s := "["
	for i, a := range hist {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d@%s", a.cost, m.at(a.at))
	}
	return s + "]"
}

// observe checks d, the store's answer to AllowN(cost) on k, or to Peek
// when cost is 0, and records what it tells.
func (m *machine) observe(t *rapid.T, k *keyState, cost int64, d ratelimit.Decision) {
	call := fmt.Sprintf("%s: Peek(%s)", m.at(m.now), k.name)
	if cost > 0 {
		call = fmt.Sprintf("%s: AllowN(%s, %d)", m.at(m.now), k.name, cost)
	}
	if err := sanity(d, m.s.limit, cost); err != nil {
		t.Fatalf("%s = %s: %v", call, show(d), err)
	}
	if err := k.promised(m, cost, d); err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	if err := k.model.check(m.now, cost, d); err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	now, c := m.now, max(cost, 1)
	k.freshAt = now + d.ResetAfter().Microseconds()
	k.seenAt, k.seenRem = now, d.Remaining()
	if cost > 0 && d.Allowed() {
		k.hist = append(k.hist, admission{now, cost})
		if err := m.s.bound(k.hist); err != nil {
			t.Fatalf("%s: admissions of %s since it was new or reset (cost@instant): %s: %v", call, k.name, m.story(k.hist), err)
		}
		k.retryAt = map[int64]int64{}
		k.denied = 0
		return
	}
	k.retryAt[c] = now + d.RetryAfter().Microseconds()
	if cost > 0 {
		k.denied = cost
	}
}

// promised returns an error if d breaks what decisions made since k last
// changed promised: the instant k becomes fresh, the instant a cost is
// admitted from, and what Remaining said at this same instant.
func (k *keyState) promised(m *machine, cost int64, d ratelimit.Decision) error {
	now, limit, c := m.now, m.s.limit, max(cost, 1)
	changes := cost > 0 && d.Allowed() // d describes a new state
	if now >= k.freshAt {
		if cost == 0 && d != fresh(limit) {
			return fmt.Errorf("got %s, want %s: the key is fresh since %s", show(d), show(fresh(limit)), m.at(k.freshAt))
		}
		if cost > 0 && (!d.Allowed() || d.Remaining() != limit-cost) {
			return fmt.Errorf("got %s, want allowed with remaining=%d: the key is fresh since %s",
				show(d), limit-cost, m.at(k.freshAt))
		}
	} else if want := micros(k.freshAt - now); !changes && d.ResetAfter() != want {
		hint := ""
		if d.ResetAfter() == 0 {
			hint = " (the store forgot the key early; a store expiring keys on a clock of its own, " +
				"such as a Redis TTL, needs a margin: the suite's fake clock stands still while real time passes)"
		}
		return fmt.Errorf("got %s, want reset=%dµs: an earlier decision said the key is fresh at %s, and nothing was admitted since%s",
			show(d), want.Microseconds(), m.at(k.freshAt), hint)
	}
	if at, ok := k.retryAt[c]; ok {
		switch {
		case now >= at && !d.Allowed():
			return fmt.Errorf("got %s, want allowed: an earlier decision said cost %d is admitted from %s on, and nothing was admitted since",
				show(d), c, m.at(at))
		case now < at && (d.Allowed() || d.RetryAfter() != micros(at-now)):
			return fmt.Errorf("got %s, want denied with retry=%dµs: an earlier decision said cost %d is admitted from %s on, and nothing was admitted since",
				show(d), at-now, c, m.at(at))
		}
	}
	if k.seenAt == now {
		switch {
		case cost > 0 && d.Allowed() != (cost <= k.seenRem):
			return fmt.Errorf("got %s, want allowed=%v: an earlier decision at this instant said remaining=%d",
				show(d), cost <= k.seenRem, k.seenRem)
		case !changes && d.Remaining() != k.seenRem:
			return fmt.Errorf("got %s, want remaining=%d as an earlier decision at this instant said",
				show(d), k.seenRem)
		}
	}
	return nil
}
