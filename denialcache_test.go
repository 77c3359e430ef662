package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// cachedLimiter returns a limiter with a denial cache of 64 keys on a
// faultStore over st, and a limiter without cache on the same store (as
// another process would be), both on a fake clock at t0.
func cachedLimiter(t *testing.T, alg algorithm.Algorithm, st store.Store[string]) (cached, other *ratelimit.Limiter[string], fs *faultStore, fake *clock.Fake) {
	t.Helper()
	fs = &faultStore{next: st}
	fake = clock.NewFake(t0)
	cached, err := ratelimit.New(alg, fs, ratelimit.WithName("api"), ratelimit.WithClock(fake), ratelimit.WithDenialCache(64))
	if err != nil {
		t.Fatal(err)
	}
	other, err = ratelimit.New(alg, st, ratelimit.WithName("api"), ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	return cached, other, fs, fake
}

func TestDenialCacheAnswersAFlood(t *testing.T) {
	ctx := context.Background()
	for name, alg := range allAlgorithms(t) {
		t.Run(name, func(t *testing.T) {
			cached, other, fs, fake := cachedLimiter(t, alg, newSharedStore(t, alg))
			if d, err := cached.AllowN(ctx, "k", 5); err != nil || !d.Allowed() {
				t.Fatalf("AllowN(k, 5) = %+v, %v; want allowed", d, err)
			}
			fake.Advance(100 * time.Millisecond)
			first, n := allowCounting(t, cached, fs, "k")
			if first.Allowed() || n != 1 {
				t.Fatalf("Allow(k) with nothing left = %+v after %d store calls; want denied by the store", first, n)
			}
			// Until the denial's end, requests of cost 1 are answered
			// locally, exactly as the store answers them.
			calls := fs.calls.Load()
			for step := time.Duration(0); step < first.RetryAfter(); step += first.RetryAfter() / 7 {
				at := fake.Now()
				for range 100 {
					d, err := cached.Allow(ctx, "k")
					if err != nil {
						t.Fatal(err)
					}
					want, err := other.Peek(ctx, "k")
					if err != nil {
						t.Fatal(err)
					}
					if d != want {
						t.Fatalf("t0+%v: cached Allow(k) = %+v, the store says %+v", at.Sub(t0), d, want)
					}
				}
				if d, err := cached.Peek(ctx, "k"); err != nil || d.Allowed() {
					t.Fatalf("t0+%v: cached Peek(k) = %+v, %v; want denied", at.Sub(t0), d, err)
				}
				fake.Advance(first.RetryAfter() / 7)
			}
			if n := fs.calls.Load() - calls; n != 0 {
				t.Fatalf("%d calls reached the store while the denial stood", n)
			}
			// A request of a larger cost goes to the store.
			fake.Set(t0.Add(100*time.Millisecond + first.RetryAfter() - time.Microsecond))
			if d, n := allowNCounting(t, cached, fs, "k", 2); d.Allowed() || n != 1 {
				t.Fatalf("AllowN(k, 2) under a standing denial = %+v after %d store calls; want denied by the store", d, n)
			}
			// At the denial's end the store decides again.
			fake.Set(t0.Add(100*time.Millisecond + first.RetryAfter()))
			if d, n := allowCounting(t, cached, fs, "k"); !d.Allowed() || n != 1 {
				t.Fatalf("Allow(k) at the end of the denial = %+v after %d store calls; want allowed by the store", d, n)
			}
		})
	}
}

func allowNCounting(t *testing.T, lim *ratelimit.Limiter[string], st *faultStore, key string, cost int) (ratelimit.Decision, int64) {
	t.Helper()
	before := st.calls.Load()
	d, err := lim.AllowN(context.Background(), key, cost)
	if err != nil {
		t.Fatalf("AllowN(%s, %d): %v", key, cost, err)
	}
	return d, st.calls.Load() - before
}

func TestDenialCacheReset(t *testing.T) {
	ctx := context.Background()
	alg := mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1.0 / 3600})
	cached, other, fs, fake := cachedLimiter(t, alg, newSharedStore(t, alg))
	drain := func(key string) ratelimit.Decision {
		t.Helper()
		cached.Allow(ctx, key)
		d, err := cached.Allow(ctx, key)
		if err != nil || d.Allowed() || d.RetryAfter() != time.Hour {
			t.Fatalf("Allow(%s) after its only token = %+v, %v; want denied for an hour", key, d, err)
		}
		return d
	}

	// A Reset through the limiter forgets the denial at once.
	drain("local")
	if err := cached.Reset(ctx, "local"); err != nil {
		t.Fatal(err)
	}
	if d, n := allowCounting(t, cached, fs, "local"); !d.Allowed() || n != 1 {
		t.Errorf("Allow(local) after Reset = %+v after %d store calls; want allowed by the store", d, n)
	}

	// A Reset by another process is seen at the end of the denial.
	drain("remote")
	if err := other.Reset(ctx, "remote"); err != nil {
		t.Fatal(err)
	}
	fake.Advance(time.Hour - time.Microsecond)
	if d, n := allowCounting(t, cached, fs, "remote"); d.Allowed() || d.RetryAfter() != time.Microsecond || n != 0 {
		t.Errorf("Allow(remote) 1µs before the end of the cached denial, reset elsewhere = %+v after %d store calls; want the cached denial", d, n)
	}
	fake.Advance(time.Microsecond)
	if d, n := allowCounting(t, cached, fs, "remote"); !d.Allowed() || d.Remaining() != 0 || n != 1 {
		t.Errorf("Allow(remote) at the end of the cached denial = %+v after %d store calls; want allowed by the store", d, n)
	}

	// Reset forgets the denial even when the store's Reset fails.
	drain("down")
	fs.down.Store(true)
	if err := cached.Reset(ctx, "down"); !errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Fatalf("Reset on a store that is down: %v, want ErrStoreUnavailable", err)
	}
	fs.down.Store(false)
	if d, n := allowCounting(t, cached, fs, "down"); d.Allowed() || n != 1 {
		t.Errorf("Allow(down) after a failed Reset = %+v after %d store calls; want the store asked (it still denies)", d, n)
	}
}

