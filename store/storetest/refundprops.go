package storetest

import (
	"cmp"
	"context"
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

// testRefundAcrossChanges runs random sequences of refundable admissions
// (ReserveN(ctx, key, n, 0)), refunds of them through their Reservations
// (late, twice), refunds by key, Reset, and changes of the limit under
// one name (raised and lowered: SetAlgorithm in place, With, a Limiter
// built anew under the name, each deciding from then on beside the
// others), carried as-is (what was used stays used: the proportional rule
// is for one limit replacing another, and limiters of several limits
// taking turns on a key under it rescale each other's refills), on one
// key; and checks that:
//
//   - a Refund gives back at most the reservation's cost, and nothing
//     after Reset, nor the second time (a reservation made before a
//     refund by key is not refunded by its handle: one way, not both);
//   - the admissions that still count never exceed what the most generous
//     limit the sequence used allows over any span the algorithm bounds
//     (its setup's bound). An admission counts at its instant with its
//     cost, less what its Refund said it gave back; a refund by key of n
//     counts as n given back at its instant; Reset forgets the
//     admissions before it.
//
// Each limiter keeps deciding in its own terms, so a key's state is
// converted back and forth: the check is that no give-back ever hands out
// what a conversion cut, whichever limiter's Reservation it is.
func testRefundAcrossChanges(t *testing.T, k kind, st store.Store[string]) {
	seq := 0
	rapid.Check(t, func(rt *rapid.T) {
		seq++
		base := k.draw(rt)
		rule := algorithm.AsIs
		start := drawStart(rt)
		m := &changeMachine{k: k, base: base, most: base, rule: rule, st: st, start: start, now: start,
			clk: clock.NewFake(time.UnixMicro(start)), name: fmt.Sprintf("ac%d", seq), key: fmt.Sprintf("ac%d", seq)}
		lim, err := ratelimit.New(base.alg, st, m.opts()...)
		if err != nil {
			rt.Fatalf("New(%v): %v", base.alg, err)
		}
		m.lims = []*ratelimit.Limiter[string]{lim}
		m.limits = []int64{base.limit}
		rt.Repeat(map[string]func(*rapid.T){
			"advance": m.capped(m.advance),
			"allow":   m.capped(m.allow),
			"reserve": m.capped(m.reserve),
			"undo":    m.capped(m.undo),
			"refund":  m.capped(m.refund),
			"reset":   m.capped(m.reset),
			"set":     m.capped(m.set),
			"with":    m.capped(m.with),
			"rebuild": m.capped(m.rebuild),
			"":        m.bounded,
		})
	})
}

// changeMachine is one sequence of testRefundAcrossChanges.
type changeMachine struct {
	k          kind
	base, most setup // the first setup, and the most generous used
	rule       algorithm.Rule
	st         store.Store[string]
	clk        *clock.Fake
	start, now int64
	name, key  string
	steps      int
	// lims are the limiters deciding under the name, limits their limits.
	lims   []*ratelimit.Limiter[string]
	limits []int64
	// resv are the reservations made, each with its admission as
	// counted, and the Reset count when it was made.
	resv    []changeResv
	counted []*counted
	resets  int
}

type changeResv struct {
	res    *ratelimit.Reservation[string]
	adm    *counted
	resets int
}

func (m *changeMachine) opts() []ratelimit.Option {
	return []ratelimit.Option{ratelimit.WithClock(m.clk), ratelimit.WithName(m.name), ratelimit.WithInheritance(m.rule)}
}

func (m *changeMachine) capped(action func(*rapid.T)) func(*rapid.T) {
	return func(t *rapid.T) {
		if m.steps < maxSteps {
			action(t)
			m.steps++
		}
	}
}

func (m *changeMachine) at() string { return fmt.Sprintf("+%dµs", m.now-m.start) }

// pick draws one of the limiters.
func (m *changeMachine) pick(t *rapid.T) (int, *ratelimit.Limiter[string]) {
	i := rapid.IntRange(0, len(m.lims)-1).Draw(t, "limiter")
	return i, m.lims[i]
}

// drawSetup draws the base setup with a limit raised or lowered.
func (m *changeMachine) drawSetup(t *rapid.T) setup {
	limit := rapid.OneOf(rapid.Just(m.base.limit), rapid.Just(2*m.base.limit), rapid.Just(max(1, m.base.limit/2)),
		rapid.Int64Range(1, 2*m.base.limit)).Draw(t, "limit")
	s, err := relimit(m.base, limit)
	if err != nil {
		t.Fatalf("the setup of %v with a limit of %d: %v", m.base.alg, limit, err)
	}
	if s.limit > m.most.limit {
		m.most = s
	}
	return s
}

func (m *changeMachine) advance(t *rapid.T) {
	d := drawMove(t, m.base, "advance µs")
	m.clk.Advance(micros(d))
	m.now += d
}

func (m *changeMachine) allow(t *rapid.T) {
	i, lim := m.pick(t)
	cost := rapid.Int64Range(1, m.limits[i]).Draw(t, "cost")
	d, err := lim.AllowN(context.Background(), m.key, int(cost))
	if err != nil {
		t.Fatalf("%s: AllowN(%d) by limiter %d: %v", m.at(), cost, i, err)
	}
	t.Logf("%s: AllowN(%d) by limiter %d (limit %d): %v", m.at(), cost, i, m.limits[i], d)
	if d.Allowed() {
		m.counted = append(m.counted, &counted{at: m.now, cost: cost})
	}
}

func (m *changeMachine) reserve(t *rapid.T) {
	i, lim := m.pick(t)
	cost := rapid.Int64Range(1, m.limits[i]).Draw(t, "cost")
	r, err := lim.ReserveN(context.Background(), m.key, int(cost), 0)
	if err != nil {
		t.Fatalf("%s: ReserveN(%d, 0) by limiter %d: %v", m.at(), cost, i, err)
	}
	t.Logf("%s: ReserveN(%d, 0) by limiter %d (limit %d): ok %v, %v", m.at(), cost, i, m.limits[i], r.OK(), r.Decision())
	if !r.OK() {
		return
	}
	adm := &counted{at: m.now, cost: cost}
	m.counted = append(m.counted, adm)
	m.resv = append(m.resv, changeResv{res: r, adm: adm, resets: m.resets})
}

// undo refunds a reservation through its handle, sometimes twice: what it
// says it gave back no longer counts. Nothing comes back after Reset or
// a second time.
func (m *changeMachine) undo(t *rapid.T) {
	if len(m.resv) == 0 {
		t.Skip("nothing reserved")
	}
	j := rapid.IntRange(0, len(m.resv)-1).Draw(t, "reservation")
	r := m.resv[j]
	given, err := r.res.Refund(context.Background())
	if err != nil {
		t.Fatalf("%s: Refund of %d admitted at %+dµs: %v", m.at(), r.adm.cost, r.adm.at-m.start, err)
	}
	t.Logf("%s: Refund of %d admitted at %+dµs gave back %d", m.at(), r.adm.cost, r.adm.at-m.start, given)
	switch {
	case given < 0 || given > r.adm.cost:
		t.Fatalf("%s: Refund of %d gave back %d", m.at(), r.adm.cost, given)
	case given > 0 && r.resets != m.resets:
		t.Fatalf("%s: Refund of %d admitted before Reset gave back %d, want 0", m.at(), r.adm.cost, given)
	}
	r.adm.cost -= given
	if again, err := r.res.Refund(context.Background()); err != nil || again != 0 {
		t.Fatalf("%s: second Refund gave back %d, %v; want 0", m.at(), again, err)
	}
	if !rapid.Bool().Draw(t, "keep the handle") {
		m.resv = slices.Delete(m.resv, j, j+1)
	}
}

// refund gives back up to n by key: counted as n given back at now.
func (m *changeMachine) refund(t *rapid.T) {
	i, lim := m.pick(t)
	n := rapid.Int64Range(1, m.limits[i]).Draw(t, "refund")
	if _, err := lim.Refund(context.Background(), m.key, int(n)); err != nil {
		t.Fatalf("%s: Refund(%d) by key: %v", m.at(), n, err)
	}
	t.Logf("%s: Refund(%d) by key, limiter %d", m.at(), n, i)
	m.counted = append(m.counted, &counted{at: m.now, cost: -n})
	// A request is refunded one way, by its handle or by key, not both
	// (docs/refunds.md): the key's state cannot tell which charge a refund
	// by key gave back, so the handles of the reservations made before it
	// are not used again. (Both, a seed found, hand a bucket's refill out
	// twice: ReserveN 2, Refund 2 by key, AllowN 1, the reservation's
	// Refund gives back 1 more, on every store alike.)
	m.resv = m.resv[:0]
}

func (m *changeMachine) reset(t *rapid.T) {
	if err := m.lims[0].Reset(context.Background(), m.key); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	t.Logf("%s: Reset", m.at())
	m.resets++
	for _, c := range m.counted {
		c.gone = true
	}
}

// set changes the first limiter's limit in place.
func (m *changeMachine) set(t *rapid.T) {
	s := m.drawSetup(t)
	if err := m.lims[0].SetAlgorithm(s.alg); err != nil {
		t.Fatalf("SetAlgorithm(%v): %v", s.alg, err)
	}
	t.Logf("%s: SetAlgorithm(%v)", m.at(), s.alg)
	m.limits[0] = s.limit
}

// with adds a limiter made by With from one of the limiters.
func (m *changeMachine) with(t *rapid.T) {
	s := m.drawSetup(t)
	i, lim := m.pick(t)
	w, err := lim.With(s.alg)
	if err != nil {
		t.Fatalf("With(%v): %v", s.alg, err)
	}
	t.Logf("%s: limiter %d is limiter %d With(%v)", m.at(), len(m.lims), i, s.alg)
	m.lims, m.limits = append(m.lims, w), append(m.limits, s.limit)
}

// rebuild adds a limiter built anew under the name.
func (m *changeMachine) rebuild(t *rapid.T) {
	s := m.drawSetup(t)
	lim, err := ratelimit.New(s.alg, m.st, m.opts()...)
	if err != nil {
		t.Fatalf("New(%v): %v", s.alg, err)
	}
	t.Logf("%s: limiter %d is New(%v)", m.at(), len(m.lims), s.alg)
	m.lims, m.limits = append(m.lims, lim), append(m.limits, s.limit)
}

// bounded checks the bound of the most generous setup used on the
// admissions still counted, over every span that ends at one.
func (m *changeMachine) bounded(t *rapid.T) {
	var hist []admission
	for _, c := range m.counted {
		if !c.gone && c.cost != 0 {
			hist = append(hist, admission{c.at, c.cost})
		}
	}
	slices.SortStableFunc(hist, func(x, y admission) int {
		if c := cmp.Compare(x.at, y.at); c != 0 {
			return c
		}
		return cmp.Compare(y.cost, x.cost)
	})
	for end := range hist {
		if end+1 < len(hist) && hist[end+1].at == hist[end].at {
			continue
		}
		span := hist[:end+1]
		if roundsToMicros(m.most.alg) {
			// A booking of the continuous bucket may read a µs early (see
			// booking.go's bounded): a µs more per admission in the span.
			span = slices.Clone(span)
			for k := range span {
				span[k].at += int64(k)
			}
		}
		if err := m.most.bound(span); err != nil {
			rel := make([]admission, len(span))
			for k, a := range span {
				rel[k] = admission{a.at - m.start, a.cost}
			}
			t.Fatalf("the bound of %v (the most generous limit used), admissions still counted %v: %v", m.most.alg, rel, err)
		}
	}
}
