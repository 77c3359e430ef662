package ratelimit_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// daily is a limit of 100 a day, built anew on each call, as two routes
// configured alike build theirs.
func daily(t *testing.T) algorithm.Algorithm {
	t.Helper()
	alg, err := tokenbucket.Per(100, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return alg
}

// TestBuiltApartNeverShareSilently is issue 43's first case: two limits
// built apart with equal numbers, on one store, are refused at
// construction (ErrStateInUse, which is also ErrInvalidConfig), with an
// error that names both and what they decide; they never share a quota
// in silence. Limiters and Policies alike.
func TestBuiltApartNeverShareSilently(t *testing.T) {
	st := memorystore.New[string]()
	first, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Name: "daily", Algorithm: daily(t)}}, ratelimit.WithName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ratelimit.NewPolicy(st, []ratelimit.Limit{{Name: "daily", Algorithm: daily(t)}}, ratelimit.WithName("users"))
	if !errors.Is(err, ratelimit.ErrStateInUse) || !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Fatalf("a second Policy of the same limit on the same store: %v; want ErrStateInUse and ErrInvalidConfig", err)
	}
	for _, want := range []string{`a Policy named "orders" built at claim_test.go:`, `a Policy named "users" built at claim_test.go:`, "a token bucket of 100 refilled in 24h0m0s", "WithStateID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := ratelimit.New(daily(t), st); !errors.Is(err, ratelimit.ErrStateInUse) {
		t.Errorf("a Limiter of the Policy's limit on the same store: %v; want ErrStateInUse", err)
	}
	if _, err := ratelimit.New(daily(t), memorystore.New[string]()); err != nil {
		t.Errorf("the same limit on another store: %v", err)
	}
	runtime.KeepAlive(first)
}

// TestAskedToShare: state IDs given explicitly are shared on purpose, one
// quota for both; state IDs of their own keep equal limits apart; a
// Limiter's With of its own algorithm is the Limiter's family.
func TestAskedToShare(t *testing.T) {
	ctx := context.Background()
	st := memorystore.New[string]()
	a, errA := ratelimit.New(daily(t), st, ratelimit.WithStateID("shared"))
	b, errB := ratelimit.New(daily(t), st, ratelimit.WithStateID("shared"))
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if _, err := a.AllowN(ctx, "k", 60); err != nil {
		t.Fatal(err)
	}
	if d, err := b.Peek(ctx, "k"); err != nil || d.Remaining() != 40 {
		t.Errorf("b after a spent 60 under one explicit ID: %v, %v; want 40 left", d, err)
	}
	c, errC := ratelimit.New(daily(t), st, ratelimit.WithStateID("c"))
	p, errP := ratelimit.NewPolicy(st, []ratelimit.Limit{{Algorithm: daily(t), StateID: "p"}})
	if errC != nil || errP != nil {
		t.Fatal(errC, errP)
	}
	if d, err := c.Peek(ctx, "k"); err != nil || d.Remaining() != 100 {
		t.Errorf("c under an ID of its own: %v, %v; want 100 left", d, err)
	}
	if d, err := p.Peek(ctx, "k"); err != nil || d.Remaining() != 100 {
		t.Errorf("p under an ID of its own: %v, %v; want 100 left", d, err)
	}

	base, err := ratelimit.New(daily(t), st)
	if err != nil {
		t.Fatal(err)
	}
	same, err := base.With(daily(t))
	if err != nil {
		t.Fatalf("With of the Limiter's own limit: %v", err)
	}
	if _, err := same.AllowN(ctx, "k", 30); err != nil {
		t.Fatal(err)
	}
	if d, err := base.Peek(ctx, "k"); err != nil || d.Remaining() != 70 {
		t.Errorf("the Limiter after its With spent 30: %v, %v; want 70 left", d, err)
	}
}

// TestWithOfTwoLimitersBuiltApart: Limiters built apart, on one store,
// that are given the same limit through With would share it: refused as
// New refuses it.
func TestWithOfTwoLimitersBuiltApart(t *testing.T) {
	st := memorystore.New[string]()
	hourly, err := gcra.Per(10, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a, errA := ratelimit.New(daily(t), st, ratelimit.WithStateID("a"))
	b, errB := ratelimit.New(daily(t), st, ratelimit.WithStateID("b"))
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	// Named: With keeps the Limiter's ID, no default ID is used.
	if _, err := a.With(daily(t)); err != nil {
		t.Fatal(err)
	}
	plain, err := ratelimit.New(hourly, st)
	if err != nil {
		t.Fatal(err)
	}
	free, err := ratelimit.New(mustPer(t, 5, time.Minute), st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := free.With(hourly); !errors.Is(err, ratelimit.ErrStateInUse) {
		t.Errorf("With of another Limiter's limit on the same store: %v; want ErrStateInUse", err)
	}
	runtime.KeepAlive(b)
	runtime.KeepAlive(plain)
}

func mustPer(t *testing.T, n int64, per time.Duration) algorithm.Algorithm {
	t.Helper()
	alg, err := tokenbucket.Per(n, per)
	if err != nil {
		t.Fatal(err)
	}
	return alg
}

// TestDroppedLimiterFreesItsClaim: a Limiter nothing refers to any more
// gives its default state ID back once it is collected, so that the same
// limit can be built again; until then the new one is refused.
func TestDroppedLimiterFreesItsClaim(t *testing.T) {
	st := memorystore.New[string]()
	if _, err := ratelimit.New(daily(t), st); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		_, err := ratelimit.New(daily(t), st)
		if err == nil {
			return
		}
		if !errors.Is(err, ratelimit.ErrStateInUse) || time.Now().After(deadline) {
			t.Fatalf("after the first Limiter was dropped: %v", err)
		}
		time.Sleep(time.Millisecond) // the cleanup runs on a goroutine of its own
	}
}

// taggedStore is a store value of a comparable type holding a value that
// is not: comparing two of them panics.
type taggedStore struct {
	inner store.Store[string]
	tag   any
}

func (s taggedStore) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	return s.inner.Open(limits, clk)
}

// TestUncomparableStoreValue: a store value whose type is comparable but
// which holds an uncomparable value (here a slice in an interface field)
// is refused a default state ID with ErrStateInUse, never a panic, and
// works with a state ID of its own.
func TestUncomparableStoreValue(t *testing.T) {
	st := taggedStore{inner: memorystore.New[string](), tag: []int{1}}
	_, err := ratelimit.New(daily(t), st)
	if !errors.Is(err, ratelimit.ErrStateInUse) {
		t.Fatalf("New on an uncomparable store value: %v; want ErrStateInUse", err)
	}
	lim, err := ratelimit.New(daily(t), st, ratelimit.WithStateID("tagged"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(context.Background(), "k"); err != nil || !d.Allowed() {
		t.Fatalf("Allow: %v, %v", d, err)
	}
}
