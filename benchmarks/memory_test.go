package benchmarks

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	rlmemory "github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// The token-bucket configurations every library gets, per path (see
// path): allowed is a huge bucket refilled at 1e9/s that never runs out
// during a run; generous is a burst of 1e9 refilled at 1e9 per hour, never
// approached; denied admits one request and then nothing for hours. Where
// a library counts in whole tokens per interval it gets the nearest
// equivalent.
const (
	allowedRate  = 1e9
	allowedBurst = 1 << 30
)

// BenchmarkMemory compares in-process token buckets.
//
//	go test -run='^$' -bench=Memory -benchmem -count=6 . | tee memory.txt
//	benchstat -col /lib memory.txt
func BenchmarkMemory(b *testing.B) {
	run(b, memorySubjects, 0, []mode{modeSerial, modeParallel, modeDisjoint})
}

var memorySubjects = []subject{
	{"ratelimit", func(b *testing.B, keys []string, p path) allowFunc {
		cfg := map[path]tokenbucket.Config{
			allowed:  {Capacity: algorithm.MaxLimit, Rate: allowedRate},
			generous: {Capacity: generousBurst, Rate: generousBurst / 3600.0},
			denied:   {Capacity: 1, Rate: 1e-4}, // one request, then 3 hours
		}[p]
		alg, err := tokenbucket.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		lim, err := ratelimit.New(alg, rlmemory.New[string]())
		if err != nil {
			b.Fatal(err)
		}
		allow := func(ctx context.Context, key string) (bool, error) {
			d, err := lim.Allow(ctx, key)
			return d.Allowed(), err
		}
		if p != allowed {
			prime(b, allow, keys, true)
			return allow
		}
		// Half the bucket, so that a key stays far from full for the
		// whole run.
		for _, k := range keys {
			if d, err := lim.AllowN(context.Background(), k, int(algorithm.MaxLimit/2)); err != nil || !d.Allowed() {
				b.Fatalf("priming %s: %+v %v", k, d, err)
			}
		}
		return allow
	}},
	{"x-time-rate", func(b *testing.B, keys []string, p path) allowFunc {
		// The fastest common way to key golang.org/x/time/rate: a
		// sync.Map of limiters, read without a lock once a key exists.
		r, burst := map[path]rate.Limit{allowed: allowedRate, generous: generousBurst / 3600.0, denied: 1e-4}[p],
			map[path]int{allowed: allowedBurst, generous: generousBurst, denied: 1}[p]
		var limiters sync.Map
		allow := func(_ context.Context, key string) (bool, error) {
			l, ok := limiters.Load(key)
			if !ok {
				l, _ = limiters.LoadOrStore(key, rate.NewLimiter(r, burst))
			}
			return l.(*rate.Limiter).Allow(), nil
		}
		prime(b, allow, keys, true)
		return allow
	}},
	{"sethvargo", func(b *testing.B, keys []string, p path) allowFunc {
		// go-limiter hands out an interval's tokens as the interval
		// passes, so a short interval denies a hot key; an hour's worth
		// never runs out.
		cfg := map[path]*memorystore.Config{
			allowed:  {Tokens: 1 << 40, Interval: time.Hour},
			generous: {Tokens: generousBurst, Interval: time.Hour},
			denied:   {Tokens: 1, Interval: 3 * time.Hour},
		}[p]
		st, err := memorystore.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close(context.Background()) })
		allow := func(ctx context.Context, key string) (bool, error) {
			_, _, _, ok, err := st.Take(ctx, key)
			return ok, err
		}
		prime(b, allow, keys, true)
		return allow
	}},
	{"ulule", func(b *testing.B, keys []string, p path) allowFunc {
		r := map[path]ulule.Rate{
			allowed:  {Period: time.Second, Limit: allowedBurst},
			generous: {Period: time.Hour, Limit: generousBurst},
			denied:   {Period: 3 * time.Hour, Limit: 1},
		}[p]
		lim := ulule.New(ululememory.NewStore(), r)
		allow := func(ctx context.Context, key string) (bool, error) {
			c, err := lim.Get(ctx, key)
			return !c.Reached, err
		}
		prime(b, allow, keys, true)
		return allow
	}},
	{"throttled", func(b *testing.B, keys []string, p path) allowFunc {
		st, err := memstore.NewCtx(0)
		if err != nil {
			b.Fatal(err)
		}
		q := map[path]throttled.RateQuota{
			allowed:  {MaxRate: throttled.PerSec(int(allowedRate)), MaxBurst: allowedBurst},
			generous: {MaxRate: throttled.PerHour(generousBurst), MaxBurst: generousBurst},
			denied:   {MaxRate: throttled.PerDuration(1, 3*time.Hour), MaxBurst: 0},
		}[p]
		lim, err := throttled.NewGCRARateLimiterCtx(st, q)
		if err != nil {
			b.Fatal(err)
		}
		allow := func(ctx context.Context, key string) (bool, error) {
			limited, _, err := lim.RateLimitCtx(ctx, key, 1)
			return !limited, err
		}
		prime(b, allow, keys, true)
		return allow
	}},
	{"bare", bareSetup},
}

// bareSetup is not a limiter: it is a decision stripped to what any
// exact in-process limiter does, as a reference for the others. It reads
// the clock once (the monotonic reading alone, as ratelimit and go-limiter
// do), finds the key's counter in a Go map that is never written during
// the run, so it takes no lock, and adds to the counter atomically when
// the request is admitted: an exact limit shared by goroutines writes the
// key's state on every admitted decision, and a denied request only reads
// it. It decides nothing; its answers are the path's.
//
// On one key in the parallel mode the counter's cache line moves between
// the cores on every admitted decision, as the state of any exact
// limiter's key must: that row shows what the hardware leaves of a second
// core on one key.
func bareSetup(b *testing.B, keys []string, p path) allowFunc {
	counters := make(map[string]*atomic.Int64, len(keys))
	for _, k := range keys {
		counters[k] = new(atomic.Int64)
	}
	start := time.Now()
	admit := p.admits()
	return func(_ context.Context, key string) (bool, error) {
		now := int64(time.Since(start))
		c := counters[key]
		if !admit {
			return c.Load() > now, nil
		}
		c.Add(1)
		return true, nil
	}
}
