package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// twoLimiters returns Limiters of 3 and 1 a minute on st, named apart.
func twoLimiters(t *testing.T, st store.Store[string], opts ...ratelimit.Option) (a, b *ratelimit.Limiter[string], clk *clock.Fake) {
	t.Helper()
	clk = clock.NewFake(time.Unix(1_700_000_000, 0))
	mk := func(n int64, name string) *ratelimit.Limiter[string] {
		alg, err := fixedwindow.Per(n, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		l, err := ratelimit.New(alg, st, append([]ratelimit.Option{ratelimit.WithName(name), ratelimit.WithClock(clk)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	return mk(3, "all-a"), mk(1, "all-b"), clk
}

// noMulti is a store whose tables are Bookers but no store.Multi.
type noMulti struct{ next store.Store[string] }

func (s noMulti) Local() bool { return localOf(s.next) }

func (s noMulti) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.next.Open(limits, clk)
	if err != nil {
		return nil, err
	}
	return struct {
		store.Table[string]
		store.Booker[string]
	}{t, t.(store.Booker[string])}, nil
}

func TestAllowAll(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		st   store.Store[string]
	}{
		{"Multi", memorystore.New[string]()},
		{"TakeEach", noMulti{memorystore.New[string]()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b, _ := twoLimiters(t, c.st)
			reqs := []ratelimit.Request[string]{{Limiter: a, Key: "k", N: 1}, {Limiter: b, Key: "k", N: 1}}
			ok, err := ratelimit.AllowAll(ctx, reqs)
			if err != nil || !ok || reqs[0].Decision.Remaining() != 2 || reqs[1].Decision.Remaining() != 0 {
				t.Fatalf("first AllowAll: got %v, %v, %v; want both admitted, 2 and 0 remaining", ok, err, reqs)
			}
			// b's 1 is spent: neither is charged; a reports it would admit.
			reqs = []ratelimit.Request[string]{{Limiter: a, Key: "k", N: 2}, {Limiter: b, Key: "k", N: 1}}
			ok, err = ratelimit.AllowAll(ctx, reqs)
			if err != nil || ok || !reqs[0].Decision.Allowed() || reqs[1].Decision.Allowed() {
				t.Fatalf("second AllowAll: got %v, %v, %v; want denied by b alone", ok, err, reqs)
			}
			if d, err := a.Peek(ctx, "k"); err != nil || d.Remaining() != 2 {
				t.Errorf("a after the denial: %v, %v; want 2 remaining (nothing charged)", d, err)
			}
		})
	}
}

func TestAllowAllErrors(t *testing.T) {
	ctx := context.Background()
	a, b, _ := twoLimiters(t, memorystore.New[string]())
	if _, err := ratelimit.AllowAll(ctx, []ratelimit.Request[string]{{Limiter: a, Key: "k", N: 1}, {Limiter: b, Key: "k", N: 2}}); !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
		t.Errorf("a cost above b's limit: got %v, want ErrCostExceedsLimit", err)
	}
	if _, err := ratelimit.AllowAll(ctx, []ratelimit.Request[string]{{Key: "k", N: 1}}); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("no Limiter: got %v, want ErrInvalidConfig", err)
	}
	if _, err := ratelimit.AllowAll(ctx, []ratelimit.Request[string]{{Limiter: a, Key: "k", N: 1}, {Limiter: a, Key: "k", N: 1}}); !errors.Is(err, store.ErrSameState) {
		t.Errorf("one key twice: got %v, want store.ErrSameState", err)
	}
	if d, err := a.Peek(ctx, "k"); err != nil || d.Remaining() != 3 {
		t.Errorf("after the refusals: %v, %v; want 3 remaining", d, err)
	}
}

// TestAllowAllDenialCache checks that requests every Limiter's denial
// cache denies are answered without the store, and that a store failing
// leaves each request to its failure policy.
func TestAllowAllDenialCache(t *testing.T) {
	ctx := context.Background()
	fs := &faultStore{next: memorystore.New[string]()}
	a, b, _ := twoLimiters(t, fs, ratelimit.WithDenialCache(16), ratelimit.WithFailurePolicy(ratelimit.FailClosed))
	for range 3 {
		if d, err := a.Allow(ctx, "k"); err != nil || !d.Allowed() {
			t.Fatal(d, err)
		}
	}
	if d, err := b.Allow(ctx, "k"); err != nil || !d.Allowed() {
		t.Fatal(d, err)
	}
	reqs := []ratelimit.Request[string]{{Limiter: a, Key: "k", N: 1}, {Limiter: b, Key: "k", N: 1}}
	if ok, err := ratelimit.AllowAll(ctx, reqs); err != nil || ok {
		t.Fatalf("AllowAll: %v, %v; want denied", ok, err)
	}
	before := fs.calls.Load()
	ok, err := ratelimit.AllowAll(ctx, reqs)
	if err != nil || ok || reqs[0].Decision.RetryAfter() <= 0 || reqs[1].Decision.RetryAfter() <= 0 {
		t.Fatalf("AllowAll again: %v, %v, %v; want both denied, with a RetryAfter", ok, err, reqs)
	}
	if n := fs.calls.Load() - before; n != 0 {
		t.Errorf("AllowAll of cached denials made %d store calls, want 0", n)
	}
	fs.down.Store(true)
	reqs = []ratelimit.Request[string]{{Limiter: a, Key: "other", N: 1}, {Limiter: b, Key: "other", N: 1}}
	ok, err = ratelimit.AllowAll(ctx, reqs)
	if err != nil || ok || reqs[0].Decision.Source() != ratelimit.FromFailClosed {
		t.Errorf("AllowAll with the store down: %v, %v, %v; want FailClosed's denials", ok, err, reqs)
	}
}

// TakeAll makes faultStore's tables a store.Multi: one call, counted, and
// failed while the store is down.
func (t *faultTable) TakeAll(ctx context.Context, reqs []store.Request[string]) (bool, error) {
	t.s.calls.Add(1)
	if t.s.down.Load() {
		return false, fmt.Errorf("%w: down", store.ErrUnavailable)
	}
	inner := make([]store.Request[string], len(reqs))
	for i, rq := range reqs {
		inner[i] = rq
		inner[i].Table = rq.Table.(*faultTable).next
	}
	ok, err := t.next.(store.Multi[string]).TakeAll(ctx, inner)
	for i := range reqs {
		reqs[i].Result = inner[i].Result
	}
	return ok, err
}

// slowStore is a remote store (store.Remote, a call timeout of 2 s)
// whose TakeAll waits until release is closed.
type slowStore struct {
	next    store.Store[string]
	release chan struct{}
	calls   atomic.Int64
}

func (s *slowStore) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.next.Open(limits, clk)
	if err != nil {
		return nil, err
	}
	return &slowTable{Table: t, s: s}, nil
}

