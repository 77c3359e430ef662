package ratelimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// storePair returns two stores that share nothing (A, B); Limiters on the
// same one share state, as processes on one Redis do.
type storePair func(rt *rapid.T, alg algorithm.Algorithm) (a, b store.Store[string])

// TestDenialCacheModel runs random sequences on a Limiter with a denial
// cache (A) and on one without, on a store of its own (B), and checks:
//
//   - answers that did not reach the store are denials of a cost of 1,
//     given before the end of the last denial the store made for the key;
//   - they are what the store would answer (a Peek of A's store), unless
//     another process reset the key after the denial was cached;
//   - as long as no cached answer followed such a reset, A and B decide
//     alike, field for field: the same admissions, the same numbers.
//
// Resets through A reset B's store too; resets by another process (a
// Limiter without cache on A's store) too.
func TestDenialCacheModel(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		checkDenialCacheModel(t, func(rt *rapid.T, alg algorithm.Algorithm) (store.Store[string], store.Store[string]) {
			return sharedOn(rt, alg), sharedOn(rt, alg)
		})
	})
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		if target.Mini == nil {
			target.TTLMargin = 10 * time.Minute // fake clocks; real TTLs
		}
		t.Run("goredis", func(t *testing.T) {
			client := redistest.GoRedis(t, target)
			checkDenialCacheModel(t, func(rt *rapid.T, _ algorithm.Algorithm) (store.Store[string], store.Store[string]) {
				open := func() store.Store[string] {
					st, err := goredisstore.New(client, goredisstore.WithPrefix[string](redistest.Prefix(t)), goredisstore.WithTTLMargin[string](target.TTLMargin))
					if err != nil {
						rt.Fatal(err)
					}
					return st
				}
				return open(), open()
			})
		})
		t.Run("rueidis", func(t *testing.T) {
			client := redistest.Rueidis(t, target)
			checkDenialCacheModel(t, func(rt *rapid.T, _ algorithm.Algorithm) (store.Store[string], store.Store[string]) {
				open := func() store.Store[string] {
					st, err := rueidisstore.New(client, rueidisstore.WithPrefix[string](redistest.Prefix(t)), rueidisstore.WithTTLMargin[string](target.TTLMargin))
					if err != nil {
						rt.Fatal(err)
					}
					return st
				}
				return open(), open()
			})
		})
	})
}

// drawAlgorithm draws an algorithm with a small limit and a period from
// 1 ms to 2 s.
func drawAlgorithm(rt *rapid.T) algorithm.Algorithm {
	limit := rapid.Int64Range(1, 4).Draw(rt, "limit")
	period := time.Duration(rapid.Int64Range(1_000, 2_000_000).Draw(rt, "period µs")) * time.Microsecond
	var alg algorithm.Algorithm
	var err error
	switch rapid.IntRange(0, 3).Draw(rt, "algorithm") {
	case 0:
		alg, err = tokenbucket.New(tokenbucket.Config{Capacity: limit, Rate: float64(limit) / period.Seconds()})
	case 1:
		alg, err = tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: limit, Tokens: 1, Interval: period})
	case 2:
		alg, err = slidinglog.New(slidinglog.Config{Limit: limit, Window: period})
	default:
		alg, err = fixedwindow.New(fixedwindow.Config{Limit: limit, Window: period})
	}
	if err != nil {
		rt.Fatalf("%v", err)
	}
	return alg
}

// cacheKey is what the test knows of one key of A.
type cacheKey struct {
	// until is the end (Unix µs) of the last denial of a cost of 1 that
	// A's store made, which A may have cached; 0 when none or forgotten.
	until int64
	// stale: another process reset the key since that denial.
	stale bool
	// diverged: A answered from a stale denial, so A's store and B's may
	// differ from then on.
	diverged bool
}

