package ratelimit_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// wrapped is a store wrapping another, as a user's instrumentation does:
// its Local says what the wrapped store says when forward is set, and it
// has no Local of its own otherwise.
type wrapped struct{ next store.Store[string] }

func (w *wrapped) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	return w.next.Open(limits, clk)
}

type forwarding struct{ wrapped }

func (f *forwarding) Local() bool { return localOf(f.next) }

// Two unnamed limits of 10 on two wrappers of one memory store are two
// quotas when the wrappers say the store is local, and refused when they
// do not say: never one quota of 10 shared (5 + 5), however often they are
// built, collected or not.
func TestUnnamedOnWrappedStores(t *testing.T) {
	ctx := context.Background()
	alg := mustBucket(t, tokenbucket.Config{Capacity: 10, Rate: 1e-6})
	mem := memorystore.New[string]()
	for _, gc := range []bool{false, true} {
		for round := range 200 {
			if gc {
				runtime.GC()
			}
			a, errA := ratelimit.New[string](alg, &forwarding{wrapped{mem}})
			b, errB := ratelimit.New[string](alg, &forwarding{wrapped{mem}})
			if err := errors.Join(errA, errB); err != nil {
				t.Fatalf("round %d (GC %v): unnamed on a forwarding wrapper of a memory store: %v", round, gc, err)
			}
			if d, err := a.AllowN(ctx, "k", 10); err != nil || !d.Allowed() {
				t.Fatalf("round %d (GC %v): AllowN(10) = %v, %v; want a fresh quota", round, gc, d, err)
			}
			if d, err := b.Peek(ctx, "k"); err != nil || d.Remaining() != 10 {
				t.Fatalf("round %d (GC %v): the other wrapper's limit after 10 used: %v, %v; want 10 left", round, gc, d, err)
			}
			_, err := ratelimit.New[string](alg, &wrapped{mem})
			if !errors.Is(err, ratelimit.ErrInvalidConfig) || !strings.Contains(err.Error(), "WithName") {
				t.Fatalf("round %d (GC %v): unnamed on a store that is not store.Local: %v; want ErrInvalidConfig naming WithName", round, gc, err)
			}
		}
	}
	named, err := ratelimit.New[string](alg, &wrapped{mem}, ratelimit.WithName("api"))
	if err != nil {
		t.Fatal(err)
	}
	if named.Name() != "api" {
		t.Errorf("Name() = %q, want api", named.Name())
	}
}

// The refusal of an unnamed limit says what to do, for a Limiter and for a
// Policy.
func TestUnnamedRefusal(t *testing.T) {
	alg := mustBucket(t, tokenbucket.Config{Capacity: 10, Rate: 1})
	_, err := ratelimit.New[string](alg, downStore{})
	want := "ratelimit: invalid config: a Limiter on a ratelimit_test.downStore needs a name: that store may be shared with other processes or store values, " +
		"where a limit's name is its quota; give it one with WithName, the same wherever it is to be shared"
	if !errors.Is(err, ratelimit.ErrInvalidConfig) || err.Error() != want {
		t.Errorf("New unnamed on a remote store:\n got %v\nwant %s", err, want)
	}
	_, err = ratelimit.NewPolicy[string](downStore{}, []ratelimit.Limit{{Algorithm: alg}})
	if !errors.Is(err, ratelimit.ErrInvalidConfig) || !strings.Contains(err.Error(), "a Policy on a ratelimit_test.downStore needs a name") {
		t.Errorf("NewPolicy unnamed on a remote store: %v", err)
	}
}

// Names are non-empty UTF-8 of at most 256 bytes without control
// characters; a Policy's limits' names hold no '/', and the quota's name
// (the Policy's, '/', the limit's) is at most 256 bytes too.
func TestNameRules(t *testing.T) {
	alg := mustBucket(t, tokenbucket.Config{Capacity: 10, Rate: 1})
	st := memorystore.New[string]()
	long := strings.Repeat("n", 256)
	for _, name := range []string{"", long + "x", "a\xffb", "tab\there", "nul\x00", "del\x7f", "c1\u0085"} {
		if _, err := ratelimit.New[string](alg, st, ratelimit.WithName(name)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("New with the name %q: %v, want ErrInvalidConfig", name, err)
		}
		if _, err := ratelimit.NewPolicy[string](st, []ratelimit.Limit{{Algorithm: alg}}, ratelimit.WithName(name)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("NewPolicy with the name %q: %v, want ErrInvalidConfig", name, err)
		}
	}
	for _, name := range []string{long, "orders/daily", "客户", "a b", "{braces}"} {
		if _, err := ratelimit.New[string](alg, st, ratelimit.WithName(name)); err != nil {
			t.Errorf("New with the name %q: %v", name, err)
		}
	}
	for _, c := range []struct {
		policy, limit string
		ok            bool
	}{
		{"orders", "daily", true},
		{"orders", "a/b", false},
		{"orders", "\x00", false},
		{strings.Repeat("p", 200), strings.Repeat("l", 55), true}, // 256 bytes with the '/'
		{strings.Repeat("p", 200), strings.Repeat("l", 56), false},
	} {
		_, err := ratelimit.NewPolicy[string](st, []ratelimit.Limit{{Name: c.limit, Algorithm: alg}}, ratelimit.WithName(c.policy))
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("NewPolicy %.8q… with a limit %.8q…: %v, want ok %v", c.policy, c.limit, err, c.ok)
		}
	}
	// An unnamed Policy's limits may have names of any length a name has.
	if _, err := ratelimit.NewPolicy[string](st, []ratelimit.Limit{{Name: long, Algorithm: alg}}); err != nil {
		t.Errorf("an unnamed Policy's limit named with 256 bytes: %v", err)
	}
}

// A Limiter named "orders/daily" is the limit "daily" of the Policy
// "orders", on purpose; two Policies of one name are one quota per limit.
func TestPolicyLimitIsAName(t *testing.T) {
	ctx := context.Background()
	st := memorystore.New[string]()
	day := mustBucket(t, tokenbucket.Config{Capacity: 100, Rate: 1e-6})
	burst := mustBucket(t, tokenbucket.Config{Capacity: 1000, Rate: 1})
	limits := []ratelimit.Limit{{Name: "burst", Algorithm: burst}, {Name: "daily", Algorithm: day}}
	orders, err := ratelimit.NewPolicy[string](st, limits, ratelimit.WithName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	daily, err := ratelimit.New[string](day, st, ratelimit.WithName("orders/daily"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := ratelimit.NewPolicy[string](st, limits, ratelimit.WithName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := orders.AllowN(ctx, "k", 30); err != nil || !d.Allowed() {
		t.Fatalf("AllowN(30) = %v, %v", d, err)
	}
	if d, _ := daily.Peek(ctx, "k"); d.Remaining() != 70 {
		t.Errorf("the Limiter orders/daily after the Policy's 30: %v, want 70 left", d)
	}
	if d, _ := again.Peek(ctx, "k"); d.Limits()[0].Remaining() != 970 || d.Limits()[1].Remaining() != 70 {
		t.Errorf("the Policy orders built again: %v, want 970 and 70 left", d.Limits())
	}
	if got := orders.Limits(); got[0].Name != "burst" || got[1].Name != "daily" {
		t.Errorf("Limits() names %q and %q, want burst and daily", got[0].Name, got[1].Name)
	}
}