type slowTable struct {
	store.Table[string]
	s *slowStore
}

func (t *slowTable) CallTimeout() time.Duration { return 2 * time.Second }

func (t *slowTable) TakeAll(ctx context.Context, reqs []store.Request[string]) (bool, error) {
	t.s.calls.Add(1)
	<-t.s.release
	inner := make([]store.Request[string], len(reqs))
	for i, rq := range reqs {
		inner[i] = rq
		inner[i].Table = rq.Table.(*slowTable).Table
	}
	ok, err := t.Table.(store.Multi[string]).TakeAll(ctx, inner)
	for i := range reqs {
		reqs[i].Result = inner[i].Result
	}
	return ok, err
}

// TestAllowAllLeaves checks that a caller whose deadline is nearer than
// half the store's call timeout stops waiting at its deadline, with its
// context's error, while the call goes on (and charges).
func TestAllowAllLeaves(t *testing.T) {
	st := &slowStore{next: memorystore.New[string](), release: make(chan struct{})}
	a, b, _ := twoLimiters(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	reqs := []ratelimit.Request[string]{{Limiter: a, Key: "k", N: 1}, {Limiter: b, Key: "k", N: 1}}
	ok, err := ratelimit.AllowAll(ctx, reqs)
	if ok || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Fatalf("AllowAll past its deadline: %v, %v; want context.DeadlineExceeded, not the store's failure", ok, err)
	}
	close(st.release)
	// The call went on: its charge lands (the store's next answer shows it).
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		d, err := a.Peek(context.Background(), "k")
		if err == nil && d.Remaining() == 2 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the call left behind never charged: %v, %v", d, err)
		}
	}
	if n := st.calls.Load(); n != 1 {
		t.Errorf("%d store calls, want 1", n)
	}
}
