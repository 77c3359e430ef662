package benchmarks

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	throttledredis "github.com/throttled/throttled/v2/store/goredisstore.v9"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"
	"golang.org/x/time/rate"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store"
	rlmemory "github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// The bytes-per-key measurements are measurements, not tests: they run
// only when asked, and print markdown tables on standard output.
//
//	cd benchmarks && RATELIMIT_MEASURE_MEMORY=1 \
//	  go test -run TestBytesPerKey -v -count=1 -timeout 30m .
//
// Every limiter gets the "denied" configuration of the benchmarks: one
// request, then nothing for hours (1 token refilled per 10 000 s, or 1 per
// 3 h), so that every key is still alive when it is counted. Each key gets
// one request, which is allowed.
const (
	envMeasure = "RATELIMIT_MEASURE_MEMORY" // "1" to run the measurements
	memKeys    = 1_000_000                  // keys in the in-process stores
	redisKeys  = 100_000                    // keys in Redis
	writers    = 64                         // goroutines writing Redis keys at once
	period     = 3 * time.Hour              // the peers' window or emission interval
)

// ourAlgorithms are the library's algorithms, in the configurations of the
// benchmarks' denied path.
var ourAlgorithms = []struct {
	name string
	alg  func() (algorithm.Algorithm, error)
}{
	{"token bucket (continuous)", func() (algorithm.Algorithm, error) {
		return tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1e-4})
	}},
	{"token bucket (interval)", func() (algorithm.Algorithm, error) {
		return tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 1, Tokens: 1, Interval: period})
	}},
	{"sliding log (1 entry)", func() (algorithm.Algorithm, error) {
		return slidinglog.New(slidinglog.Config{Limit: 1, Window: period})
	}},
	{"fixed window", func() (algorithm.Algorithm, error) {
		return fixedwindow.New(fixedwindow.Config{Limit: 1, Window: period})
	}},
	{"GCRA", func() (algorithm.Algorithm, error) {
		return gcra.New(gcra.Config{Burst: 1, Every: period})
	}},
	{"sliding-window counter", func() (algorithm.Algorithm, error) {
		return slidingwindow.New(slidingwindow.Config{Limit: 1, Window: period})
	}},
}

func skipUnlessMeasuring(t *testing.T) {
	if os.Getenv(envMeasure) != "1" {
		t.Skipf("a measurement, not a test: set %s=1 to run it", envMeasure)
	}
}

// inProcess is one in-process limiter: open returns its allowFunc (which
// holds everything the limiter keeps) and a function that stops it.
type inProcess struct {
	lib, alg string
	open     func(t *testing.T) (allowFunc, func())
}

func inProcessSubjects() []inProcess {
	var subjects []inProcess
	for _, a := range ourAlgorithms {
		subjects = append(subjects, inProcess{"ratelimit (memorystore)", a.name, func(t *testing.T) (allowFunc, func()) {
			alg, err := a.alg()
			if err != nil {
				t.Fatal(err)
			}
			lim, err := ratelimit.New(alg, rlmemory.New[string]())
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context, key string) (bool, error) {
				d, err := lim.Allow(ctx, key)
				return d.Allowed(), err
			}, func() {}
		}})
	}
	return append(subjects,
		inProcess{"x/time/rate (map + mutex)", "token bucket", func(*testing.T) (allowFunc, func()) {
			var mu sync.Mutex
			limiters := map[string]*rate.Limiter{}
			return func(_ context.Context, key string) (bool, error) {
				mu.Lock()
				l, ok := limiters[key]
				if !ok {
					l = rate.NewLimiter(1e-4, 1)
					limiters[key] = l
				}
				mu.Unlock()
				return l.Allow(), nil
			}, func() {}
		}},
		inProcess{"sethvargo/go-limiter memorystore", "token bucket", func(t *testing.T) (allowFunc, func()) {
			st, err := memorystore.New(&memorystore.Config{Tokens: 1, Interval: period})
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context, key string) (bool, error) {
				_, _, _, ok, err := st.Take(ctx, key)
				return ok, err
			}, func() { st.Close(context.Background()) }
		}},
		inProcess{"ulule/limiter memory store", "fixed window", func(*testing.T) (allowFunc, func()) {
			lim := ulule.New(ululememory.NewStore(), ulule.Rate{Period: period, Limit: 1})
			return func(ctx context.Context, key string) (bool, error) {
				c, err := lim.Get(ctx, key)
				return !c.Reached, err
			}, func() {}
		}},
		inProcess{"throttled memstore", "GCRA", func(t *testing.T) (allowFunc, func()) {
			st, err := memstore.NewCtx(0)
			if err != nil {
				t.Fatal(err)
			}
			lim, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerDuration(1, period)})
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context, key string) (bool, error) {
				limited, _, err := lim.RateLimitCtx(ctx, key, 1)
				return !limited, err
			}, func() {}
		}},
	)
}

