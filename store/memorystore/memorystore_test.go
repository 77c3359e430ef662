package memorystore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// sweepMin mirrors the store's fewest operations between two sweeps of a
// shard.
const sweepMin = 64

// t0 is an instant in Unix µs, on a whole second.
const t0 = int64(1_767_225_600_000_000)

var ctx = context.Background()

func mustBucket(t testing.TB, capacity int64, rate float64) *tokenbucket.Bucket {
	t.Helper()
	b, err := tokenbucket.New(tokenbucket.Config{Capacity: capacity, Rate: rate})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func open[K comparable](t testing.TB, s *memorystore.Store[K], alg algorithm.Algorithm) store.Table[K] {
	t.Helper()
	tab, err := s.Open(alg, clock.Local())
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func take[K comparable](t testing.TB, tab store.Table[K], key K, now, cost int64) algorithm.Result {
	t.Helper()
	r, err := tab.Take(ctx, key, now, cost)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func peek[K comparable](t testing.TB, tab store.Table[K], key K, now int64) algorithm.Result {
	t.Helper()
	r, err := tab.Peek(ctx, key, now)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOpenRejectsServerClock(t *testing.T) {
	_, err := memorystore.New[string]().Open(mustBucket(t, 1, 1), clock.Server())
	if !errors.Is(err, store.ErrClockUnsupported) {
		t.Errorf("Open(clock.Server()) error = %v, want ErrClockUnsupported", err)
	}
}

func TestExpiredKeysAreSwept(t *testing.T) {
	const n = 1000
	s := memorystore.New[int](memorystore.WithShards(1))
	tab := open(t, s, mustBucket(t, 10, 10)) // one token refills in 100ms
	var resetAfter int64
	for k := range n {
		r := take(t, tab, k, t0, 1)
		resetAfter = max(resetAfter, r.ResetAfter)
	}
	if got := s.Stats().Keys; got != n {
		t.Fatalf("after %d new keys: Stats().Keys = %d, want %d (none expired yet)", n, got, n)
	}
	// Once every key is full again, as many operations as the shard holds
	// keys make it sweep them all.
	later := t0 + resetAfter
	for range n {
		peek(t, tab, -1, later)
	}
	if got := s.Stats(); got.Keys != 0 || got.Evicted != 0 {
		t.Fatalf("after %d operations past expiry: Stats() = %+v, want no keys, none evicted", n, got)
	}
}

func TestExpiryKeepsLiveKeys(t *testing.T) {
	s := memorystore.New[string](memorystore.WithShards(1))
	tab := open(t, s, mustBucket(t, 10, 10))
	take(t, tab, "short", t0, 1)  // full again at t0+100ms
	take(t, tab, "long", t0, 10)  // full again at t0+1s
	for i := range 2 * sweepMin { // enough operations for a sweep
		peek(t, tab, "none", t0+100_000+int64(i))
	}
	if got := s.Stats().Keys; got != 1 {
		t.Fatalf("Stats().Keys = %d, want 1: only the expired key is swept", got)
	}
	if r := peek(t, tab, "long", t0+100_000); r.Remaining != 1 {
		t.Errorf("Peek(long) = %+v, want its state kept (1 token)", r)
	}
}

// TestStreamOfNewKeysStaysBounded feeds a shard a stream of keys never seen
// before, each asking once, with the time moving on: only the keys of the
// last second are live, so the store must not hold many more than that.
func TestStreamOfNewKeysStaysBounded(t *testing.T) {
	for name, alg := range allAlgorithms(t) {
		t.Run(name, func(t *testing.T) {
			s := memorystore.New[int](memorystore.WithShards(1))
			tab := open(t, s, alg)
			const (
				perSecond = 1000 // new keys per second; each lives ≤ 1s
				total     = 50 * perSecond
			)
			peak := 0
			for k := range total {
				now := t0 + int64(k)*1_000_000/perSecond
				take(t, tab, k, now, 1)
				if k%100 == 0 {
					peak = max(peak, s.Stats().Keys)
				}
			}
			// A sweep leaves at most the ~perSecond live keys; the next one
			// comes after at most as many operations again.
			if limit := 2*perSecond + 2*sweepMin; peak > limit {
				t.Errorf("peak Stats().Keys = %d over %d one-shot keys, want at most %d", peak, total, limit)
			}
			t.Logf("peak Stats().Keys = %d over %d one-shot keys", peak, total)
		})
	}
}

// allAlgorithms returns one algorithm of each kind, each admitting 5 per
// second.
func allAlgorithms(t testing.TB) map[string]algorithm.Algorithm {
	t.Helper()
	interval, err := tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 5, Tokens: 5, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log, err := slidinglog.New(slidinglog.Config{Limit: 5, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	window, err := fixedwindow.New(fixedwindow.Config{Limit: 5, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]algorithm.Algorithm{
		"tokenbucket":          mustBucket(t, 5, 5),
		"tokenbucket-interval": interval,
		"slidinglog":           log,
		"fixedwindow":          window,
	}
}
