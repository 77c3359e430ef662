// Package benchkit is the benchmark harness shared by the core module's
// memory benchmarks and the integration module's Redis ones: the same
// algorithms, paths and key counts on every store, each decision checked.
package benchkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/algorithms"
	"github.com/go-ratelimit/ratelimit/store"
)

// Stores (BenchmarkMemory in the core module, BenchmarkRedis in
// integration/ratelimit) times Limiter.AllowN on keys that already have
// state, with the local clock, for every store × algorithm × number of
// keys × path × serial or parallel. Names read store/algorithm/keys=N/path/mode. The allowed path uses a
// configuration that never denies during a run and whose keys never expire
// (so every decision finds the key's state as it left it); the generous
// path a limit never approached, whose state is fresh again microseconds
// after each request (so every decision finds it expired); the denied path
// keys drained before the timer starts that stay drained for years.

// Store is a store the benchmarks run on.
type Store struct {
	Name string
	// New returns a fresh, empty store; it may skip b when its backend is
	// not available.
	New func(b *testing.B) store.Store[string]
	// Remote stores are measured with RedisCallers concurrent callers and
	// latency percentiles.
	Remote bool
}

// Algorithm is one algorithm in the configurations the paths use.
type Algorithm struct {
	Name string
	// Allowed never denies a cost of 1 during a benchmark; Prime is the
	// cost taken once per key before the timer starts, so that the key's
	// state stays far from fresh for years.
	Allowed func() (algorithm.Algorithm, error)
	Prime   int
	// Generous is a limit never approached whose state is fresh again
	// microseconds after each request, as most keys' are: every request
	// meets state that has expired since the last.
	Generous func() (algorithm.Algorithm, error)
	// Denied has a limit of 1 and refills after years.
	Denied func() (algorithm.Algorithm, error)
}

// Algorithms are the algorithms of package algorithms, in its order, in
// their benchmark configurations (algorithms.Bench).
var Algorithms = func() []Algorithm {
	var algs []Algorithm
	for _, e := range algorithms.All() {
		b := e.Bench
		algs = append(algs, Algorithm{Name: e.Name, Allowed: b.Allowed, Prime: b.Prime, Generous: b.Generous, Denied: b.Denied})
	}
	return algs
}()

// KeyCounts are the numbers of keys requests are spread over, round
// robin: one hot key, or many: 10,000, or 100 when $RATELIMIT_BENCH_SMOKE
// is set (.ci/test's smoke run of 100 iterations, which needs no more and
// would spend most of its time priming 10,000 keys on Redis).
var KeyCounts = []int{1, manyKeys()}

func manyKeys() int {
	if os.Getenv("RATELIMIT_BENCH_SMOKE") != "" {
		return 100
	}
	return 10_000
}

// RedisCallers is how many goroutines call a Redis store at once in the
// parallel benchmarks.
const RedisCallers = 64

// Stores runs every combination on each store.
func Stores(b *testing.B, stores []Store) {
	for _, st := range stores {
		b.Run(st.Name, func(b *testing.B) {
			for _, alg := range Algorithms {
				b.Run(alg.Name, func(b *testing.B) {
					for _, n := range KeyCounts {
						b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
							for _, path := range []string{"allowed", "generous", "denied"} {
								allowed := path != "denied"
								b.Run(path, func(b *testing.B) {
									b.Run("serial", func(b *testing.B) {
										lim, keys := setup(b, st, alg, n, path)
										Serial(b, lim, keys, allowed)
									})
									b.Run("parallel", func(b *testing.B) {
										lim, keys := setup(b, st, alg, n, path)
										parallel(b, shared(limiterAllow(lim)), keys, allowed, st.Remote)
									})
								})
							}
						})
					}
				})
			}
		})
	}
}

// setup builds a limiter on a fresh store and n keys that already
// have state: primed for the allowed path, asked once for the generous
// one, drained for the denied one.
func setup(b *testing.B, st Store, ba Algorithm, n int, path string) (*ratelimit.Limiter[string], []string) {
	b.Helper()
	newAlg, cost := ba.Denied, 1
	switch path {
	case "allowed":
		newAlg, cost = ba.Allowed, ba.Prime
	case "generous":
		newAlg = ba.Generous
	}
	alg, err := newAlg()
	if err != nil {
		b.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st.New(b), ratelimit.WithName(b.Name())) // the local clock
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:%d", i)
	}
	callers := 1
	if st.Remote {
		// Priming is round trips: RedisCallers of them at once take a
		// tenth of the time one at a time does (10,000 keys, twice per
		// benchmark: go test runs b.N = 1 first).
		callers = RedisCallers
	}
	if err := prime(lim, keys, cost, callers); err != nil {
		b.Fatal(err)
	}
	return lim, keys
}