// TestBytesPerKeyMemory measures the Go heap each in-process limiter holds
// per key: HeapAlloc after two collections, before the limiter is created
// and after memKeys keys each had one allowed request, divided by
// memKeys. The key strings are built beforehand and are alive in both
// readings, so they are not counted for anyone; a limiter that copies or
// derives a key string of its own pays for that copy.
func TestBytesPerKeyMemory(t *testing.T) {
	skipUnlessMeasuring(t)
	ctx := context.Background()
	keys := makeKeys(memKeys)
	start := time.Now()
	type row struct {
		lib, alg string
		perKey   float64
		took     time.Duration
	}
	var rows []row
	for _, s := range inProcessSubjects() {
		before := heapAlloc()
		began := time.Now()
		allow, stop := s.open(t)
		for _, k := range keys {
			if ok, err := allow(ctx, k); err != nil || !ok {
				t.Fatalf("%s: first request for %s: allowed %v, %v; want allowed", s.lib, k, ok, err)
			}
		}
		took := time.Since(began)
		after := heapAlloc()
		// The state is still there: a second request is denied.
		for _, k := range []string{keys[0], keys[len(keys)-1]} {
			if ok, err := allow(ctx, k); err != nil || ok {
				t.Fatalf("%s: second request for %s: allowed %v, %v; want denied", s.lib, k, ok, err)
			}
		}
		runtime.KeepAlive(allow)
		stop()
		rows = append(rows, row{s.lib, s.alg, float64(int64(after)-int64(before)) / memKeys, took})
	}
	runtime.KeepAlive(keys)

	fmt.Printf("\nGo heap per key, in process: %d keys like %q, one allowed request each; %s, %s/%s, GOMAXPROCS=%d; measured in %v.\n",
		memKeys, keys[0], runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), time.Since(start).Round(time.Second))
	fmt.Printf("bytes/key = (HeapAlloc after − before) / keys, each after runtime.GC() twice; the key strings exist before\n")
	fmt.Printf("and are not counted (a library's own copy of a key is). Configurations: 1 request per 3 h (rate 1e-4/s).\n\n")
	fmt.Println("| library | algorithm | bytes/key | time to insert |")
	fmt.Println("| --- | --- | ---: | ---: |")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %.1f | %v |\n", r.lib, r.alg, r.perKey, r.took.Round(10*time.Millisecond))
	}
	fmt.Println()
}

// heapAlloc returns HeapAlloc after two full collections (the second
// frees what finalizers of the first kept).
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// inRedis is one Redis-backed limiter: key is the Redis key it writes for
// a user key; open returns an allowFunc on fresh clients of addr and a
// function that closes them.
type inRedis struct {
	lib, alg string
	key      func(user string) string
	open     func(t *testing.T, addr string) (allowFunc, func())
}

func goRedisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: writers, ContextTimeoutEnabled: true})
}

