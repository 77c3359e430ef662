package storetest

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// Names checks the rule that a limit's name is its quota (docs/sharing.md)
// on one store backend reached through two store values: newStores returns
// two store values over one backend, each on a client of its own where the
// store has clients (as two processes' stores are), holding none of the
// keys Names uses; the memory store, whose backend is the Store value,
// returns one Store twice.
//
// For every algorithm Names checks, on a fake clock:
//   - limits of one name share each key's quota, whichever store value
//     each was built on, and limits of other names do not;
//   - the limit "daily" of the Policy "orders" is the quota of a Limiter
//     named "orders/daily", and the Policies "search" and "upload" with
//     limits of the same names and numbers are quotas apart;
//   - a named limit of 10 a minute raised to 100 after 8 were used admits
//     92 more at that instant, not a fresh 100, through Limiter.With,
//     SetAlgorithm, or a Limiter built anew under the name on the other
//     store value while the first lives;
//   - 64 goroutines holding and releasing slots of an in-flight limit of
//     5 under one name, half through each store value, never hold more
//     than 5 at once;
//   - a Limiter built under a name while another of that name lives builds
//     and continues its quota, 200 times in a row, and 20 with runtime.GC
//     between builds.
//
// And for limits without a name, with and without runtime.GC between 200
// rounds of building, dropping and building again: on a store whose
// store.Local says so, two Limiters (or Policies) of equal numbers are two
// quotas, each shared by the Limiters of its With (where a raise after 8
// used admits 92); on any other store New and NewPolicy refuse
// them with an error wrapping ErrInvalidConfig that names WithName.
func Names(t *testing.T, newStores func(t *testing.T) (a, b store.Store[string])) {
	t.Helper()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Run("SameName", func(t *testing.T) { testSameName(t, k, newStores) })
			t.Run("PolicyLimitName", func(t *testing.T) { testPolicyLimitName(t, k, newStores) })
			t.Run("Raise", func(t *testing.T) { testRaise(t, k, newStores) })
		})
	}
	t.Run("RebuildWhileLive", func(t *testing.T) { testRebuildWhileLive(t, newStores) })
	t.Run("Unnamed", func(t *testing.T) { testUnnamed(t, newStores) })
	t.Run("HoldsShared", func(t *testing.T) {
		a, b := newStores(t)
		testHoldsShared(t, a, b)
	})
}

// namesOf builds a Limiter of k admitting n per period under name on st.
func namesOf(t *testing.T, k kind, n int64, period time.Duration, st store.Store[string], opts ...ratelimit.Option) *ratelimit.Limiter[string] {
	t.Helper()
	alg, err := k.per(n, period)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st, opts...)
	if err != nil {
		t.Fatalf("New(%v): %v", alg, err)
	}
	return lim
}

// peekRemaining returns what lim's Peek of key reports left.
func peekRemaining(t *testing.T, lim *ratelimit.Limiter[string], key string) int64 {
	t.Helper()
	d, err := lim.Peek(t.Context(), key)
	if err != nil {
		t.Fatalf("Peek(%q): %v", key, err)
	}
	return d.Remaining()
}

// admitAll counts the requests of cost 1 lim admits for key at the
// clock's instant, up to 1000.
func admitAll(t *testing.T, lim *ratelimit.Limiter[string], key string) int {
	t.Helper()
	for n := range 1000 {
		d, err := lim.Allow(t.Context(), key)
		if err != nil {
			t.Fatalf("Allow(%q) %d: %v", key, n+1, err)
		}
		if !d.Allowed() {
			return n
		}
	}
	return 1000
}

func testSameName(t *testing.T, k kind, newStores func(t *testing.T) (a, b store.Store[string])) {
	a, b := newStores(t)
	clk := ratelimit.WithClock(clock.NewFake(time.UnixMicro(epoch)))
	name := "same:" + k.name
	la := namesOf(t, k, 10, time.Minute, a, clk, ratelimit.WithName(name))
	lb := namesOf(t, k, 10, time.Minute, b, clk, ratelimit.WithName(name))
	other := namesOf(t, k, 10, time.Minute, b, clk, ratelimit.WithName(name+":other"))
	if d, err := la.AllowN(t.Context(), "k", 6); err != nil || !d.Allowed() {
		t.Fatalf("AllowN(6) on the first store value: %s, %v", show(d), err)
	}
	if got := peekRemaining(t, lb, "k"); got != 4 {
		t.Errorf("the same name on the second store value after 6 of 10: %d left, want 4 (one quota)", got)
	}
	if got := admitAll(t, lb, "k"); got != 4 {
		t.Errorf("the same name on the second store value admitted %d, want the 4 left", got)
	}
	if d, err := la.Allow(t.Context(), "k"); err != nil || d.Allowed() {
		t.Errorf("the first store value after the second spent the rest: %s, %v; want denied", show(d), err)
	}
	if got := peekRemaining(t, other, "k"); got != 10 {
		t.Errorf("another name: %d left, want 10 (a quota of its own)", got)
	}
}

