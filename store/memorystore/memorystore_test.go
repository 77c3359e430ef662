package memorystore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
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
	tab, err := s.Open(store.LimitsOf(alg), clock.Local())
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func take[K comparable](t testing.TB, tab store.Table[K], key K, now, cost int64) algorithm.Result {
	t.Helper()
	r, err := tab.Take(ctx, key, now, cost, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func peek[K comparable](t testing.TB, tab store.Table[K], key K, now int64) algorithm.Result {
	t.Helper()
	r, err := tab.Peek(ctx, key, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOpenRejectsServerClock(t *testing.T) {
	_, err := memorystore.New[string]().Open(store.LimitsOf(mustBucket(t, 1, 1)), clock.Server())
	if !errors.Is(err, store.ErrClockUnsupported) {
		t.Errorf("Open(clock.Server()) error = %v, want ErrClockUnsupported", err)
	}
}

func TestExpiredKeysAreSwept(t *testing.T) {
	const n = 1000
	for _, grace := range []time.Duration{0, memorystore.DefaultGrace, time.Minute} {
		t.Run(grace.String(), func(t *testing.T) {
			s := memorystore.New[int](memorystore.WithShards(1), memorystore.WithGrace(grace))
			tab := open(t, s, mustBucket(t, 10, 10)) // one token refills in 100ms
			var resetAfter int64
			for k := range n {
				r := take(t, tab, k, t0, 1)
				resetAfter = max(resetAfter, r.ResetAfter)
			}
			if got := s.Stats().Keys; got != n {
				t.Fatalf("after %d new keys: Stats().Keys = %d, want %d (none expired yet)", n, got, n)
			}
			// Once every key has been full again for the grace period, as
			// many new keys as the shard holds make it sweep them all.
			later := t0 + resetAfter + grace.Microseconds()
			for k := range n {
				take(t, tab, n+k, later, 1)
			}
			if got := s.Stats(); got.Keys != n || got.Evicted != 0 {
				t.Fatalf("after %d new keys at the end of the grace period: Stats() = %+v, want only the %d new keys, none evicted", n, got, n)
			}
			for k := range n {
				if r := peek(t, tab, k, later); r.Remaining != 10 {
					t.Fatalf("Peek(%d) = %+v, want a fresh key", k, r)
				}
			}
		})
	}
}

// TestGraceKeepsExpiredState checks that a key whose state expired less
// than the grace period ago is not dropped by a sweep, and one that expired
// before it is.
func TestGraceKeepsExpiredState(t *testing.T) {
	const grace = time.Second
	s := memorystore.New[string](memorystore.WithShards(1), memorystore.WithGrace(grace))
	tab := open(t, s, mustBucket(t, 10, 10))
	take(t, tab, "short", t0, 1)                               // full again at t0+100ms
	take(t, tab, "long", t0+grace.Microseconds()-100_000+1, 1) // full again 1µs after the first sweep's grace
	sweepAt := t0 + 100_000 + grace.Microseconds()
	for i := range 2 * sweepMin { // enough new keys for a sweep
		take(t, tab, fmt.Sprint("new-", i), sweepAt, 1)
	}
	if got := s.Stats().Keys; got != 2*sweepMin+1 {
		t.Fatalf("Stats().Keys = %d, want %d: only the key expired for the grace period is swept", got, 2*sweepMin+1)
	}
	if r := peek(t, tab, "long", sweepAt); r.Remaining != 10 || r.ResetAfter != 0 {
		t.Errorf("Peek(long) = %+v, want its state, full", r)
	}
}

func TestExpiryKeepsLiveKeys(t *testing.T) {
	s := memorystore.New[string](memorystore.WithShards(1), memorystore.WithGrace(0))
	tab := open(t, s, mustBucket(t, 10, 10))
	take(t, tab, "short", t0, 1)  // full again at t0+100ms
	take(t, tab, "long", t0, 10)  // full again at t0+1s
	for i := range 2 * sweepMin { // enough new keys for a sweep
		take(t, tab, fmt.Sprint("new-", i), t0+100_000+int64(i), 1)
	}
	if got := s.Stats().Keys; got != 2*sweepMin+1 {
		t.Fatalf("Stats().Keys = %d, want %d: only the expired key is swept", got, 2*sweepMin+1)
	}
	if r := peek(t, tab, "long", t0+100_000); r.Remaining != 1 {
		t.Errorf("Peek(long) = %+v, want its state kept (1 token)", r)
	}
}

// TestStreamOfNewKeysStaysBounded feeds a shard a stream of keys never seen
// before, each asking once, with the time moving on: only the keys of the
// last second are live, and those that expired within the grace period
// kept, so the store must not hold many more than that.
func TestStreamOfNewKeysStaysBounded(t *testing.T) {
	for _, grace := range []time.Duration{0, memorystore.DefaultGrace} {
		for name, alg := range allAlgorithms(t) {
			t.Run(fmt.Sprint(name, "/grace=", grace), func(t *testing.T) {
				s := memorystore.New[int](memorystore.WithShards(1), memorystore.WithGrace(grace))
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
				// A sweep leaves at most the ~perSecond live keys and those
				// expired within the grace period; the next one comes after
				// at most as many new keys again.
				kept := perSecond + int(perSecond*grace/time.Second)
				if limit := 2*kept + 2*sweepMin; peak > limit {
					t.Errorf("peak Stats().Keys = %d over %d one-shot keys, want at most %d", peak, total, limit)
				}
				t.Logf("peak Stats().Keys = %d over %d one-shot keys", peak, total)
			})
		}
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

func TestResetRemovesKey(t *testing.T) {
	s := memorystore.New[string]()
	tab := open(t, s, mustBucket(t, 2, 1))
	take(t, tab, "a", t0, 2)
	take(t, tab, "b", t0, 1)
	if got := s.Stats().Keys; got != 2 {
		t.Fatalf("Stats().Keys = %d, want 2", got)
	}
	if err := tab.Reset(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Keys; got != 1 {
		t.Errorf("after Reset(a): Stats().Keys = %d, want 1", got)
	}
	if r := peek(t, tab, "a", t0); r != algorithm.Fresh(2) {
		t.Errorf("Peek(a) after Reset = %+v, want %+v", r, algorithm.Fresh(2))
	}
	if r := peek(t, tab, "b", t0); r.Remaining != 1 {
		t.Errorf("Peek(b) = %+v, want its state kept", r)
	}
	// Resetting a key never seen is not an error.
	if err := tab.Reset(ctx, "never"); err != nil {
		t.Errorf("Reset(never) = %v", err)
	}
}

func TestPeekCreatesNoState(t *testing.T) {
	s := memorystore.New[string]()
	tab := open(t, s, mustBucket(t, 2, 1))
	for i := range 100 {
		if r := peek(t, tab, fmt.Sprint(i), t0); r != algorithm.Fresh(2) {
			t.Fatalf("Peek of a key never seen = %+v, want %+v", r, algorithm.Fresh(2))
		}
	}
	if got := s.Stats().Keys; got != 0 {
		t.Errorf("after peeks only: Stats().Keys = %d, want 0", got)
	}
}

// TestStateIDsAreSeparate checks that limits configured alike but opened
// under different state IDs share no state, and count as two keys.
func TestStateIDsAreSeparate(t *testing.T) {
	s := memorystore.New[string]()
	alg := mustBucket(t, 1, 1)
	var tabs [2]store.Table[string]
	for i, id := range []string{"a", "b"} {
		tab, err := s.Open([]store.Limit{{Algorithm: alg, ID: id}}, clock.Local())
		if err != nil {
			t.Fatal(err)
		}
		tabs[i] = tab
	}
	take(t, tabs[0], "k", t0, 1)
	if r := take(t, tabs[1], "k", t0, 1); !r.Allowed() {
		t.Errorf("second state ID: Take(k) = %+v, want allowed: state IDs share no state", r)
	}
	if got := s.Stats().Keys; got != 2 {
		t.Errorf("Stats().Keys = %d, want 2 (one per state ID)", got)
	}
}

// TestKeysOfEveryKind checks that keys equal under Go's == share state,
// whatever their bits and wherever they are stored, and that keys that
// differ do not, for the key types the store hashes by their bits and for
// those it does not.
func TestKeysOfEveryKind(t *testing.T) {
	type name string
	type pair struct {
		a string
		b int
	}
	long := "a key of more than sixteen bytes, which goes to maphash.String"
	checkKeys(t, []string{"", "a", "user:1000000", long},
		[]string{strings.Clone("a"), "user:" + strconv.Itoa(1000000), strings.Clone(long)},
		[]string{"b", "user:1000001", long[:len(long)-1] + "!"})
	checkKeys(t, []name{"user:1"}, []name{name(strings.Clone("user:1"))}, []name{"user:2"})
	checkKeys(t, []int8{-1, 0, 127}, []int8{-1}, []int8{1, -128})
	checkKeys(t, []uint32{0, 1 << 31}, []uint32{1 << 31}, []uint32{1})
	checkKeys(t, []int{-1, 1 << 40}, []int{1 << 40}, []int{1 << 41})
	checkKeys(t, []float64{0, 1.5}, []float64{math.Copysign(0, -1)}, []float64{-1.5})
	checkKeys(t, []any{"x", 1}, []any{strings.Clone("x"), 1}, []any{int64(1)}) // int 1 and int64 1 differ
	checkKeys(t, []pair{{"a", 1}}, []pair{{strings.Clone("a"), 1}}, []pair{{"a", 2}})
}

// checkKeys takes the one token of a bucket under each of keys, then
// expects each of aliases (equal under == to one of keys) to be denied and
// each of others to be admitted.
func checkKeys[K comparable](t *testing.T, keys, aliases, others []K) {
	t.Helper()
	tab := open(t, memorystore.New[K](), mustBucket(t, 1, 1e-3))
	for _, k := range keys {
		if r := take(t, tab, k, t0, 1); !r.Allowed() {
			t.Fatalf("%T %v: first request denied", k, k)
		}
	}
	for _, k := range aliases {
		if r := take(t, tab, k, t0, 1); r.Allowed() {
			t.Errorf("%T %v: admitted, want denied (an equal key's token is taken)", k, k)
		}
	}
	for _, k := range others {
		if r := take(t, tab, k, t0, 1); !r.Allowed() {
			t.Errorf("%T %v: denied, want admitted (a key of its own)", k, k)
		}
	}
}

func TestMaxKeysIsNeverExceeded(t *testing.T) {
	for _, tc := range []struct{ shards, maxKeys int }{
		{1, 100},
		{16, 160}, // 10 per shard
		{64, 64},  // 1 per shard
	} {
		t.Run(fmt.Sprintf("shards=%d,max=%d", tc.shards, tc.maxKeys), func(t *testing.T) {
			s := memorystore.New[int](memorystore.WithShards(tc.shards), memorystore.WithMaxKeys(tc.maxKeys))
			// One token per hour: no key expires during the test.
			tab := open(t, s, mustBucket(t, 1, 1.0/3600))
			const n = 5000
			for k := range n {
				take(t, tab, k, t0+int64(k), 1)
				if got := s.Stats().Keys; got > tc.maxKeys {
					t.Fatalf("after %d keys: Stats().Keys = %d, over the cap %d", k+1, got, tc.maxKeys)
				}
			}
			st := s.Stats()
			if st.Keys+int(st.Evicted) != n {
				t.Errorf("Stats() = %+v: keys + evicted = %d, want %d", st, st.Keys+int(st.Evicted), n)
			}
			if tc.shards == 1 && st.Keys != tc.maxKeys {
				t.Errorf("one shard: Stats().Keys = %d, want the cap %d", st.Keys, tc.maxKeys)
			}
		})
	}
}

func TestMaxKeysSweepsExpiredBeforeEvicting(t *testing.T) {
	s := memorystore.New[string](memorystore.WithShards(1), memorystore.WithMaxKeys(10))
	tab := open(t, s, mustBucket(t, 10, 10)) // a token refills in 100ms
	for i := range 5 {
		take(t, tab, fmt.Sprint("short", i), t0, 1) // full again at t0+100ms
		take(t, tab, fmt.Sprint("long", i), t0, 10) // full again at t0+1s
	}
	if got := s.Stats().Keys; got != 10 {
		t.Fatalf("Stats().Keys = %d, want 10", got)
	}
	now := t0 + 100_000
	for i := range 5 {
		take(t, tab, fmt.Sprint("new", i), now, 1)
	}
	if got := s.Stats(); got.Keys != 10 || got.Evicted != 0 {
		t.Fatalf("Stats() = %+v, want 10 keys and none evicted: the expired keys make room", got)
	}
	for i := range 5 {
		if r := peek(t, tab, fmt.Sprint("long", i), now); r.Remaining != 1 {
			t.Errorf("Peek(long%d) = %+v, want its state kept (1 token)", i, r)
		}
	}
}

func TestMaxKeysEvictsSoonestToExpire(t *testing.T) {
	// A shard of at most 4 keys: the store samples more keys than that, so
	// it sees them all and picks the one closest to expiry.
	s := memorystore.New[string](memorystore.WithShards(1), memorystore.WithMaxKeys(4))
	tab := open(t, s, mustBucket(t, 10, 10))
	take(t, tab, "a", t0, 5)
	take(t, tab, "b", t0, 2) // expires first: full at t0+200ms
	take(t, tab, "c", t0, 9)
	take(t, tab, "d", t0, 3)
	take(t, tab, "e", t0, 1) // full at t0+100ms, but it is the key being added
	if got := s.Stats(); got.Keys != 4 || got.Evicted != 1 {
		t.Fatalf("Stats() = %+v, want 4 keys, 1 evicted", got)
	}
	for key, want := range map[string]int64{"a": 5, "b": 10, "c": 1, "d": 7, "e": 9} {
		if r := peek(t, tab, key, t0); r.Remaining != want {
			t.Errorf("Peek(%s).Remaining = %d, want %d", key, r.Remaining, want)
		}
	}
	// The evicted key starts again from a fresh state.
	if r := take(t, tab, "b", t0, 10); !r.Allowed() {
		t.Errorf("Take(b, 10) after eviction = %+v, want allowed", r)
	}
}

// TestZeroAllocs checks that deciding allocates nothing, through the
// Limiter, for each algorithm and key type, on a key that already has
// state, and on a steady set of keys whose state expires between their
// requests (a generous limit never approached): such keys keep their slots
// through sweeps rather than being dropped and made again.
func TestZeroAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are slow to measure")
	}
	type config struct {
		limit int64
		// period is how long the algorithm takes to admit limit again:
		// the refill, window or interval.
		period time.Duration
	}
	algs := map[string]func(t testing.TB, c config) algorithm.Algorithm{
		"tokenbucket": func(t testing.TB, c config) algorithm.Algorithm {
			return mustBucket(t, c.limit, float64(c.limit)/c.period.Seconds())
		},
		"tokenbucket-interval": func(t testing.TB, c config) algorithm.Algorithm {
			a, err := tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: c.limit, Tokens: c.limit, Interval: c.period})
			if err != nil {
				t.Fatal(err)
			}
			return a
		},
		"slidinglog": func(t testing.TB, c config) algorithm.Algorithm {
			a, err := slidinglog.New(slidinglog.Config{Limit: min(c.limit, slidinglog.MaxLimit), Window: c.period})
			if err != nil {
				t.Fatal(err)
			}
			return a
		},
		"fixedwindow": func(t testing.TB, c config) algorithm.Algorithm {
			a, err := fixedwindow.New(fixedwindow.Config{Limit: c.limit, Window: c.period})
			if err != nil {
				t.Fatal(err)
			}
			return a
		},
	}
	paths := []struct {
		name    string
		cfg     config
		keys    int
		allowed expect
		step    time.Duration // how far the clock moves between decisions
	}{
		// A sliding log keeps a window of entries: 100µs of them.
		{"allowed", config{algorithm.MaxLimit, time.Hour}, 1, always, 0},
		{"allowed-moving", config{algorithm.MaxLimit, 100 * time.Microsecond}, 1, always, time.Microsecond},
		{"denied", config{1, time.Hour}, 1, never, 0},
		// One request per 10µs, asked every 6µs: a denial now and then,
		// each one recorded for the requests after it.
		{"at-the-limit", config{1, 10 * time.Microsecond}, 1, either, 6 * time.Microsecond},
		// 1000 keys in turn, each back to fresh 10µs after its request
		// and asked again 1ms later: every request finds expired state.
		{"generous", config{1 << 20, 10 * time.Microsecond}, 1000, always, time.Microsecond},
		// The same keys asked every 4s, longer than the grace period:
		// each is dropped and made again, from reused memory.
		{"generous-idle", config{1 << 20, 10 * time.Microsecond}, 1000, always, 4 * time.Millisecond},
	}
	for name, newAlg := range algs {
		for _, p := range paths {
			alg := newAlg(t, p.cfg)
			t.Run(name+"/"+p.name+"/string", func(t *testing.T) {
				keys := make([]string, p.keys)
				for i := range keys {
					keys[i] = fmt.Sprintf("user-%d", i)
				}
				checkZeroAllocs(t, alg, keys, p.allowed, p.step)
			})
			t.Run(name+"/"+p.name+"/int", func(t *testing.T) {
				keys := make([]int, p.keys)
				for i := range keys {
					keys[i] = 1000 + i
				}
				checkZeroAllocs(t, alg, keys, p.allowed, p.step)
			})
		}
	}
}

// expect is what a path's decisions are.
type expect uint8

const (
	always expect = iota // every request is admitted
	never                // every request is denied
	either               // both happen
)

func checkZeroAllocs[K comparable](t *testing.T, alg algorithm.Algorithm, keys []K, allowed expect, step time.Duration) {
	fake := clock.NewFake(time.UnixMicro(t0).Add(30 * time.Minute))
	// One shard, so that where keys fall, and so when slots run out while
	// keys are dropped and made again, does not depend on a random seed.
	st := memorystore.New[K](memorystore.WithShards(1))
	lim, err := ratelimit.New(alg, st, ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	var seen [2]int // denied, admitted
	decide := func() {
		fake.Advance(step)
		d, err := lim.AllowN(ctx, keys[i], 1)
		if err != nil || allowed == always && !d.Allowed() || allowed == never && d.Allowed() {
			t.Fatalf("AllowN(%v) = %+v, %v; want Allowed=%v", keys[i], d, err, allowed == always)
		}
		if d.Allowed() {
			seen[1]++
		} else {
			seen[0]++
		}
		i = (i + 1) % len(keys)
	}
	if allowed == never {
		for _, k := range keys {
			if _, err := lim.AllowN(ctx, k, 1); err != nil { // drain
				t.Fatal(err)
			}
		}
	}
	// Reach the steady state: every key exists, a sliding log holds a
	// full window of entries, and keys dropped and made again find slots.
	for range max(1000, 10*len(keys)) {
		decide()
	}
	// Every allocation counts, not the average rounded down as
	// testing.AllocsPerRun reports it: a page of slots now and then is an
	// allocation too.
	runs := max(1000, 20*len(keys)) // many sweep cycles
	before := st.Stats()
	if got := mallocs(runs, decide); got != 0 {
		t.Errorf("%d allocations in %d decisions on %d existing %T keys, want 0", got, runs, len(keys), keys[0])
	}
	after := st.Stats()
	if allowed == either && (seen[0] == 0 || seen[1] == 0) {
		t.Errorf("%d denied and %d admitted: the path was meant to see both", seen[0], seen[1])
	}
	if idle := step*time.Duration(len(keys)) > memorystore.DefaultGrace; idle {
		if after.Dropped == before.Dropped {
			t.Errorf("Stats() = %+v: no key was dropped, so the test did not see keys made again", after)
		}
	} else if after.Keys != len(keys) || after.Dropped != before.Dropped {
		t.Errorf("Stats() = %+v, want the %d keys in use and none dropped", after, len(keys))
	}
}

// mallocs returns how many heap allocations runs calls of f made, in all.
//
// The count is process-wide: a goroutine of the test binary other than
// the caller (the race detector's, a previous test's timer) may allocate
// meanwhile. So the runs are measured three times and the least count is
// returned: an allocation f makes recurs in every measurement, since each
// covers many of f's cycles; a stray one does not (CI saw 1 allocation in
// 1,000 decisions twice, each time in a full -race run of every package).
func mallocs(runs int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // as testing.AllocsPerRun
	f()                                             // warm up
	least := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			f()
		}
		runtime.ReadMemStats(&after)
		least = min(least, after.Mallocs-before.Mallocs)
		if least == 0 {
			break
		}
	}
	return least
}

// TestConcurrentHotKey runs 8 goroutines, each deciding on keys of its own
// and all on one hot key, at one instant: the hot key admits exactly its
// limit, and every other key is decided as if it were alone.
func TestConcurrentHotKey(t *testing.T) {
	const (
		workers = 8
		keys    = 2000 // per worker
		limit   = 1000 // hot key: fewer than the workers ask for
	)
	for name, alg := range map[string]algorithm.Algorithm{
		"tokenbucket":          mustBucket(t, limit, 1),
		"tokenbucket-interval": mustInterval(t, limit),
		"slidinglog":           mustLog(t, limit),
		"fixedwindow":          mustWindow(t, limit),
	} {
		t.Run(name, func(t *testing.T) {
			s := memorystore.New[string](memorystore.WithShards(4))
			fake := clock.NewFake(time.UnixMicro(t0).Add(10 * time.Minute))
			lim, err := ratelimit.New(alg, s, ratelimit.WithClock(fake))
			if err != nil {
				t.Fatal(err)
			}
			var hot atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 0))
					for i := range keys {
						key := fmt.Sprintf("w%d-%d", w, i)
						for j := range 2 {
							d, err := lim.Allow(ctx, key)
							if err != nil || !d.Allowed() || d.Remaining() != limit-int64(j)-1 {
								errs <- fmt.Errorf("Allow(%s) #%d = %+v, %v; want allowed with %d remaining", key, j+1, d, err, limit-j-1)
								return
							}
						}
						// The hot key, between one and three times per key.
						for range 1 + r.IntN(3) {
							d, err := lim.Allow(ctx, "hot")
							if err != nil {
								errs <- err
								return
							}
							if d.Allowed() {
								hot.Add(1)
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if got := hot.Load(); got != limit {
				t.Errorf("hot key admitted %d requests, want exactly %d", got, limit)
			}
			if got, want := s.Stats().Keys, workers*keys+1; got != want {
				t.Errorf("Stats().Keys = %d, want %d", got, want)
			}
		})
	}
}

func mustInterval(t testing.TB, capacity int64) algorithm.Algorithm {
	t.Helper()
	a, err := tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: capacity, Tokens: 1, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustLog(t testing.TB, limit int64) algorithm.Algorithm {
	t.Helper()
	a, err := slidinglog.New(slidinglog.Config{Limit: limit, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustWindow(t testing.TB, limit int64) algorithm.Algorithm {
	t.Helper()
	a, err := fixedwindow.New(fixedwindow.Config{Limit: limit, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestMaxKeysIsAHardCap checks that the number of keys never exceeds the
// cap, whatever the shard count, including caps smaller than the default
// number of shards.
func TestMaxKeysIsAHardCap(t *testing.T) {
	alg, err := fixedwindow.New(fixedwindow.Config{Limit: 5, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, max := range []int{1, 3, 10, 100, 1000} {
		st := memorystore.New[int](memorystore.WithMaxKeys(max))
		lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clock.NewFake(time.Unix(1e9, 0))))
		if err != nil {
			t.Fatal(err)
		}
		for k := range 5 * max {
			if _, err := lim.Allow(context.Background(), k); err != nil {
				t.Fatal(err)
			}
			if got := st.Stats().Keys; got > max {
				t.Fatalf("WithMaxKeys(%d): %d keys after %d new keys", max, got, k+1)
			}
		}
	}
}

// TestKeyTooLong checks that string keys longer than the store keeps are
// refused by Take, Peek and Reset with ErrKeyTooLong and leave no state,
// that a key of exactly the longest length is kept, and that the limit
// applies to named string types and not to other keys.
func TestKeyTooLong(t *testing.T) {
	type name string
	for _, max := range []int{0, 1, 100} { // 0: the default
		opts := []memorystore.Option{memorystore.WithMaxKeyBytes(max)}
		want := max
		if max == 0 {
			opts, want = nil, store.DefaultMaxKeyBytes
		}
		t.Run(fmt.Sprint("max=", want), func(t *testing.T) {
			s := memorystore.New[string](opts...)
			tab := open(t, s, mustBucket(t, 5, 1))
			fits, long := strings.Repeat("k", want), strings.Repeat("k", want+1)
			if r := take(t, tab, fits, t0, 5); !r.Allowed() {
				t.Errorf("Take of a %d-byte key = %+v, want admitted", want, r)
			}
			if r, err := tab.Take(ctx, long, t0, 1, nil); !errors.Is(err, store.ErrKeyTooLong) {
				t.Errorf("Take of a %d-byte key = %+v, %v; want ErrKeyTooLong", want+1, r, err)
			}
			if r, err := tab.Peek(ctx, long, t0, nil); !errors.Is(err, store.ErrKeyTooLong) {
				t.Errorf("Peek of a %d-byte key = %+v, %v; want ErrKeyTooLong", want+1, r, err)
			}
			if err := tab.Reset(ctx, long); !errors.Is(err, store.ErrKeyTooLong) {
				t.Errorf("Reset of a %d-byte key = %v, want ErrKeyTooLong", want+1, err)
			}
			if got := s.Stats().Keys; got != 1 {
				t.Errorf("Stats().Keys = %d, want 1: the long key is not stored", got)
			}
			if r := peek(t, tab, fits, t0); r.Remaining != 0 {
				t.Errorf("Peek of the %d-byte key = %+v, want it spent", want, r)
			}
		})
	}
	t.Run("named", func(t *testing.T) {
		tab := open(t, memorystore.New[name](memorystore.WithMaxKeyBytes(4)), mustBucket(t, 5, 1))
		if _, err := tab.Take(ctx, "12345", t0, 1, nil); !errors.Is(err, store.ErrKeyTooLong) {
			t.Errorf("Take of a 5-byte named string = %v, want ErrKeyTooLong", err)
		}
	})
	t.Run("int", func(t *testing.T) {
		tab := open(t, memorystore.New[int64](memorystore.WithMaxKeyBytes(1)), mustBucket(t, 5, 1))
		if r := take(t, tab, 1<<62, t0, 1); !r.Allowed() {
			t.Errorf("Take of an int64 key with a 1-byte limit = %+v, want admitted: fixed-size keys are not checked", r)
		}
	})
}