func checkDenialCacheModel(t *testing.T, stores storePair) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		alg := drawAlgorithm(rt)
		stA, stB := stores(rt, alg)
		fs := &countingStore{next: stA}
		start := time.UnixMicro(rapid.Int64Range(1_700_000_000_000_000, 1_800_000_000_000_000).Draw(rt, "start µs"))
		fake := clock.NewFake(start)
		newLim := func(st store.Store[string], opts ...ratelimit.Option) *ratelimit.Limiter[string] {
			lim, err := ratelimit.New(alg, st, append(opts, ratelimit.WithName("model"), ratelimit.WithClock(fake))...)
			if err != nil {
				rt.Fatalf("ratelimit.New: %v", err)
			}
			return lim
		}
		a := newLim(fs, ratelimit.WithDenialCache(rapid.IntRange(1, 4).Draw(rt, "cache size")))
		b := newLim(stB)
		other := newLim(stA) // another process on A's store
		keys := map[string]*cacheKey{"x": {}, "y": {}}
		drawKey := func(rt *rapid.T) (string, *cacheKey) {
			k := rapid.SampledFrom([]string{"x", "y"}).Draw(rt, "key")
			return k, keys[k]
		}
		limit := alg.Limit()
		steps := 0
		step := func(f func(*rapid.T)) func(*rapid.T) {
			return func(rt *rapid.T) {
				if steps++; steps <= 60 {
					f(rt)
				}
			}
		}
		// decide runs one decision on A and B and checks it.
		// A cost of 0 stands for a Peek.
		decide := func(rt *rapid.T, what string, key string, ks *cacheKey, cost int64, call func(*ratelimit.Limiter[string]) (ratelimit.Decision, error)) {
			now := fake.Now().UnixMicro()
			calls := fs.calls.Load()
			dA, err := call(a)
			if err != nil {
				rt.Fatalf("A: %s: %v", what, err)
			}
			cached := fs.calls.Load() == calls
			dB, err := call(b)
			if err != nil {
				rt.Fatalf("B: %s: %v", what, err)
			}
			if cached {
				if dA.Allowed() || cost > 1 {
					rt.Fatalf("%s: A answered %+v without asking the store", what, dA)
				}
				if now >= ks.until {
					rt.Fatalf("%s at %d: A answered %+v from the cache, after the end of the store's last denial (%d)", what, now, dA, ks.until)
				}
				if !ks.stale {
					want, err := other.Peek(ctx, key)
					if err != nil {
						rt.Fatal(err)
					}
					if dA != want {
						rt.Fatalf("%s: A answered %+v from the cache; the store says %+v", what, dA, want)
					}
				} else {
					ks.diverged = true
				}
			}
			if !ks.diverged && dA != dB {
				rt.Fatalf("%s: A (cached) = %+v, B (the store alone) = %+v", what, dA, dB)
			}
			if !cached {
				switch {
				case dA.Allowed() && cost > 0: // a Take admitted: the cache forgets
					ks.until, ks.stale = 0, false
				case !dA.Allowed() && cost <= 1: // a denial of a cost of 1: cached
					ks.until, ks.stale = now+dA.RetryAfter().Microseconds(), false
				}
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"advance": step(func(rt *rapid.T) {
				fake.Advance(time.Duration(rapid.Int64Range(0, 3_000_000).Draw(rt, "µs")) * time.Microsecond)
			}),
			"back": step(func(rt *rapid.T) {
				fake.Advance(-time.Duration(rapid.Int64Range(1, 500_000).Draw(rt, "µs")) * time.Microsecond)
			}),
			"allow": step(func(rt *rapid.T) {
				key, ks := drawKey(rt)
				cost := int64(1)
				if rapid.Bool().Draw(rt, "cost above 1") {
					cost = rapid.Int64Range(1, limit).Draw(rt, "cost")
				}
				decide(rt, fmt.Sprintf("AllowN(%s, %d)", key, cost), key, ks, cost, func(l *ratelimit.Limiter[string]) (ratelimit.Decision, error) {
					return l.AllowN(ctx, key, int(cost))
				})
			}),
			"flood": step(func(rt *rapid.T) {
				key, ks := drawKey(rt)
				for range 3 {
					decide(rt, fmt.Sprintf("Allow(%s)", key), key, ks, 1, func(l *ratelimit.Limiter[string]) (ratelimit.Decision, error) {
						return l.Allow(ctx, key)
					})
				}
			}),
			"peek": step(func(rt *rapid.T) {
				key, ks := drawKey(rt)
				decide(rt, fmt.Sprintf("Peek(%s)", key), key, ks, 0, func(l *ratelimit.Limiter[string]) (ratelimit.Decision, error) {
					return l.Peek(ctx, key)
				})
			}),
			"reset": step(func(rt *rapid.T) {
				key, ks := drawKey(rt)
				if err := a.Reset(ctx, key); err != nil {
					rt.Fatal(err)
				}
				if err := b.Reset(ctx, key); err != nil {
					rt.Fatal(err)
				}
				*ks = cacheKey{}
			}),
			"resetElsewhere": step(func(rt *rapid.T) {
				key, ks := drawKey(rt)
				if err := other.Reset(ctx, key); err != nil {
					rt.Fatal(err)
				}
				if err := b.Reset(ctx, key); err != nil {
					rt.Fatal(err)
				}
				if ks.until != 0 {
					ks.stale = true
				}
			}),
		})
	})
}

// sharedOn returns a memory store whose Opens all return one table.
func sharedOn(rt *rapid.T, alg algorithm.Algorithm) *sharedStore {
	table, err := memorystore.New[string]().Open(store.LimitsOf(alg), clock.Local())
	if err != nil {
		rt.Fatal(err)
	}
	return &sharedStore{table}
}

// sharedStore returns one table on every Open, so that two Limiters share
// a memory store's state as two processes share Redis.
type sharedStore struct {
	table store.Table[string]
}

func (s *sharedStore) Open([]store.Limit, clock.Clock) (store.Table[string], error) {
	return s.table, nil
}

// countingStore counts the calls its tables pass on to the store it wraps.
type countingStore struct {
	next  store.Store[string]
	calls atomic.Int64
}

func (s *countingStore) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.next.Open(limits, clk)
	if err != nil {
		return nil, err
	}
	return &countingTable{Table: t, calls: &s.calls}, nil
}

type countingTable struct {
	store.Table[string]
	calls *atomic.Int64
}

func (t *countingTable) Take(ctx context.Context, key string, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	t.calls.Add(1)
	return t.Table.Take(ctx, key, now, cost, out)
}

func (t *countingTable) Peek(ctx context.Context, key string, now int64, out []algorithm.Result) (algorithm.Result, error) {
	t.calls.Add(1)
	return t.Table.Peek(ctx, key, now, out)
}

func (t *countingTable) Reset(ctx context.Context, key string) error {
	t.calls.Add(1)
	return t.Table.Reset(ctx, key)
}