func redisSubjectsForBytes() []inRedis {
	var subjects []inRedis
	for _, a := range ourAlgorithms {
		alg, err := a.alg()
		if err != nil {
			panic(err) // the configurations are fixed
		}
		id := store.DefaultID(alg.Spec())
		subjects = append(subjects, inRedis{"ratelimit (rueidisstore)", a.name,
			func(u string) string {
				// The key's hash, or a sliding log's sorted set.
				if tag, _ := algorithm.TagOf(alg); tag.Kind == slidinglog.Kind {
					return luascript.LogKey(rueidisstore.DefaultPrefix+"{"+u+"}", id)
				}
				return luascript.HashKey(rueidisstore.DefaultPrefix + "{" + u + "}")
			},
			func(t *testing.T, addr string) (allowFunc, func()) {
				alg, err := a.alg()
				if err != nil {
					t.Fatal(err)
				}
				c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
				if err != nil {
					t.Fatal(err)
				}
				st, err := rueidisstore.New[string](c) // the default prefix
				if err != nil {
					t.Fatal(err)
				}
				lim, err := ratelimit.New(alg, st, ratelimit.WithName(id)) // the 8-byte field the layout was measured with
				if err != nil {
					t.Fatal(err)
				}
				return func(ctx context.Context, key string) (bool, error) {
					d, err := lim.Allow(ctx, key)
					return d.Allowed(), err
				}, c.Close
			}})
	}
	// Two limits of one key in a Policy: two fields of one hash.
	subjects = append(subjects, inRedis{"ratelimit (rueidisstore)", "policy: token bucket + fixed window",
		func(u string) string { return luascript.HashKey(rueidisstore.DefaultPrefix + "{" + u + "}") },
		func(t *testing.T, addr string) (allowFunc, func()) {
			var limits []ratelimit.Limit
			for _, a := range ourAlgorithms {
				if a.name == "token bucket (continuous)" || a.name == "fixed window" {
					alg, err := a.alg()
					if err != nil {
						t.Fatal(err)
					}
					// Fields "api/token" and "api/fixed": 9 bytes each.
					limits = append(limits, ratelimit.Limit{Name: strings.Fields(a.name)[0], Algorithm: alg})
				}
			}
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			st, err := rueidisstore.New[string](c)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ratelimit.NewPolicy(st, limits, ratelimit.WithName("api"))
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context, key string) (bool, error) {
				d, err := p.Allow(ctx, key)
				return d.Allowed(), err
			}, c.Close
		}})
	return append(subjects,
		inRedis{"go-redis/redis_rate v10", "GCRA",
			func(u string) string { return "rate:" + u }, // its fixed prefix
			func(_ *testing.T, addr string) (allowFunc, func()) {
				c := goRedisClient(addr)
				lim := redis_rate.NewLimiter(c)
				limit := redis_rate.Limit{Rate: 1, Burst: 1, Period: period}
				return func(ctx context.Context, key string) (bool, error) {
					r, err := lim.Allow(ctx, key, limit)
					if err != nil {
						return false, err
					}
					return r.Allowed > 0, nil
				}, func() { c.Close() }
			}},
		inRedis{"ulule/limiter redis store", "fixed window",
			func(u string) string { return ulule.DefaultPrefix + ":" + u },
			func(t *testing.T, addr string) (allowFunc, func()) {
				c := goRedisClient(addr)
				st, err := ululeredis.NewStore(c) // the default prefix
				if err != nil {
					t.Fatal(err)
				}
				lim := ulule.New(st, ulule.Rate{Period: period, Limit: 1})
				return func(ctx context.Context, key string) (bool, error) {
					c, err := lim.Get(ctx, key)
					return !c.Reached, err
				}, func() { c.Close() }
			}},
		inRedis{"throttled goredisstore.v9", "GCRA",
			func(u string) string { return "throttled:" + u }, // the prefix of its example
			func(t *testing.T, addr string) (allowFunc, func()) {
				c := goRedisClient(addr)
				st, err := throttledredis.NewCtx(c, "throttled:")
				if err != nil {
					t.Fatal(err)
				}
				lim, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerDuration(1, period)})
				if err != nil {
					t.Fatal(err)
				}
				return func(ctx context.Context, key string) (bool, error) {
					limited, _, err := lim.RateLimitCtx(ctx, key, 1)
					return !limited, err
				}, func() { c.Close() }
			}},
	)
}

// TestBytesPerKeyRedis measures the Redis memory each Redis-backed limiter
// uses per key, through each library's own code, on a private redis-server
// started on a free loopback port and killed at the end: the growth of
// used_memory (INFO memory) over redisKeys keys, one allowed request
// each, divided by redisKeys. Between libraries the server is flushed; a
// first request on a key outside the range, before the baseline, loads
// each library's scripts, and every client is closed before used_memory
// is read, so that neither scripts nor client buffers are counted.
func TestBytesPerKeyRedis(t *testing.T) {
	skipUnlessMeasuring(t)
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not on the PATH")
	}
	addr := startRedis(t)
	m := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1})
	defer m.Close()
	server := redistest.Info(t, m)
	users := makeKeys(redisKeys + 1) // the last one warms up
	start := time.Now()

	type row struct {
		lib, alg, key string
		perKey        float64
		usage         int64
		value, ttl    string
	}
	var rows []row
	for _, s := range redisSubjectsForBytes() {
		perKey := measureRedis(t, m, s, users)
		key := s.key(users[1]) // users[0] had a second request
		usage, value, ttl := describeKey(t, m, key)
		rows = append(rows, row{s.lib, s.alg, key, perKey, usage, value, ttl})
	}

	fmt.Printf("\nRedis memory per key: %d keys, one allowed request each; redis-server %s (%s, %s-bit), private, on %s; measured in %v.\n",
		redisKeys, server["redis_version"], server["mem_allocator"], server["arch_bits"], addr, time.Since(start).Round(time.Second))
	fmt.Printf("bytes/key = (used_memory after − before) / keys; MEMORY USAGE (SAMPLES 0) is Redis's estimate for the sample key,\n")
	fmt.Printf("without its entries in the keyspace and expires tables. Configurations: 1 request per 3 h (rate 1e-4/s).\n\n")
	fmt.Println("| library | algorithm | sample key | bytes/key | MEMORY USAGE | value | PTTL |")
	fmt.Println("| --- | --- | --- | ---: | ---: | --- | ---: |")
	for _, r := range rows {
		fmt.Printf("| %s | %s | `%s` | %.1f | %d | %s | %s |\n", r.lib, r.alg, r.key, r.perKey, r.usage, r.value, r.ttl)
	}
	fmt.Println()
}

