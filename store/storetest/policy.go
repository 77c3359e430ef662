package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"pgregory.net/rapid"
)

// testPolicyModel runs random sequences of AllowN, Peek, Reset and clock
// moves on a Policy of two or three limits of random algorithms, and
// checks every limit's decision against that limit's own reference model:
// a request is charged to every model when every limit admitted it, and to
// none otherwise, and a limit that would have admitted a denied request
// reports its state as it stands. The policy's own decision must combine
// the limits' (least Remaining, longest RetryAfter and ResetAfter), and
// every limit's admissions stay within its algorithm's bound.
func testPolicyModel(t *testing.T, st store.Store[string]) {
	seq := 0
	rapid.Check(t, func(rt *rapid.T) {
		seq++
		// Up to 6 limits: past the 4 a PolicyDecision holds inline, and
		// past the states a store keeps on the stack while deciding.
		n := rapid.IntRange(2, 6).Draw(rt, "limits")
		setups := make([]setup, n)
		limits := make([]ratelimit.Limit, n)
		for i := range setups {
			k := kinds[rapid.IntRange(0, len(kinds)-1).Draw(rt, "kind")]
			setups[i] = k.draw(rt)
			// Two limits may be drawn alike; their names must differ.
			limits[i] = ratelimit.Limit{Name: fmt.Sprintf("%s-%d", k.name, i), Algorithm: setups[i].alg}
		}
		start := drawStart(rt)
		clk := clock.NewFake(time.UnixMicro(start))
		p, err := ratelimit.NewPolicy(st, limits, ratelimit.WithName("model"), ratelimit.WithClock(clk))
		if err != nil {
			rt.Fatalf("NewPolicy: %v", err)
		}
		m := &policyMachine{setups: setups, p: p, clk: clk, start: start, now: start}
		for _, name := range []string{"a", "b"} {
			k := &policyKey{name: name, key: fmt.Sprintf("p%d:%s", seq, name)}
			k.forget(start, setups)
			m.keys = append(m.keys, k)
		}
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
			"advance": capped(m.advance),
			"allow": capped(func(t *rapid.T) {
				m.take(t, m.drawKey(t), rapid.Int64Range(1, p.Limit()).Draw(t, "cost"))
			}),
			"allowOne": capped(func(t *rapid.T) { m.take(t, m.drawKey(t), 1) }),
			"peek":     capped(func(t *rapid.T) { m.peek(t, m.drawKey(t)) }),
			"reset":    capped(m.reset),
		})
	})
}

type policyMachine struct {
	setups []setup
	p      *ratelimit.Policy[string]
	clk    *clock.Fake
	start  int64
	now    int64
	keys   []*policyKey
}

// policyKey is what the test knows of one key: a model per limit, and the
// admissions since the key was last reset.
type policyKey struct {
	name   string
	key    string
	models []model
	hist   []admission
}

func (k *policyKey) forget(now int64, setups []setup) {
	k.models = make([]model, len(setups))
	for i, s := range setups {
		k.models[i] = s.newModel(now)
	}
	k.hist = nil
}

func (m *policyMachine) at() string { return fmt.Sprintf("+%dµs", m.now-m.start) }

func (m *policyMachine) drawKey(t *rapid.T) *policyKey {
	return m.keys[rapid.IntRange(0, len(m.keys)-1).Draw(t, "key index")]
}

func (m *policyMachine) advance(t *rapid.T) {
	s := m.setups[rapid.IntRange(0, len(m.setups)-1).Draw(t, "time scale of limit")]
	d := drawMove(t, s, "advance µs")
	m.clk.Advance(micros(d))
	m.now += d
	t.Logf("%s: clock advanced %dµs", m.at(), d)
}

func (m *policyMachine) reset(t *rapid.T) {
	k := m.drawKey(t)
	if err := m.p.Reset(t.Context(), k.key); err != nil {
		t.Fatalf("%s: Reset(%s): %v", m.at(), k.name, err)
	}
	t.Logf("%s: Reset(%s)", m.at(), k.name)
	k.forget(m.now, m.setups)
}

