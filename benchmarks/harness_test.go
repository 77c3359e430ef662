// Package benchmarks compares ratelimit with the Go rate limiters people
// choose among, on the same workloads in the same run. It is a module of
// its own so that the library's go.mod never requires the peers.
//
//	bash benchmarks/run.sh        # starts a Redis on loopback, prints the tables
package benchmarks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// allowFunc decides one request for key; every library under test is
// adapted to it.
type allowFunc func(ctx context.Context, key string) (bool, error)

// subject is one library on one workload: setup builds it with nkeys keys
// that already have state, primed so the path is the one wanted.
type subject struct {
	lib   string
	setup func(b *testing.B, keys []string, p path) allowFunc
}

// path is what every request of a workload meets.
type path string

const (
	// allowed: a large bucket drained by half before the run, so every
	// request is admitted and every key keeps state throughout.
	allowed path = "allowed"
	// generous: the most common key of all, far below a generous limit
	// (a burst of 1e9, 1e9 per hour) and never drained, so its bucket is
	// full again microseconds after each request; stores that drop full
	// buckets see it come and go.
	generous path = "generous"
	// denied: a key that had its one request and is refused for hours.
	denied path = "denied"
)

// admits reports whether every request on p is to be admitted.
func (p path) admits() bool { return p != denied }

// mode is how the callers of a workload ask.
type mode string

const (
	// modeSerial: one caller asks for every key.
	modeSerial mode = "serial"
	// modeParallel: many callers at once, each asking for every key, as
	// a key's requests arrive on whichever core serves them.
	modeParallel mode = "parallel"
	// modeDisjoint: many callers at once, each asking for keys of its
	// own (an equal share), so that no key's state moves between cores:
	// how far a library's decisions on different keys scale with cores
	// when nothing in the workload is shared. A caller's share is also a
	// smaller working set than all the keys, which favours every library
	// alike.
	modeDisjoint mode = "disjoint"
)

// The generous limit every library gets: a burst of generousBurst and
// generousBurst per hour.
const generousBurst = 1_000_000_000

// The workloads: one hot key or many; every request admitted by a drained
// bucket, admitted by a generous one, or denied; one caller, or many at
// once.
var (
	keyCounts = []int{1, 10_000}
	paths     = []path{allowed, generous, denied}
)

func makeKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", 1_000_000+i)
	}
	return keys
}

// shuffled returns keys in the order caller number c asks for them: a
// permutation of its own, as independent clients arrive. Walking the keys
// in the order they were made would hand every library the order its
// state was allocated in, which hardware prefetching rewards and real
// traffic never has; and callers walking one order in step would meet on
// the same keys in a convoy that no independent clients form (it made
// parallel runs bimodal, for several libraries).
func shuffled(keys []string, c uint64) []string {
	own := slices.Clone(keys)
	rand.New(rand.NewPCG(c, 0x6b657973)).Shuffle(len(own), func(i, j int) {
		own[i], own[j] = own[j], own[i]
	})
	return own
}

// run runs every workload on every subject, named
// keys=N/path=P/mode=M/lib=L so that benchstat can put libraries side by
// side (-col /lib). callers > 0 sets how many goroutines call at once in
// the parallel modes and reports latency percentiles. modeDisjoint runs
// only with at least a key per caller.
func run(b *testing.B, subjects []subject, callers int, modes []mode) {
	for _, n := range keyCounts {
		keys := makeKeys(n)
		for _, path := range paths {
			for _, mode := range modes {
				if mode == modeDisjoint && n < perProc(callers)*runtime.GOMAXPROCS(0) {
					continue
				}
				for _, s := range subjects {
					name := fmt.Sprintf("keys=%d/path=%s/mode=%s/lib=%s", n, path, mode, s.lib)
					b.Run(name, func(b *testing.B) {
						allow := s.setup(b, keys, path)
						if mode == modeSerial {
							serial(b, allow, keys, path.admits())
						} else {
							parallel(b, allow, keys, path.admits(), callers, mode == modeDisjoint)
						}
					})
				}
			}
		}
	}
}

func serial(b *testing.B, allow allowFunc, keys []string, want bool) {
	ctx := context.Background()
	keys = shuffled(keys, 0)
	wrong, i := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		ok, err := allow(ctx, keys[i])
		if err != nil {
			b.Fatal(err)
		}
		if ok != want {
			wrong++
		}
		if i++; i == len(keys) {
			i = 0
		}
	}
	report(b, wrong, want)
}

// perProc is how many goroutines per processor parallel runs for callers
// (b.SetParallelism's unit): enough for callers, or one when it is 0.
func perProc(callers int) int {
	if callers == 0 {
		return 1
	}
	return (callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
}

// parallel runs allow from many goroutines at once: callers of them, or
// one per processor when callers is 0. Each asks for every key, or with
// disjoint for an equal share of them of its own.
func parallel(b *testing.B, allow allowFunc, keys []string, want bool, callers int, disjoint bool) {
	ctx := context.Background()
	var wrong, failed, worker atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	procs := perProc(callers)
	b.SetParallelism(procs)
	orders := make([][]string, procs*runtime.GOMAXPROCS(0)) // RunParallel's goroutines
	for c := range orders {
		own := keys
		if disjoint {
			own = keys[c*len(keys)/len(orders) : (c+1)*len(keys)/len(orders)]
		}
		orders[c] = shuffled(own, uint64(c+1))
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		keys, i := orders[worker.Add(1)-1], 0
		var mine []time.Duration
		if callers > 0 {
			mine = make([]time.Duration, 0, 1024)
			defer func() {
				mu.Lock()
				latencies = append(latencies, mine...)
				mu.Unlock()
			}()
		}
		for pb.Next() {
			var start time.Time
			if callers > 0 {
				start = time.Now()
			}
			ok, err := allow(ctx, keys[i])
			if callers > 0 {
				mine = append(mine, time.Since(start))
			}
			if err != nil {
				failed.Add(1)
			} else if ok != want {
				wrong.Add(1)
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
	})
	b.StopTimer()
	// Some peers give up under contention (throttled's compare-and-swap
	// retries run out on a hot key); that is part of their result.
	b.ReportMetric(float64(failed.Load())/float64(b.N), "errors/op")
	report(b, int(wrong.Load()), want)
	if len(latencies) > 0 {
		slices.Sort(latencies)
		b.ReportMetric(float64(latencies[(len(latencies)-1)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(latencies[(len(latencies)-1)*99/100].Microseconds()), "p99-µs")
	}
}

func report(b *testing.B, wrong int, want bool) {
	if wrong > 0 {
		b.Errorf("%d of %d decisions were not %v: the configuration does not fit the path", wrong, b.N, want)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// prime runs allow once on every key so that each has state, and checks
// the answer.
func prime(b *testing.B, allow allowFunc, keys []string, want bool) {
	b.Helper()
	ctx := context.Background()
	for _, k := range keys {
		ok, err := allow(ctx, k)
		if err != nil || ok != want {
			b.Fatalf("priming %s: %v, %v; want %v", k, ok, err, want)
		}
	}
}