func testPolicyLimitName(t *testing.T, k kind, newStores func(t *testing.T) (a, b store.Store[string])) {
	a, b := newStores(t)
	clk := ratelimit.WithClock(clock.NewFake(time.UnixMicro(epoch)))
	limits := func() []ratelimit.Limit {
		burst, err1 := k.per(1000, time.Minute)
		daily, err2 := k.per(100, 24*time.Hour)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		return []ratelimit.Limit{{Name: "burst", Algorithm: burst}, {Name: "daily", Algorithm: daily}}
	}
	prefix := "policy:" + k.name + ":"
	orders, err := ratelimit.NewPolicy(a, limits(), clk, ratelimit.WithName(prefix+"orders"))
	if err != nil {
		t.Fatal(err)
	}
	daily := namesOf(t, k, 100, 24*time.Hour, b, clk, ratelimit.WithName(prefix+"orders/daily"))
	if d, err := orders.AllowN(t.Context(), "k", 5); err != nil || !d.Allowed() {
		t.Fatalf("the Policy's AllowN(5): %s, %v", show(d), err)
	}
	if got := peekRemaining(t, daily, "k"); got != 95 {
		t.Errorf("the Limiter named as the Policy's limit after the Policy's 5: %d left, want 95", got)
	}
	if d, err := daily.AllowN(t.Context(), "k", 95); err != nil || !d.Allowed() {
		t.Fatalf("the Limiter's AllowN(95): %s, %v", show(d), err)
	}
	if d, err := orders.Allow(t.Context(), "k"); err != nil || d.Allowed() || d.Binding() != 1 {
		t.Errorf("the Policy after the Limiter spent its daily quota: %s binding %d, %v; want denied by daily", show(d), d.Binding(), err)
	}
	search, err1 := ratelimit.NewPolicy(a, limits(), clk, ratelimit.WithName(prefix+"search"))
	upload, err2 := ratelimit.NewPolicy(b, limits(), clk, ratelimit.WithName(prefix+"upload"))
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if d, err := search.AllowN(t.Context(), "k", 100); err != nil || !d.Allowed() {
		t.Fatalf("search's AllowN(100): %s, %v", show(d), err)
	}
	d, err := upload.Peek(t.Context(), "k")
	if err != nil || d.Limits()[0].Remaining() != 1000 || d.Limits()[1].Remaining() != 100 {
		t.Errorf("upload after search spent its day: %s, %v; want 1000 and 100 left (four quotas, not two)", show(d), err)
	}
}

// testRaise raises a named limit of 10 a minute to 100 after 8 were used:
// what was used stays used.
func testRaise(t *testing.T, k kind, newStores func(t *testing.T) (a, b store.Store[string])) {
	a, b := newStores(t)
	clk := ratelimit.WithClock(clock.NewFake(time.UnixMicro(epoch)))
	hundred, err := k.per(100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		raise func(lim *ratelimit.Limiter[string], name string) (*ratelimit.Limiter[string], error)
	}{
		{"With", func(lim *ratelimit.Limiter[string], _ string) (*ratelimit.Limiter[string], error) {
			return lim.With(hundred)
		}},
		{"SetAlgorithm", func(lim *ratelimit.Limiter[string], _ string) (*ratelimit.Limiter[string], error) {
			return lim, lim.SetAlgorithm(hundred)
		}},
		{"New", func(_ *ratelimit.Limiter[string], name string) (*ratelimit.Limiter[string], error) {
			return ratelimit.New(hundred, b, clk, ratelimit.WithName(name))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "raise:" + k.name + ":" + c.name
			lim := namesOf(t, k, 10, time.Minute, a, clk, ratelimit.WithName(name))
			if d, err := lim.AllowN(t.Context(), "k", 8); err != nil || !d.Allowed() {
				t.Fatalf("AllowN(8) of 10: %s, %v", show(d), err)
			}
			raised, err := c.raise(lim, name)
			if err != nil {
				t.Fatal(err)
			}
			if got := admitAll(t, raised, "k"); got != 92 {
				t.Errorf("raised to 100 a minute after 8 of 10 used: %d admitted, want 92 (what was used stays used)", got)
			}
			runtime.KeepAlive(lim)
		})
	}
}

