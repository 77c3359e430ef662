package benchmarks

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/throttled/throttled/v2"
	throttledredis "github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// redisCallers is how many goroutines call Redis at once in the parallel
// benchmarks.
const redisCallers = 64

// trivialBucket is a token bucket in its plainest form: the ceiling any
// script-based limiter can reach from Go is running something like it
// with nothing around the EVALSHA. KEYS[1] the bucket; ARGV[1] capacity,
// ARGV[2] tokens per µs, ARGV[3] now in µs.
const trivialBucket = `
local v = redis.call('GET', KEYS[1])
local cap, rate, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tokens, last = cap, now
if v then
  local sp = string.find(v, ' ', 1, true)
  tokens = math.min(cap, tonumber(string.sub(v, 1, sp - 1)) + (now - tonumber(string.sub(v, sp + 1))) * rate)
end
if tokens < 1 then
  return 0
end
redis.call('SET', KEYS[1], (tokens - 1) .. ' ' .. string.format('%.0f', now), 'PX', math.ceil((cap - tokens + 1) / rate / 1000) + 1)
return 1
`

// BenchmarkRedis compares Redis-backed limiters on a real Redis at
// $RATELIMIT_REDIS_ADDR, with redisCallers concurrent callers in the
// parallel mode (p50/p99 latency reported), and serially.
func BenchmarkRedis(b *testing.B) {
	addr := os.Getenv("RATELIMIT_REDIS_ADDR")
	if addr == "" {
		b.Skip("set RATELIMIT_REDIS_ADDR=host:port of a Redis to run (run.sh starts one)")
	}
	gr := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolSize: redisCallers})
	b.Cleanup(func() { gr.Close() })
	ru, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ru.Close)
	run(b, redisSubjects(gr, ru), redisCallers, []mode{modeSerial, modeParallel})
}

var prefixes int

// prefix returns a key prefix of its own for each benchmark.
func prefix() string {
	prefixes++
	return "bench:" + strconv.Itoa(os.Getpid()) + ":" + strconv.Itoa(prefixes) + ":"
}

// The configurations: allowed never denies during a run (a bucket of 2^30
// refilled at 1e6/s), generous is a burst of 1e9 and 1e9 per hour, denied
// admits one request and then nothing for hours.
func ratelimitOn(b *testing.B, st store.Store[string], keys []string, p path) allowFunc {
	cfg := map[path]tokenbucket.Config{
		allowed:  {Capacity: 1 << 30, Rate: 1e6},
		generous: {Capacity: generousBurst, Rate: generousBurst / 3600.0},
		denied:   {Capacity: 1, Rate: 1e-4},
	}[p]
	alg, err := tokenbucket.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return limiterOn(b, alg, st, keys)
}

// gcraOn is ratelimitOn with the library's GCRA, configured as redis_rate
// is: one unit per µs and a burst of 2^30 (allowed), a burst of 1e9 and
// one unit every 4µs, the whole µs nearest 1e9 per hour (generous), one
// request and then one per 3 hours (denied).
func gcraOn(b *testing.B, st store.Store[string], keys []string, p path) allowFunc {
	cfg := map[path]gcra.Config{
		allowed:  {Burst: 1 << 30, Every: time.Microsecond},
		generous: {Burst: generousBurst, Every: 4 * time.Microsecond},
		denied:   {Burst: 1, Every: 3 * time.Hour},
	}[p]
	alg, err := gcra.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return limiterOn(b, alg, st, keys)
}

// limiterOn returns a Limiter of alg on st, primed with one request per key.
func limiterOn(b *testing.B, alg algorithm.Algorithm, st store.Store[string], keys []string) allowFunc {
	lim, err := ratelimit.New(alg, st, ratelimit.WithName("bench"))
	if err != nil {
		b.Fatal(err)
	}
	allow := func(ctx context.Context, key string) (bool, error) {
		d, err := lim.Allow(ctx, key)
		return d.Allowed(), err
	}
	prime(b, allow, keys, true)
	return allow
}

// rawConfig returns trivialBucket's capacity and tokens per µs for p.
func rawConfig(p path) (capacity, perMicro string) {
	switch p {
	case allowed:
		return "1073741824", "1"
	case generous:
		return "1000000000", "0.27777777777777778"
	}
	return "1", "0.0000000001"
}

