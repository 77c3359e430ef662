package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// burstAndHour is a policy's limits: a token bucket of 2 refilled at 1 per
// second ("burst") and a fixed window of 5 per hour ("hourly").
func burstAndHour(t testing.TB) []ratelimit.Limit {
	t.Helper()
	hourly, err := fixedwindow.New(fixedwindow.Config{Limit: 5, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return []ratelimit.Limit{
		{Name: "burst", Algorithm: mustBucket(t, tokenbucket.Config{Capacity: 2, Rate: 1})},
		{Name: "hourly", Algorithm: hourly},
	}
}

func newPolicy(t testing.TB, st store.Store[string], opts ...ratelimit.Option) (*ratelimit.Policy[string], *clock.Fake) {
	t.Helper()
	fake := clock.NewFake(t0)
	p, err := ratelimit.NewPolicy(st, burstAndHour(t), append([]ratelimit.Option{ratelimit.WithClock(fake)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

func TestPolicyBindingLimit(t *testing.T) {
	ctx := context.Background()
	p, fake := newPolicy(t, memorystore.New[string]())
	if p.Limit() != 2 {
		t.Fatalf("Limit() = %d, want 2, the smaller limit", p.Limit())
	}
	type want struct {
		allowed         bool
		binding         int
		burst, hourly   int64 // remaining
		retry           time.Duration
		burstOK, hourOK bool
	}
	step := func(what string, w want) {
		t.Helper()
		d, err := p.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		got := want{d.Allowed(), d.Binding(), d.Limits()[0].Remaining(), d.Limits()[1].Remaining(), d.RetryAfter(), d.Limits()[0].Allowed(), d.Limits()[1].Allowed()}
		if got != w {
			t.Fatalf("%s: got %+v, want %+v", what, got, w)
		}
		if d.Source() != ratelimit.FromStore || d.Limit() != d.Limits()[d.Binding()].Limit() {
			t.Fatalf("%s: Source %v, Limit %d; want the store, the binding limit's %d", what, d.Source(), d.Limit(), d.Limits()[d.Binding()].Limit())
		}
	}
	step("first", want{true, 0, 1, 4, 0, true, true})
	step("second", want{true, 0, 0, 3, 0, true, true})
	// The burst denies; the hour would admit, and is not charged.
	step("third", want{false, 0, 0, 3, time.Second, false, true})
	fake.Advance(time.Second)
	step("a second later", want{true, 0, 0, 2, 0, true, true})
	fake.Advance(2 * time.Second)
	step("refilled", want{true, 1, 1, 1, 0, true, true}) // a tie: the hour takes longer to be fresh
	step("last of the hour", want{true, 1, 0, 0, 0, true, true})
	fake.Advance(10 * time.Second)
	// Both deny now; the hour asks to wait longest and binds.
	d, err := p.Allow(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed() || d.Binding() != 1 || d.Limits()[0].Allowed() == false || d.RetryAfter() != d.Limits()[1].RetryAfter() {
		t.Fatalf("hour spent: got %+v, want denied by the hour", d)
	}
	hourEnds := t0.Truncate(time.Hour).Add(time.Hour).Sub(fake.Now())
	if d.RetryAfter() != hourEnds {
		t.Errorf("hour spent: RetryAfter %v, want %v, the end of the hour", d.RetryAfter(), hourEnds)
	}
	if err := p.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if d, _ := p.Peek(ctx, "k"); !d.Allowed() || d.Limits()[0].Remaining() != 2 || d.Limits()[1].Remaining() != 5 {
		t.Errorf("after Reset: %+v, want both limits fresh", d)
	}
}

func TestPolicyWaitsForEveryLimit(t *testing.T) {
	ctx := context.Background()
	p, fake := newPolicy(t, memorystore.New[string]())
	if _, err := p.AllowN(ctx, "k", 2); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		d, err := p.WaitN(ctx, "k", 2)
		if err == nil && !d.Allowed() {
			err = errors.New("WaitN returned a denial")
		}
		done <- err
	}()
	fake.BlockUntilTimers(1)
	fake.Advance(2*time.Second - time.Microsecond)
	select {
	case err := <-done:
		t.Fatalf("WaitN returned %v before the bucket refilled", err)
	case <-time.After(20 * time.Millisecond):
	}
	fake.Advance(time.Microsecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestPolicyCostChecks(t *testing.T) {
	ctx := context.Background()
	p, _ := newPolicy(t, memorystore.New[string]())
	if _, err := p.AllowN(ctx, "k", 3); !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
		t.Errorf("AllowN(3) with a burst of 2: %v, want ErrCostExceedsLimit", err)
	}
	if _, err := p.WaitN(ctx, "k", 3); !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
		t.Errorf("WaitN(3) with a burst of 2: %v, want ErrCostExceedsLimit at once", err)
	}
	if _, err := p.AllowN(ctx, "k", 0); !errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Errorf("AllowN(0): %v, want ErrInvalidCost", err)
	}
	if d, _ := p.Peek(ctx, "k"); d.Limits()[0].Remaining() != 2 || d.Limits()[1].Remaining() != 5 {
		t.Errorf("after refused costs: %+v, want nothing charged", d)
	}
}

func TestNewPolicyRejects(t *testing.T) {
	st := memorystore.New[string]()
	limits := burstAndHour(t)
	for name, c := range map[string]struct {
		st     store.Store[string]
		limits []ratelimit.Limit
		opts   []ratelimit.Option
	}{
		"no limits":     {st, nil, nil},
		"nil store":     {nil, limits, nil},
		"nil algorithm": {st, []ratelimit.Limit{limits[0], {Name: "x"}}, nil},
		"same names":    {st, []ratelimit.Limit{limits[0], {Name: "burst", Algorithm: limits[1].Algorithm}}, nil},
		"empty name":    {st, limits, []ratelimit.Option{ratelimit.WithName("")}},
		"name with '/'": {st, []ratelimit.Limit{{Name: "a/b", Algorithm: limits[0].Algorithm}}, nil},
		"bad policy":    {st, limits, []ratelimit.Option{ratelimit.WithFailurePolicy(99)}},
	} {
		if _, err := ratelimit.NewPolicy(c.st, c.limits, c.opts...); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	got, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Algorithm: limits[0].Algorithm}, {Algorithm: limits[1].Algorithm}})
	if err != nil {
		t.Fatal(err)
	}
	named := got.Limits()
	if named[0].Name != "limit1" || named[1].Name != "limit2" {
		t.Errorf("default names: %+v", named)
	}
}

// downStore is a store whose backend is down.
type downStore struct{}

func (downStore) Open([]store.Limit, clock.Clock) (store.Table[string], error) {
	return downStore{}, nil
}
func (downStore) Take(context.Context, string, int64, int64, []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{}, errors.Join(store.ErrUnavailable, errors.New("connection refused"))
}
func (downStore) Peek(ctx context.Context, k string, now int64, out []algorithm.Result) (algorithm.Result, error) {
	return downStore{}.Take(ctx, k, now, 1, out)
}
func (downStore) Reset(context.Context, string) error { return store.ErrUnavailable }

func TestPolicyFailurePolicies(t *testing.T) {
	ctx := context.Background()
	if p, _ := newPolicy(t, downStore{}, ratelimit.WithName("down")); true {
		if _, err := p.Allow(ctx, "k"); !errors.Is(err, ratelimit.ErrStoreUnavailable) {
			t.Errorf("FailWithError: %v, want ErrStoreUnavailable", err)
		}
	}
	p, _ := newPolicy(t, downStore{}, ratelimit.WithName("down"), ratelimit.WithFailurePolicy(ratelimit.FailOpen))
	d, err := p.AllowN(ctx, "k", 2)
	if err != nil || !d.Allowed() || d.Source() != ratelimit.FromFailOpen || d.Limits()[0].Remaining() != 2 || d.Limits()[1].Remaining() != 5 || d.Limits()[1].Source() != ratelimit.FromFailOpen {
		t.Errorf("FailOpen: %+v, %v; want allowed, every limit full, from fail-open", d, err)
	}
	p, _ = newPolicy(t, downStore{}, ratelimit.WithName("down"), ratelimit.WithFailurePolicy(ratelimit.FailClosed))
	d, err = p.Allow(ctx, "k")
	if err != nil || d.Allowed() || d.Source() != ratelimit.FromFailClosed || d.RetryAfter() != time.Second || d.Limits()[1].Allowed() {
		t.Errorf("FailClosed: %+v, %v; want denied by every limit, retry after %v", d, err, time.Second)
	}
	// FailLocal decides with both limits in memory: the burst denies the
	// third request, and nothing is charged to the hour for it.
	p, _ = newPolicy(t, downStore{}, ratelimit.WithName("down"), ratelimit.WithFailurePolicy(ratelimit.FailLocal))
	for i, want := range []bool{true, true, false} {
		d, err := p.Allow(ctx, "k")
		if err != nil || d.Allowed() != want || d.Source() != ratelimit.FromLocal {
			t.Fatalf("FailLocal request %d: %+v, %v; want allowed=%v from local", i+1, d, err, want)
		}
		if i == 2 && (d.Binding() != 0 || d.Limits()[1].Remaining() != 3) {
			t.Errorf("FailLocal denial: %+v; want the burst binding, the hour at 3", d)
		}
	}
}

func TestPolicyAndLimiterAllocateNothing(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLimiter[string](t, mustBucket(t, tokenbucket.Config{Capacity: 1e9, Rate: 1e9}))
	if n := testing.AllocsPerRun(1000, func() { lim.Allow(ctx, "k") }); n != 0 {
		t.Errorf("Limiter.Allow: %v allocations, want 0", n)
	}
	// Of several limits, a decision allocates room for theirs, which
	// AllowNInto reuses.
	p, _ := newPolicy(t, memorystore.New[string]())
	var d ratelimit.Decision
	if n := testing.AllocsPerRun(1000, func() { p.AllowNInto(ctx, "k", 1, &d) }); n != 0 {
		t.Errorf("AllowNInto of several limits: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { p.Allow(ctx, "k") }); n != 1 {
		t.Errorf("Allow of several limits: %v allocations, want 1", n)
	}
	if n := testing.AllocsPerRun(1000, func() { p.Peek(ctx, "k") }); n != 1 {
		t.Errorf("Peek of several limits: %v allocations, want 1", n)
	}
}

// A policy of more limits than a PolicyDecision holds in itself decides
// as any other, and each decision is a value of its own.
func TestPolicyOfManyLimits(t *testing.T) {
	ctx := context.Background()
	var limits []ratelimit.Limit
	for i := range 6 {
		limits = append(limits, ratelimit.Limit{Algorithm: mustBucket(t, tokenbucket.Config{Capacity: int64(10 + i), Rate: 1e-3})})
	}
	p, err := ratelimit.NewPolicy(memorystore.New[string](), limits)
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.AllowN(ctx, "k", 3)
	if err != nil {
		t.Fatal(err)
	}
	second, err := p.AllowN(ctx, "k", 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range [][]ratelimit.Decision{first.Limits(), second.Limits()} {
		if len(d) != 6 {
			t.Fatalf("decision %d: %d limit decisions, want 6", i+1, len(d))
		}
		for j, dj := range d {
			if want := int64(10+j) - 3*int64(i+1); !dj.Allowed() || dj.Remaining() != want {
				t.Errorf("decision %d, limit %d: %+v, want allowed with %d left", i+1, j, dj, want)
			}
		}
	}
	if first.Binding() != 0 || second.Remaining() != 4 {
		t.Errorf("second decision %+v: want limit 0 binding with 4 left", second)
	}
	// Limits is the decision's own: changing it changes the decision.
	small := mustPolicyDecision(t, ctx)
	changed := ratelimit.DecisionFields{Remaining: -1}.Decision()
	small.Limits()[0] = changed
	if small.Limits()[0] != changed {
		t.Error("Limits() of a small policy's decision is not the decision's own storage")
	}
}

func mustPolicyDecision(t *testing.T, ctx context.Context) ratelimit.Decision {
	t.Helper()
	p, _ := newPolicy(t, memorystore.New[string]())
	d, err := p.Allow(ctx, "k")
	if err != nil || len(d.Limits()) != 2 {
		t.Fatalf("Allow: %+v, %v; want 2 limit decisions", d, err)
	}
	return d
}

func TestPolicyObserverAndDryRun(t *testing.T) {
	ctx := context.Background()
	var events []ratelimit.Event
	obs := func(_ context.Context, e ratelimit.Event) { events = append(events, e) }
	p, _ := newPolicy(t, memorystore.New[string](), ratelimit.WithObserver(obs), ratelimit.WithName("route"), ratelimit.WithDryRun())
	for range 3 {
		if _, err := p.Allow(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	d, err := p.Allow(ctx, "k")
	if err != nil || !d.Allowed() || !d.DryRunDenied() || !d.Limits()[0].DryRunDenied() || d.Limits()[1].DryRunDenied() || d.RetryAfter() == 0 {
		t.Errorf("a dry-run denial by the burst: %+v, %v; want admitted, marked on the policy and the burst only, with its RetryAfter", d, err)
	}
	if len(events) != 4 || events[3].Name != "route" || events[3].Allowed || !events[3].DryRun || !events[0].Allowed {
		t.Errorf("events: %+v; want 4, the last denied in dry run, named route", events)
	}
	if _, err := p.Peek(ctx, "k"); err != nil || len(events) != 5 || events[4].Op != ratelimit.OpPeek {
		t.Errorf("Peek: %v, events %d; want a peek event", err, len(events))
	}
}

func TestPolicyBreaker(t *testing.T) {
	ctx := context.Background()
	st := &faultStore{next: memorystore.New[string]()}
	p, _ := newPolicy(t, st, ratelimit.WithFailurePolicy(ratelimit.FailOpen),
		ratelimit.WithBreaker(ratelimit.Breaker{Failures: 2, ProbeInterval: time.Second}))
	st.down.Store(true)
	for i := range 4 {
		d, err := p.Allow(ctx, "k")
		if err != nil || !d.Allowed() || d.Source() != ratelimit.FromFailOpen || d.BreakerOpen() != (i >= 2) {
			t.Fatalf("request %d with the store down: %+v, %v; want fail-open, the breaker open from the third", i+1, d, err)
		}
	}
	if n := st.calls.Load(); n != 2 {
		t.Errorf("the store was asked %d times, want 2 (then the breaker opened)", n)
	}
	if _, err := ratelimit.NewPolicy(memorystore.New[string](), burstAndHour(t), ratelimit.WithDenialCache(8)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("NewPolicy with a denial cache: %v, want ErrInvalidConfig", err)
	}
}

// AllowNInto leaves in d exactly what AllowN returns, whatever d held
// before: a decision of a policy of more limits (spilled beyond what a
// PolicyDecision holds in itself), of fewer, or an error's zero decision.
// Two policies alike, on clocks alike, take the same requests: one through
// AllowN, the other through AllowNInto into one reused d.
func TestPolicyAllowNIntoIsAllowN(t *testing.T) {
	ctx := context.Background()
	bucket := func(c int64) ratelimit.Limit {
		return ratelimit.Limit{Algorithm: mustBucket(t, tokenbucket.Config{Capacity: c, Rate: 1})}
	}
	hourly, err := fixedwindow.New(fixedwindow.Config{Limit: 4, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	shapes := map[string][]ratelimit.Limit{
		"one":  {bucket(3)},
		"two":  {bucket(3), {Algorithm: hourly}},
		"four": {bucket(3), bucket(4), bucket(5), {Algorithm: hourly}},
		"six":  {bucket(3), bucket(4), bucket(5), bucket(6), bucket(7), {Algorithm: hourly}},
	}
	type pair struct {
		byValue, into *ratelimit.Policy[string]
		clocks        [2]*clock.Fake
	}
	pairs := map[string]pair{}
	for name, limits := range shapes {
		var p pair
		for i, dst := range []**ratelimit.Policy[string]{&p.byValue, &p.into} {
			p.clocks[i] = clock.NewFake(t0)
			if *dst, err = ratelimit.NewPolicy(memorystore.New[string](), limits, ratelimit.WithClock(p.clocks[i]),
				ratelimit.WithDryRun()); err != nil {
				t.Fatal(err)
			}
		}
		pairs[name] = p
	}
	var d ratelimit.Decision // reused by every call below
	var seen [3]int          // admitted, denied, errors
	steps := []struct {
		shape string
		cost  int
	}{
		{"six", 1}, {"two", 1}, {"six", 2}, {"one", 1}, {"four", 3}, {"two", 0}, {"six", 4},
		{"two", 2}, {"four", 2}, {"one", 9}, {"two", 1}, {"one", 1}, {"six", 1}, {"four", 1},
	}
	for i, s := range steps {
		p := pairs[s.shape]
		want, wantErr := p.byValue.AllowN(ctx, "k", s.cost)
		err := p.into.AllowNInto(ctx, "k", s.cost, &d)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("step %d (%s, cost %d): error %v, AllowN's %v", i, s.shape, s.cost, err, wantErr)
		}
		switch {
		case err != nil:
			seen[2]++
		case d.DryRunDenied():
			seen[1]++
		default:
			seen[0]++
		}
		if !reflect.DeepEqual(d, want) {
			t.Fatalf("step %d (%s, cost %d): AllowNInto left\n%+v\nAllowN returned\n%+v", i, s.shape, s.cost, d, want)
		}
		for _, c := range p.clocks {
			c.Advance(300 * time.Millisecond)
		}
	}
	if seen[0] == 0 || seen[1] == 0 || seen[2] == 0 {
		t.Fatalf("%d admitted, %d denied (in dry run), %d errors: the steps no longer cover all three", seen[0], seen[1], seen[2])
	}
	p := pairs["two"].into
	if n := testing.AllocsPerRun(1000, func() { p.AllowNInto(ctx, "k", 1, &d) }); n != 0 {
		t.Errorf("AllowNInto: %v allocations, want 0", n)
	}
	down, _ := newPolicy(t, downStore{}, ratelimit.WithName("down"))
	if err := down.AllowNInto(ctx, "k", 1, &d); !errors.Is(err, ratelimit.ErrStoreUnavailable) || !reflect.DeepEqual(d, ratelimit.Decision{}) {
		t.Errorf("AllowNInto with the store down: %+v, %v; want the zero decision, ErrStoreUnavailable", d, err)
	}
}

// What applies to a Limiter of one limit alone refuses one of several
// with ErrInvalidConfig, and a Limiter of one limit reports it as its
// Limits, its decision as its only limit's.
func TestSeveralLimitsRefuseWithAndAllowAll(t *testing.T) {
	ctx := context.Background()
	p, _ := newPolicy(t, memorystore.New[string]())
	if w, err := p.With(mustBucket(t, tokenbucket.Config{Capacity: 5, Rate: 1})); w != nil || !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("With on a Limiter of two limits: %v, %v; want ErrInvalidConfig", w, err)
	}
	ok, err := ratelimit.AllowAll(ctx, []ratelimit.Request[string]{{Limiter: p, Key: "k", N: 1}})
	if ok || !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("AllowAll of a Limiter of two limits: %v, %v; want ErrInvalidConfig", ok, err)
	}
	alg := mustBucket(t, tokenbucket.Config{Capacity: 5, Rate: 1})
	lim, _ := newLimiter[string](t, alg)
	if ls := lim.Limits(); len(ls) != 1 || ls[0].Algorithm != alg || ls[0].Name != "" {
		t.Errorf("Limits of a Limiter of one limit: %+v, want its algorithm, unnamed", ls)
	}
	d, err := lim.Allow(ctx, "k")
	if ls := d.Limits(); err != nil || ls != nil || d.Binding() != 0 {
		t.Errorf("a decision of one limit: %v, Limits %v, Binding %d; want nil, 0", d, ls, d.Binding())
	}
}

// DryRun of a decision of several limits leaves the decision it was
// called on as it was, its limits' decisions too.
func TestPolicyDryRunLeavesTheDecision(t *testing.T) {
	ctx := context.Background()
	p, _ := newPolicy(t, memorystore.New[string]())
	var d ratelimit.Decision
	for d.Allowed() || d.Limit() == 0 {
		var err error
		if d, err = p.Allow(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	dry := d.DryRun()
	if !dry.Allowed() || !dry.DryRunDenied() || !dry.Limits()[dry.Binding()].DryRunDenied() {
		t.Errorf("DryRun: %v, binding limit %v; want admitted, marked", dry, dry.Limits()[dry.Binding()])
	}
	if d.Allowed() || d.DryRunDenied() || d.Limits()[d.Binding()].Allowed() || d.Limits()[d.Binding()].DryRunDenied() {
		t.Errorf("after DryRun, the decision it was called on: %v, binding limit %v; want denied, unmarked", d, d.Limits()[d.Binding()])
	}
}