// testRebuildWhileLive builds a Limiter under a name while another of
// that name lives, on the other store value: it continues the quota. Then
// Limiters built in turn under one name, each admitting one request, 200
// of them, and 20 with a collection before each, admit the limit in all.
func testRebuildWhileLive(t *testing.T, newStores func(t *testing.T) (a, b store.Store[string])) {
	a, b := newStores(t)
	clk := ratelimit.WithClock(clock.NewFake(time.UnixMicro(epoch)))
	k := kinds[0]
	first := namesOf(t, k, 10, time.Minute, a, clk, ratelimit.WithName("rebuild"))
	if d, err := first.AllowN(t.Context(), "k", 5); err != nil || !d.Allowed() {
		t.Fatalf("AllowN(5) of 10: %s, %v", show(d), err)
	}
	second := namesOf(t, k, 10, time.Minute, b, clk, ratelimit.WithName("rebuild"))
	if got := peekRemaining(t, second, "k"); got != 5 {
		t.Errorf("rebuilt while the first lives: %d left, want the first's 5", got)
	}
	if got := admitAll(t, second, "k"); got != 5 {
		t.Errorf("rebuilt while the first lives: %d admitted, want 5", got)
	}
	if d, err := first.Allow(t.Context(), "k"); err != nil || d.Allowed() {
		t.Errorf("the first after the rebuilt one spent the rest: %s, %v; want denied", show(d), err)
	}
	for _, gc := range []bool{false, true} {
		admitted, rounds := 0, 200
		if gc {
			rounds = 20 // a collection costs milliseconds
		}
		for round := range rounds {
			if gc {
				runtime.GC()
			}
			st := a
			if round%2 == 1 {
				st = b
			}
			lim := namesOf(t, k, 10, time.Minute, st, clk, ratelimit.WithName("rounds"))
			d, err := lim.Allow(t.Context(), fmt.Sprint("gc=", gc))
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if d.Allowed() {
				admitted++
			}
		}
		if admitted != 10 {
			t.Errorf("%d Limiters built in turn under one name (runtime.GC between: %v): %d admitted, want the limit, 10", rounds, gc, admitted)
		}
	}
}

// testUnnamed checks what limits without a name are on the store: quotas
// of their own on a store.Local store, refused on any other.
func testUnnamed(t *testing.T, newStores func(t *testing.T) (a, b store.Store[string])) {
	a, _ := newStores(t)
	l, ok := a.(store.Local)
	local := ok && l.Local()
	clk := ratelimit.WithClock(clock.NewFake(time.UnixMicro(epoch)))
	k := kinds[0]
	alg := func(n int64) algorithm.Algorithm {
		alg, err := k.per(n, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return alg
	}
	for _, gc := range []bool{false, true} {
		for round := range 200 {
			if gc {
				runtime.GC()
			}
			key := fmt.Sprintf("u:%v:%d", gc, round)
			lim, err := ratelimit.New(alg(10), a, clk)
			twin, errTwin := ratelimit.New(alg(10), a, clk)
			p, errP := ratelimit.NewPolicy(a, []ratelimit.Limit{{Algorithm: alg(10)}}, clk)
			if !local {
				for what, err := range map[string]error{"New": err, "New again": errTwin, "NewPolicy": errP} {
					if !errors.Is(err, ratelimit.ErrInvalidConfig) || !strings.Contains(fmt.Sprint(err), "WithName") {
						t.Fatalf("round %d (runtime.GC between: %v): %s without a name on a %T: %v; want ErrInvalidConfig naming WithName", round, gc, what, a, err)
					}
				}
				continue
			}
			if err := errors.Join(err, errTwin, errP); err != nil {
				t.Fatalf("round %d (runtime.GC between: %v): without a name on a local store: %v", round, gc, err)
			}
			if d, err := lim.AllowN(t.Context(), key, 10); err != nil || !d.Allowed() {
				t.Fatalf("round %d (runtime.GC between: %v): a new unnamed Limiter's AllowN(10): %s, %v; want a fresh quota", round, gc, show(d), err)
			}
			if got := peekRemaining(t, twin, key); got != 10 {
				t.Fatalf("round %d (runtime.GC between: %v): an unnamed twin after the first spent 10: %d left, want 10", round, gc, got)
			}
			if d, err := p.Peek(t.Context(), key); err != nil || d.Remaining() != 10 {
				t.Fatalf("round %d (runtime.GC between: %v): an unnamed Policy of equal numbers: %s, %v; want 10 left", round, gc, show(d), err)
			}
		}
	}
	if !local {
		return
	}
	// The Limiters of an unnamed Limiter's With share its quota, and
	// those of another's share the other's.
	base, err1 := ratelimit.New(alg(10), a, clk)
	other, err2 := ratelimit.New(alg(10), a, clk)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if d, err := base.AllowN(t.Context(), "w", 8); err != nil || !d.Allowed() {
		t.Fatalf("AllowN(8) of 10: %s, %v", show(d), err)
	}
	raised, err1 := base.With(alg(100))
	otherRaised, err2 := other.With(alg(100))
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if got := admitAll(t, raised, "w"); got != 92 {
		t.Errorf("an unnamed Limiter's With raised to 100 after 8 of 10 used: %d admitted, want 92", got)
	}
	if got := peekRemaining(t, otherRaised, "w"); got != 100 {
		t.Errorf("another unnamed Limiter's With: %d left, want 100 (its own quota)", got)
	}
}