func redisSubjects(gr *redis.Client, ru rueidis.Client) []subject {
	return []subject{
		{"ratelimit-rueidis", func(b *testing.B, keys []string, p path) allowFunc {
			st, err := rueidisstore.New[string](ru, rueidisstore.WithPrefix[string](prefix()))
			if err != nil {
				b.Fatal(err)
			}
			return ratelimitOn(b, st, keys, p)
		}},
		{"ratelimit-goredis", func(b *testing.B, keys []string, p path) allowFunc {
			st, err := goredisstore.New[string](gr, goredisstore.WithPrefix[string](prefix()))
			if err != nil {
				b.Fatal(err)
			}
			return ratelimitOn(b, st, keys, p)
		}},
		{"ratelimit-gcra-rueidis", func(b *testing.B, keys []string, p path) allowFunc {
			st, err := rueidisstore.New[string](ru, rueidisstore.WithPrefix[string](prefix()))
			if err != nil {
				b.Fatal(err)
			}
			return gcraOn(b, st, keys, p)
		}},
		{"ratelimit-gcra-goredis", func(b *testing.B, keys []string, p path) allowFunc {
			st, err := goredisstore.New[string](gr, goredisstore.WithPrefix[string](prefix()))
			if err != nil {
				b.Fatal(err)
			}
			return gcraOn(b, st, keys, p)
		}},
		{"raw-rueidis", func(b *testing.B, keys []string, p path) allowFunc {
			lua := rueidis.NewLuaScript(trivialBucket)
			pre := prefix()
			capacity, rate := rawConfig(p)
			allow := func(ctx context.Context, key string) (bool, error) {
				now := strconv.FormatInt(time.Now().UnixMicro(), 10)
				v, err := lua.Exec(ctx, ru, []string{pre + key}, []string{capacity, rate, now}).AsInt64()
				return v == 1, err
			}
			prime(b, allow, keys, true)
			return allow
		}},
		{"raw-goredis", func(b *testing.B, keys []string, p path) allowFunc {
			script := redis.NewScript(trivialBucket)
			pre := prefix()
			capacity, rate := rawConfig(p)
			allow := func(ctx context.Context, key string) (bool, error) {
				v, err := script.Run(ctx, gr, []string{pre + key}, capacity, rate, time.Now().UnixMicro()).Int64()
				return v == 1, err
			}
			prime(b, allow, keys, true)
			return allow
		}},
		{"redis_rate", func(b *testing.B, keys []string, p path) allowFunc {
			lim := redis_rate.NewLimiter(gr)
			limit := map[path]redis_rate.Limit{
				allowed:  {Rate: 1_000_000, Burst: 1 << 30, Period: time.Second},
				generous: {Rate: generousBurst, Burst: generousBurst, Period: time.Hour},
				denied:   {Rate: 1, Burst: 1, Period: 3 * time.Hour},
			}[p]
			pre := prefix()
			allow := func(ctx context.Context, key string) (bool, error) {
				r, err := lim.Allow(ctx, pre+key, limit)
				if err != nil {
					return false, err
				}
				return r.Allowed > 0, nil
			}
			prime(b, allow, keys, true)
			return allow
		}},
		{"ulule", func(b *testing.B, keys []string, p path) allowFunc {
			st, err := ululeredis.NewStoreWithOptions(gr, ulule.StoreOptions{Prefix: prefix()})
			if err != nil {
				b.Fatal(err)
			}
			r := map[path]ulule.Rate{
				allowed:  {Period: time.Hour, Limit: 1 << 40},
				generous: {Period: time.Hour, Limit: generousBurst},
				denied:   {Period: 3 * time.Hour, Limit: 1},
			}[p]
			lim := ulule.New(st, r)
			allow := func(ctx context.Context, key string) (bool, error) {
				c, err := lim.Get(ctx, key)
				return !c.Reached, err
			}
			prime(b, allow, keys, true)
			return allow
		}},
		{"throttled", func(b *testing.B, keys []string, p path) allowFunc {
			st, err := throttledredis.NewCtx(gr, prefix())
			if err != nil {
				b.Fatal(err)
			}
			q := map[path]throttled.RateQuota{
				allowed:  {MaxRate: throttled.PerSec(1_000_000), MaxBurst: 1 << 30},
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
	}
}