func (m *policyMachine) take(t *rapid.T, k *policyKey, cost int64) {
	d, err := m.p.AllowN(t.Context(), k.key, int(cost))
	if err != nil {
		t.Fatalf("%s: AllowN(%s, %d): %v", m.at(), k.name, cost, err)
	}
	m.observe(t, fmt.Sprintf("%s: AllowN(%s, %d)", m.at(), k.name, cost), k, cost, d)
}

func (m *policyMachine) peek(t *rapid.T, k *policyKey) {
	d, err := m.p.Peek(t.Context(), k.key)
	if err != nil {
		t.Fatalf("%s: Peek(%s): %v", m.at(), k.name, err)
	}
	m.observe(t, fmt.Sprintf("%s: Peek(%s)", m.at(), k.name), k, 0, d)
}

// observe checks d, the answer to AllowN(cost) on k, or to Peek when cost
// is 0, and charges the models when d admitted the request.
func (m *policyMachine) observe(t *rapid.T, call string, k *policyKey, cost int64, d ratelimit.Decision) {
	t.Logf("%s = %s binding=%d", call, show(d), d.Binding())
	if err := checkCombined(d, len(m.setups)); err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	for i, s := range m.setups {
		di := d.Limits()[i]
		t.Logf("  limit %d (%v): %s", i, s.alg, show(di))
		// A limit that would admit a request another limit denied is not
		// charged: it reports its state as a Peek does, and the cost fits.
		asked := cost
		if cost > 0 && !d.Allowed() && di.Allowed() {
			if di.Remaining() < cost {
				t.Fatalf("%s: limit %d: got %s, allowed within a denied request, but remaining < cost %d", call, i, show(di), cost)
			}
			asked = 0
		}
		if err := sanity(di, s.limit, asked); err != nil {
			t.Fatalf("%s: limit %d: %s: %v", call, i, show(di), err)
		}
		if err := k.models[i].check(m.now, asked, di); err != nil {
			t.Fatalf("%s: limit %d (%v): %v", call, i, s.alg, err)
		}
	}
	if cost > 0 && d.Allowed() {
		k.hist = append(k.hist, admission{m.now, cost})
		for i, s := range m.setups {
			if err := s.bound(k.hist); err != nil {
				t.Fatalf("%s: limit %d (%v): admissions since %s was new or reset: %v", call, i, s.alg, k.name, err)
			}
		}
	}
}

// checkCombined returns what is wrong with d as the combination of its
// limits' decisions, or nil.
func checkCombined(d ratelimit.Decision, n int) error {
	if len(d.Limits()) != n {
		return fmt.Errorf("%d limit decisions, want %d", len(d.Limits()), n)
	}
	allowed := true
	var want algorithm.Result
	for i, di := range d.Limits() {
		allowed = allowed && di.Allowed()
		r := algorithm.Result{Remaining: di.Remaining(), RetryAfter: di.RetryAfter().Microseconds(), ResetAfter: di.ResetAfter().Microseconds()}
		if i == 0 {
			want = r
		}
		want.Remaining = min(want.Remaining, r.Remaining)
		want.RetryAfter = max(want.RetryAfter, r.RetryAfter)
		want.ResetAfter = max(want.ResetAfter, r.ResetAfter)
	}
	got := algorithm.Result{Remaining: d.Remaining(), RetryAfter: d.RetryAfter().Microseconds(), ResetAfter: d.ResetAfter().Microseconds()}
	switch {
	case d.Allowed() != allowed:
		return fmt.Errorf("allowed=%v, but the limits' decisions say %v", d.Allowed(), allowed)
	case got != want:
		return fmt.Errorf("combined %+v, want %+v from the limits' decisions", got, want)
	case d.Binding() < 0 || d.Binding() >= n:
		return fmt.Errorf("binding=%d, out of range", d.Binding())
	case d.Limit() != d.Limits()[d.Binding()].Limit():
		return fmt.Errorf("limit=%d, want the binding limit's %d", d.Limit(), d.Limits()[d.Binding()].Limit())
	case !d.Allowed() && d.Limits()[d.Binding()].RetryAfter() != d.RetryAfter():
		return fmt.Errorf("denied, binding=%d retries after %v, want the longest retry %v", d.Binding(), d.Limits()[d.Binding()].RetryAfter(), d.RetryAfter())
	case d.Allowed() && d.Limits()[d.Binding()].Remaining() != d.Remaining():
		return fmt.Errorf("allowed, binding=%d has remaining %d, want the least, %d", d.Binding(), d.Limits()[d.Binding()].Remaining(), d.Remaining())
	}
	return nil
}