// prime charges cost to every key, on callers goroutines at once, and
// returns the first failure: an error, or a denial.
func prime(lim *ratelimit.Limiter[string], keys []string, cost, callers int) error {
	ctx := context.Background()
	var next atomic.Int64
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(keys)); i = next.Add(1) - 1 {
				if d, err := lim.AllowN(ctx, keys[i], cost); err != nil || !d.Allowed() {
					errs[c] = fmt.Errorf("priming %s with %d: %+v, %v", keys[i], cost, d, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func Serial(b *testing.B, lim *ratelimit.Limiter[string], keys []string, allowed bool) {
	ctx := context.Background()
	b.ReportAllocs()
	wrong, i := 0, 0
	for b.Loop() {
		d, err := lim.AllowN(ctx, keys[i], 1)
		if err != nil {
			b.Fatal(err)
		}
		if d.Allowed() != allowed {
			wrong++
		}
		if i++; i == len(keys) {
			i = 0
		}
	}
	reportDecisions(b, wrong, allowed)
}

// allowFunc is one decision on a key, by a Limiter or a Policy.
type allowFunc func(ctx context.Context, key string) (bool, error)

func limiterAllow(lim *ratelimit.Limiter[string]) allowFunc {
	return func(ctx context.Context, key string) (bool, error) {
		d, err := lim.AllowN(ctx, key, 1)
		return d.Allowed(), err
	}
}

// policyAllow decides through AllowN: a decision of several limits
// allocates room for theirs.
func policyAllow(p *ratelimit.Limiter[string]) allowFunc {
	return func(ctx context.Context, key string) (bool, error) {
		d, err := p.AllowN(ctx, key, 1)
		return d.Allowed(), err
	}
}

// policyAllowInto is policyAllow through AllowNInto, into a decision of
// the worker's, whose room for the limits' decisions it reuses.
func policyAllowInto(p *ratelimit.Limiter[string]) func() allowFunc {
	return func() allowFunc {
		var d ratelimit.Decision
		return func(ctx context.Context, key string) (bool, error) {
			err := p.AllowNInto(ctx, key, 1, &d)
			return d.Allowed(), err
		}
	}
}

// shared returns allow for every worker of parallel.
func shared(allow allowFunc) func() allowFunc {
	return func() allowFunc { return allow }
}

// parallel runs the decisions of workers, each deciding with the allowFunc
// newAllow returns it, on keys round robin.
func parallel(b *testing.B, newAllow func() allowFunc, keys []string, allowed, remote bool) {
	ctx := context.Background()
	var wrong, failed atomic.Int64
	var worker atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	if remote {
		b.SetParallelism((RedisCallers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// Workers start spread over the keys and go round robin.
		i := int(worker.Add(1)*7919) % len(keys)
		allow := newAllow()
		var mine []time.Duration
		if remote {
			mine = make([]time.Duration, 0, 1024)
			defer func() {
				mu.Lock()
				latencies = append(latencies, mine...)
				mu.Unlock()
			}()
		}
		for pb.Next() {
			var start time.Time
			if remote {
				start = time.Now()
			}
			ok, err := allow(ctx, keys[i])
			if remote {
				mine = append(mine, time.Since(start))
			}
			if err != nil {
				failed.Add(1)
			} else if ok != allowed {
				wrong.Add(1)
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
	})
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d decisions failed", n)
	}
	reportDecisions(b, int(wrong.Load()), allowed)
	if len(latencies) > 0 {
		slices.Sort(latencies)
		b.ReportMetric(float64(percentile(latencies, 50).Microseconds()), "p50-µs")
		b.ReportMetric(float64(percentile(latencies, 99).Microseconds()), "p99-µs")
	}
}

// percentile returns the p-th percentile of sorted latencies.
func percentile(sorted []time.Duration, p int) time.Duration {
	return sorted[(len(sorted)-1)*p/100]
}

func reportDecisions(b *testing.B, wrong int, allowed bool) {
	if wrong > 0 {
		b.Errorf("%d of %d decisions had Allowed = %v, want %v: the configuration does not fit the path", wrong, b.N, !allowed, allowed)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// Policy (BenchmarkPolicy in the core module for memory, in
// integration/ratelimit for Redis) compares a route's two limits, 10^5 per second (a token
// bucket) and 10^9 per day (a fixed window), decided together by a
// Limiter of NewPolicy through AllowNInto (limits=2, each worker reusing
// its decision's room for the limits'; on the memory store also through
// AllowN, limits=2-allocating, which allocates it on each decision), with
// the per-second limit alone on a Limiter, on 10,000 keys far
// below their limits, on each store (the Redis stores with RedisCallers
// concurrent callers).
func Policy(b *testing.B, stores []Store) {
	// 10^5 per second: the memory store's 20 M decisions/s spread over
	// 10,000 keys never reach it.
	second, day, err := algorithms.Route()
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("route:%d", i)
	}
	for _, st := range stores {
		b.Run(st.Name, func(b *testing.B) {
			b.Run("limits=1", func(b *testing.B) {
				lim, err := ratelimit.New(second, st.New(b), ratelimit.WithName(b.Name()))
				if err != nil {
					b.Fatal(err)
				}
				parallel(b, shared(limiterAllow(lim)), keys, true, st.Remote)
			})
			both := func(b *testing.B) *ratelimit.Limiter[string] {
				p, err := ratelimit.NewPolicy(st.New(b), []ratelimit.Limit{
					{Name: "second", Algorithm: second}, {Name: "day", Algorithm: day}}, ratelimit.WithName(b.Name()))
				if err != nil {
					b.Fatal(err)
				}
				return p
			}
			b.Run("limits=2", func(b *testing.B) {
				parallel(b, policyAllowInto(both(b)), keys, true, st.Remote)
			})
			if st.Remote {
				return // an allocation is lost in a round trip
			}
			b.Run("limits=2-allocating", func(b *testing.B) {
				parallel(b, shared(policyAllow(both(b))), keys, true, st.Remote)
			})
		})
	}
}