// gateStore holds the replies of its tables' Takes until released, while
// gated is set.
type gateStore struct {
	next    store.Store[string]
	gated   atomic.Bool
	arrived chan struct{} // receives when a gated Take has its reply
	release chan struct{} // a gated Take returns once it receives
}

func (s *gateStore) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.next.Open(limits, clk)
	return gateTable{t, s}, err
}

type gateTable struct {
	store.Table[string]
	s *gateStore
}

func (t gateTable) Take(ctx context.Context, key string, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	r, err := t.Table.Take(ctx, key, now, cost, out)
	if t.s.gated.Load() {
		t.s.arrived <- struct{}{}
		<-t.s.release
	}
	return r, err
}

// TestDenialCacheResetDuringTake checks that a denial made before a Reset,
// whose reply arrives after it, is not cached.
func TestDenialCacheResetDuringTake(t *testing.T) {
	ctx := context.Background()
	alg := mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1.0 / 3600})
	gate := &gateStore{next: memorystore.New[string](), arrived: make(chan struct{}), release: make(chan struct{})}
	fake := clock.NewFake(t0)
	lim, err := ratelimit.New(alg, gate, ratelimit.WithName("api"), ratelimit.WithClock(fake), ratelimit.WithDenialCache(8))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Allow(ctx, "k"); err != nil { // the only token
		t.Fatal(err)
	}
	gate.gated.Store(true)
	denied := make(chan ratelimit.Decision)
	go func() {
		d, _ := lim.Allow(ctx, "k")
		denied <- d
	}()
	<-gate.arrived // the store has denied it
	gate.gated.Store(false)
	if err := lim.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	gate.release <- struct{}{}
	if d := <-denied; d.Allowed() {
		t.Fatalf("Allow(k) with no token left = %+v, want denied", d)
	}
	if d, err := lim.Allow(ctx, "k"); err != nil || !d.Allowed() {
		t.Errorf("Allow(k) after Reset = %+v, %v; want allowed: the denial that predates the Reset must not be cached", d, err)
	}
}

func TestDenialCacheInvalidSize(t *testing.T) {
	alg := mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1})
	for _, n := range []int{0, -1, 1<<24 + 1} {
		if _, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithDenialCache(n)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("New(WithDenialCache(%d)): %v, want ErrInvalidConfig", n, err)
		}
	}
	for _, n := range []int{1, 7, 8, 9, 1000} {
		if _, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithDenialCache(n)); err != nil {
			t.Errorf("New(WithDenialCache(%d)): %v", n, err)
		}
	}
}

// TestDenialCacheKeepsTheLatest denies many more keys than the cache
// holds: the last key denied, whose denial ends last, is answered from the
// cache. (denialcache_internal_test.go checks the bound.)
func TestDenialCacheKeepsTheLatest(t *testing.T) {
	ctx := context.Background()
	alg := mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1.0 / 3600})
	for _, size := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			fs := &faultStore{next: memorystore.New[string]()}
			fake := clock.NewFake(t0)
			lim, err := ratelimit.New(alg, fs, ratelimit.WithName("api"), ratelimit.WithClock(fake), ratelimit.WithDenialCache(size))
			if err != nil {
				t.Fatal(err)
			}
			const keys = 1000
			for i := range keys {
				key := fmt.Sprint("k", i)
				lim.Allow(ctx, key)
				if d, _ := lim.Allow(ctx, key); d.Allowed() {
					t.Fatalf("Allow(%s) twice: allowed", key)
				}
				fake.Advance(time.Microsecond) // later keys' denials end later
			}
			if _, n := allowCounting(t, lim, fs, fmt.Sprint("k", keys-1)); n != 0 {
				t.Errorf("the last key denied went to the store")
			}
		})
	}
}

// sharedStore opens one table and returns it on every Open, so that two
// Limiters share a memory store's state as two processes share Redis.
type sharedStore struct {
	table store.Table[string]
}

func newSharedStore(t *testing.T, alg algorithm.Algorithm) *sharedStore {
	t.Helper()
	table, err := memorystore.New[string]().Open(store.LimitsOf(alg), clock.Local())
	if err != nil {
		t.Fatal(err)
	}
	return &sharedStore{table}
}

func (s *sharedStore) Open([]store.Limit, clock.Clock) (store.Table[string], error) {
	return s.table, nil
}