// testPolicyConcurrent races goroutines on one key of a three-limit policy
// at a frozen instant, with costs of 1 to 3: the admitted costs add up to
// no more than the tightest limit, every limit is charged exactly the
// admitted total (Peek shows each limit's Limit minus it), and a cost of
// 1 is denied only once less than 1 is left.
func testPolicyConcurrent(t *testing.T, st store.Store[string]) {
	clk := clock.NewFake(time.UnixMicro(epoch))
	limits := policyLimits(t)
	p, err := ratelimit.NewPolicy(st, limits, ratelimit.WithName("concurrent"), ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				cost := int64(1 + (g+i)%3)
				d, err := p.AllowN(t.Context(), "hot", int(cost))
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed() {
					admitted.Add(cost)
				} else if cost == 1 {
					return
				}
			}
		}()
	}
	wg.Wait()
	total := admitted.Load()
	d, err := p.Peek(t.Context(), "hot")
	if err != nil {
		t.Fatal(err)
	}
	if total != 25 || d.Allowed() || d.Binding() != 1 {
		t.Errorf("%d goroutines racing: admitted %d in total, Peek %s binding=%d; want 25 (the bucket's capacity), denied by the bucket (1)",
			goroutines, total, show(d), d.Binding())
	}
	for i, l := range limits {
		if want := l.Algorithm.Limit() - total; d.Limits()[i].Remaining() != want {
			t.Errorf("limit %s after the race: remaining %d, want %d (its limit %d minus the %d admitted)",
				l.Name, d.Limits()[i].Remaining(), want, l.Algorithm.Limit(), total)
		}
	}
}

// testPolicyErrors checks that bad costs and configurations are errors.
func testPolicyErrors(t *testing.T, st store.Store[string]) {
	clk := clock.NewFake(time.UnixMicro(epoch))
	limits := policyLimits(t)
	p, err := ratelimit.NewPolicy(st, limits, ratelimit.WithName("errors"), ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cost int
		want error
	}{{0, ratelimit.ErrInvalidCost}, {-1, ratelimit.ErrInvalidCost}, {26, ratelimit.ErrCostExceedsLimit}} {
		if _, err := p.AllowN(t.Context(), "k", c.cost); !errors.Is(err, c.want) {
			t.Errorf("AllowN(cost %d): %v, want %v", c.cost, err, c.want)
		}
	}
	if d, err := p.Peek(t.Context(), "k"); err != nil || !d.Allowed() || d.Remaining() != 25 {
		t.Errorf("Peek after rejected costs: %s, %v; want nothing charged", show(d), err)
	}
	same := []ratelimit.Limit{limits[0], limits[0]}
	if _, err := ratelimit.NewPolicy(st, same, ratelimit.WithName("errors"), ratelimit.WithClock(clk)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("NewPolicy with a limit twice: %v, want ErrInvalidConfig", err)
	}
	same[1].Name = "again" // p, still live, has same[0] under the same name: one quota
	if _, err := ratelimit.NewPolicy(st, same, ratelimit.WithName("errors"), ratelimit.WithClock(clk)); err != nil {
		t.Errorf("NewPolicy with a limit twice under two names: %v", err)
	}
}
