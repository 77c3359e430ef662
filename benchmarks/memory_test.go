package benchmarks

import (
	"context"
	"sync"
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

// The token-bucket configurations every library gets: allowed never
// denies during a run, denied admits one request and then nothing for
// hours. Where a library counts in whole tokens per interval it gets the
// nearest equivalent.
const (
	allowedRate  = 1e9
	allowedBurst = 1 << 30
)

// BenchmarkMemory compares in-process token buckets.
//
//	go test -run='^$' -bench=Memory -benchmem -count=6 . | tee memory.txt
//	benchstat -col /lib memory.txt
func BenchmarkMemory(b *testing.B) {
	run(b, memorySubjects, 0, []string{"serial", "parallel"})
}

var memorySubjects = []subject{
	{"ratelimit", func(b *testing.B, keys []string, allowed bool) allowFunc {
		cfg := tokenbucket.Config{Capacity: 1, Rate: 1e-4} // one request, then 3 hours
		if allowed {
			cfg = tokenbucket.Config{Capacity: algorithm.MaxLimit, Rate: allowedRate}
		}
		alg, err := tokenbucket.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		lim, err := ratelimit.New(alg, rlmemory.New[string]())
		if err != nil {
			b.Fatal(err)
		}
		// Half the bucket, so that a key stays far from full (and alive)
		// for the whole run; the denied bucket is drained by the first.
		ctx := context.Background()
		for _, k := range keys {
			n := 1
			if allowed {
				n = int(algorithm.MaxLimit / 2)
			}
			if d, err := lim.AllowN(ctx, k, n); err != nil || !d.Allowed {
				b.Fatalf("priming %s: %+v %v", k, d, err)
			}
		}
		return func(ctx context.Context, key string) (bool, error) {
			d, err := lim.Allow(ctx, key)
			return d.Allowed, err
		}
	}},
	{"x-time-rate", func(b *testing.B, keys []string, allowed bool) allowFunc {
		// The usual way to key golang.org/x/time/rate: a map of limiters
		// behind a mutex.
		r, burst := rate.Limit(1e-4), 1
		if allowed {
			r, burst = allowedRate, allowedBurst
		}
		var mu sync.Mutex
		limiters := map[string]*rate.Limiter{}
		allow := func(_ context.Context, key string) (bool, error) {
			mu.Lock()
			l, ok := limiters[key]
			if !ok {
				l = rate.NewLimiter(r, burst)
				limiters[key] = l
			}
			mu.Unlock()
			return l.Allow(), nil
		}
		prime(b, allow, keys, true)
		return allow
	}},
	{"sethvargo", func(b *testing.B, keys []string, allowed bool) allowFunc {
		cfg := &memorystore.Config{Tokens: 1, Interval: 3 * time.Hour}
		if allowed {
			// go-limiter hands out an interval's tokens as the interval passes,
			// so a short interval denies a hot key; an hour's worth never runs out.
			cfg = &memorystore.Config{Tokens: 1 << 40, Interval: time.Hour}
		}
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
	{"ulule", func(b *testing.B, keys []string, allowed bool) allowFunc {
		r := ulule.Rate{Period: 3 * time.Hour, Limit: 1}
		if allowed {
			r = ulule.Rate{Period: time.Second, Limit: allowedBurst}
		}
		lim := ulule.New(ululememory.NewStore(), r)
		allow := func(ctx context.Context, key string) (bool, error) {
			c, err := lim.Get(ctx, key)
			return !c.Reached, err
		}
		prime(b, allow, keys, true)
		return allow
	}},
	{"throttled", func(b *testing.B, keys []string, allowed bool) allowFunc {
		st, err := memstore.NewCtx(0)
		if err != nil {
			b.Fatal(err)
		}
		q := throttled.RateQuota{MaxRate: throttled.PerDuration(1, 3*time.Hour), MaxBurst: 0}
		if allowed {
			q = throttled.RateQuota{MaxRate: throttled.PerSec(int(allowedRate)), MaxBurst: allowedBurst}
		}
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
}