// measureRedis returns the growth of used_memory per key when s writes the
// keys of users[:len(users)-1], after a warm-up on the last user.
func measureRedis(t *testing.T, m *redis.Client, s inRedis, users []string) float64 {
	t.Helper()
	ctx := t.Context()
	n := len(users) - 1
	allow, done := s.open(t, m.Options().Addr)
	if ok, err := allow(ctx, users[n]); err != nil || !ok {
		t.Fatalf("%s: warming up: allowed %v, %v; want allowed", s.lib, ok, err)
	}
	done()
	if err := m.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before := redistest.SettledUsedMemory(t, m)

	allow, done = s.open(t, m.Options().Addr)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errs = make(chan error, writers)
	)
	wg.Add(writers)
	for range writers {
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if ok, err := allow(ctx, users[i]); err != nil || !ok {
					errs <- fmt.Errorf("%s: %s: allowed %v, %v; want allowed", s.lib, users[i], ok, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The state is there: a second request is denied.
	if ok, err := allow(ctx, users[0]); err != nil || ok {
		t.Fatalf("%s: second request for %s: allowed %v, %v; want denied", s.lib, users[0], ok, err)
	}
	done()
	after := redistest.SettledUsedMemory(t, m)
	if got, err := m.DBSize(ctx).Result(); err != nil || got != int64(n) {
		t.Fatalf("%s: DBSIZE = %d, %v; want %d, one key per user", s.lib, got, err, n)
	}
	return float64(after-before) / float64(n)
}

// describeKey returns MEMORY USAGE of key, what it holds (type, encoding,
// size) and its PTTL, or "none" when it has no TTL.
func describeKey(t *testing.T, m *redis.Client, key string) (usage int64, value, ttl string) {
	t.Helper()
	ctx := t.Context()
	usage, err := m.MemoryUsage(ctx, key, 0).Result()
	if err != nil {
		t.Fatalf("MEMORY USAGE %s: %v (is this the key the library writes?)", key, err)
	}
	typ := m.Type(ctx, key).Val()
	enc := m.ObjectEncoding(ctx, key).Val()
	switch typ {
	case "string":
		v := m.Get(ctx, key).Val()
		if strconv.Quote(v) == `"`+v+`"` {
			value = fmt.Sprintf("string (%s) `%s`", enc, v)
		} else {
			value = fmt.Sprintf("string (%s), %d raw bytes", enc, len(v))
		}
	case "zset":
		value = fmt.Sprintf("zset (%s), %d member(s)", enc, m.ZCard(ctx, key).Val())
	case "hash":
		value = fmt.Sprintf("hash (%s), %d field(s)", enc, m.HLen(ctx, key).Val())
	default:
		value = fmt.Sprintf("%s (%s)", typ, enc)
	}
	pttl, err := m.Do(ctx, "PTTL", key).Int64()
	switch {
	case err != nil:
		t.Fatalf("PTTL %s: %v", key, err)
	case pttl == -1:
		ttl = "none"
	default:
		ttl = (time.Duration(pttl) * time.Millisecond).Round(time.Second).String()
	}
	return usage, value, ttl
}

// envMeasureAddr names a Redis the measurement may use instead of starting
// one: it must be a server of its own, which the measurement flushes.
const envMeasureAddr = "RATELIMIT_MEASURE_REDIS_ADDR"

// startRedis starts a private redis-server on a free loopback port, with
// neither snapshots nor an append-only file, and kills it (by its PID) when
// the test ends; or, with $RATELIMIT_MEASURE_REDIS_ADDR set, uses that
// server. It returns its address.
func startRedis(t *testing.T) string {
	t.Helper()
	if addr := os.Getenv(envMeasureAddr); addr != "" {
		return addr
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", port, "--dir", dir,
		"--save", "", "--appendonly", "no")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for range 100 {
		if c.Ping(context.Background()).Err() == nil {
			return addr
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "log"))
	t.Fatalf("redis-server on %s did not answer:\n%s", addr, out)
	return ""
}
