package redismem_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

const (
	envMeasure  = "RATELIMIT_MEASURE_MEMORY" // "1" to run the measurement
	envKeys     = "RATELIMIT_MEASURE_KEYS"   // how many keys; default defaultKeys
	defaultKeys = 100_000
	// prefix is the stores' key prefix: keys look like "rl:{user:1234567}".
	prefix = "rl:"
	// writers is how many goroutines write keys at once.
	writers = 64
	// perDay is the token bucket's rate, 100 tokens a day: keys live long
	// enough (a TTL of 864 s after one request) to be counted.
	perDay = 100.0 / 86400
)

// user returns the i-th user key, "user:1000000" onward: seven digits.
func user(i int) string { return "user:" + strconv.Itoa(1_000_000+i) }

// The library's configurations. Every key's TTL is many minutes, so that
// nothing expires while keys are written and counted.
var cases = []struct {
	name     string
	alg      func() (algorithm.Algorithm, error)
	requests int // allowed requests per key
}{
	{"tokenbucket 100/day, 1 request (whole tokens)", tokenBucket, 1},
	{"tokenbucket 100/day, 2 requests (fractional tokens)", tokenBucket, 2},
	{"tokenbucket-interval 100, +1 per 15 min, 1 request", func() (algorithm.Algorithm, error) {
		return tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 100, Tokens: 1, Interval: 15 * time.Minute})
	}, 1},
	{"slidinglog 100/h, 1 entry", slidingLog, 1},
	{"slidinglog 100/h, 10 entries", slidingLog, 10},
	{"fixedwindow 100/day, 1 request", func() (algorithm.Algorithm, error) {
		return fixedwindow.New(fixedwindow.Config{Limit: 100, Window: 24 * time.Hour})
	}, 1},
}

func tokenBucket() (algorithm.Algorithm, error) {
	return tokenbucket.New(tokenbucket.Config{Capacity: 100, Rate: perDay})
}

func slidingLog() (algorithm.Algorithm, error) {
	return slidinglog.New(slidinglog.Config{Limit: 100, Window: time.Hour})
}

// The two client libraries, each opening a store on a fresh client.
var clients = []struct {
	name string
	open func(t *testing.T, addr string) (store.Store[string], func())
}{
	{"go-redis", func(t *testing.T, addr string) (store.Store[string], func()) {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolSize: writers})
		st, err := goredisstore.New[string](c, goredisstore.WithPrefix[string](prefix))
		if err != nil {
			t.Fatal(err)
		}
		return st, func() { c.Close() }
	}},
	{"rueidis", func(t *testing.T, addr string) (store.Store[string], func()) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		st, err := rueidisstore.New[string](c, rueidisstore.WithPrefix[string](prefix))
		if err != nil {
			t.Fatal(err)
		}
		return st, c.Close
	}},
}

// jan2017 is the epoch of redis_rate's instants, in Unix seconds.
const jan2017 = 1483228800

// Emulations: keys written with a plain SET, for comparison with what the
// library writes. The first is the shape of a go-redis/redis_rate v10 key
// ("rate:" + key, the GCRA's theoretical arrival time in seconds since
// 2017 as a Lua number, which Redis 7.0 formats with %.17g, EX the reset
// time in whole seconds); it is an emulation, not redis_rate itself. The
// others are the token bucket's state as the library writes it (a check
// on the method) and candidate encodings of it.
var emulations = []struct {
	name  string
	key   func(i int) string
	value func(i int, now time.Time) string
	ttl   time.Duration // 0 for none
}{
	{"emulated redis_rate v10 key: float TAT string, EX", func(i int) string { return "rate:" + user(i) },
		func(_ int, now time.Time) string {
			tat := float64(now.Unix()-jan2017) + float64(now.Nanosecond()/1000)/1e6
			return fmt.Sprintf("%.17g", tat+86400.0/100) // + one emission interval
		}, 864 * time.Second},
	{"emulated tokenbucket state as the script writes it (fractional tokens)", plainKey, bucketState, 1728 * time.Second},
	{"the same without a TTL", plainKey, bucketState, 0},
	{"the same with a TTL, key without the hash-tag braces", func(i int) string { return prefix + user(i) }, bucketState, 1728 * time.Second},
	{"candidate: tokens and µs as two raw doubles (16 bytes)", plainKey, func(i int, now time.Time) string {
		b := binary.LittleEndian.AppendUint64(nil, math.Float64bits(fractionalTokens(i)))
		return string(binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(now.UnixMicro()))))
	}, 1728 * time.Second},
	// A GCRA-style state: one number, the instant the bucket was (or will
	// be) empty, last − tokens·10^6/rate µs. It is a whole number when
	// 10^6/rate is (100/day: 864000000 µs per token), and Redis then
	// stores it as an integer; otherwise %.17g keeps one decimal.
	{"candidate: one number, the instant the bucket was empty, whole µs", plainKey, func(i int, now time.Time) string {
		return fmt.Sprintf("%.17g", float64(now.UnixMicro())-math.Round(fractionalTokens(i)*1e6/perDay))
	}, 1728 * time.Second},
	{"candidate: the same with a fraction, %.17g µs", plainKey, func(i int, now time.Time) string {
		return fmt.Sprintf("%.17g", float64(now.UnixMicro())-math.Round(fractionalTokens(i)*1e6/perDay)+0.25)
	}, 1728 * time.Second},
}

// bucketState is the token bucket's state as its script writes it after
// two requests: "<tokens as %.17g> <last update µs>".
func bucketState(i int, now time.Time) string {
	return fmt.Sprintf("%.17g %d", fractionalTokens(i), now.UnixMicro())
}

// plainKey is a string key for user(i) with the library's prefix and hash
// tag, for the emulations.
func plainKey(i int) string { return prefix + "{" + user(i) + "}" }

// libKey is the library's Redis key for user(i): its hash prefix{k}#, or
// a sliding log's sorted set prefix{k}#ID, the one key there is.
func libKey(t *testing.T, m *redis.Client, i int) string {
	t.Helper()
	keys, err := m.Keys(t.Context(), prefix+"{"+user(i)+"}#*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys of %s: %q, %v; want one", user(i), keys, err)
	}
	return keys[0]
}

// fractionalTokens is what the token bucket holds after two requests some
// tens of µs apart, computed as its script does.
func fractionalTokens(i int) float64 {
	elapsed := float64(20 + i%200)
	return (99 + (elapsed*perDay)/1e6) - 1
}

type row struct {
	what, client string
	perKey       float64 // Δused_memory / keys
	usage        int64   // MEMORY USAGE of one key
	sample       string  // what one key holds
}

// TestMemoryPerKey writes keys on a private server and divides the growth
// of used_memory by their number. Between measurements the server is
// flushed, and every client but the measuring one is closed, so that
// neither client buffers nor the script cache are counted.
func TestMemoryPerKey(t *testing.T) {
	if os.Getenv(envMeasure) != "1" {
		t.Skipf("a measurement, not a test: set %s=1 (and %s) to run it", envMeasure, redistest.EnvAddr)
	}
	n := defaultKeys
	if s := os.Getenv(envKeys); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", envKeys, s)
		}
	}
	srv := redistest.StartServer(t)
	m := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1, MaxRetries: -1})
	defer m.Close()
	server := redistest.Info(t, m)
	start := time.Now()

	var rows []row
	for _, c := range cases {
		alg, err := c.alg()
		if err != nil {
			t.Fatal(err)
		}
		for _, cl := range clients {
			open := func() (func(ctx context.Context, i int) error, func()) {
				st, done := cl.open(t, srv.Addr)
				lim, err := ratelimit.New(alg, st, ratelimit.WithName("mem"))
				if err != nil {
					t.Fatal(err)
				}
				return func(ctx context.Context, i int) error {
					for r := range c.requests {
						d, err := lim.Allow(ctx, user(i))
						if err != nil {
							return err
						}
						if !d.Allowed() {
							return fmt.Errorf("request %d for %s denied", r+1, user(i))
						}
					}
					return nil
				}, done
			}
			perKey := measure(t, m, n, open)
			usage, sample := describe(t, m, libKey(t, m, 0))
			rows = append(rows, row{c.name, cl.name, perKey, usage, sample})
		}
	}
	for _, e := range emulations {
		open := func() (func(ctx context.Context, i int) error, func()) {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: writers})
			return func(ctx context.Context, i int) error {
				return c.Set(ctx, e.key(i), e.value(i, time.Now()), e.ttl).Err()
			}, func() { c.Close() }
		}
		perKey := measure(t, m, n, open)
		usage, sample := describe(t, m, e.key(0))
		rows = append(rows, row{e.name, "plain SET", perKey, usage, sample})
	}

	fmt.Printf("\nRedis memory per key: %d keys, redis-server %s (%s, %s-bit), measured in %v.\n",
		n, server["redis_version"], server["mem_allocator"], server["arch_bits"], time.Since(start).Round(time.Second))
	fmt.Printf("bytes/key = (used_memory after − before) / keys, on a private server flushed between rows;\n")
	fmt.Printf("MEMORY USAGE is Redis's own estimate for one key (without its TTL entry and hash-table slots).\n\n")
	fmt.Println("| keys written by | client | bytes/key | MEMORY USAGE | one key holds |")
	fmt.Println("| --- | --- | ---: | ---: | --- |")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %.1f | %d | %s |\n", r.what, r.client, r.perKey, r.usage, r.sample)
	}
	fmt.Println()
}

// measure returns the growth of used_memory per key when open's writer
// writes keys 0..n-1. A first writer writes one key before the baseline,
// so that the script is cached and the Lua state has grown already.
func measure(t *testing.T, m *redis.Client, n int, open func() (func(ctx context.Context, i int) error, func())) float64 {
	t.Helper()
	ctx := t.Context()
	write, done := open()
	if err := write(ctx, n); err != nil {
		t.Fatalf("warming up: %v", err)
	}
	done()
	if err := m.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before := redistest.SettledUsedMemory(t, m)

	write, done = open()
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
				if err := write(ctx, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	done()
	close(errs)
	for err := range errs {
		t.Fatalf("writing keys: %v", err)
	}
	after := redistest.SettledUsedMemory(t, m)
	if got, err := m.DBSize(ctx).Result(); err != nil || got != int64(n) {
		t.Fatalf("DBSIZE = %d, %v; want %d (did keys expire during the measurement?)", got, err, n)
	}
	return float64(after-before) / float64(n)
}

// describe returns MEMORY USAGE of key and a short account of what it
// holds: type, encoding, value and TTL.
func describe(t *testing.T, m *redis.Client, key string) (int64, string) {
	t.Helper()
	ctx := t.Context()
	usage, err := m.MemoryUsage(ctx, key, 0).Result()
	if err != nil {
		t.Fatalf("MEMORY USAGE %s: %v", key, err)
	}
	typ := m.Type(ctx, key).Val()
	enc := m.ObjectEncoding(ctx, key).Val()
	ttl := "no TTL"
	if d := m.PTTL(ctx, key).Val(); d > 0 {
		ttl = "TTL"
	}
	var value string
	switch typ {
	case "string":
		v := m.Get(ctx, key).Val()
		if strconv.Quote(v) == `"`+v+`"` {
			value = fmt.Sprintf("`%s` (%d bytes)", v, len(v))
		} else {
			value = fmt.Sprintf("%d binary bytes", len(v))
		}
	case "zset":
		members := m.ZRange(ctx, key, 0, -1).Val()
		value = fmt.Sprintf("%d members like `%s`", len(members), members[len(members)-1])
	case "hash":
		for f, v := range m.HGetAll(ctx, key).Val() {
			if strconv.Quote(v) == `"`+v+`"` {
				value += fmt.Sprintf("field `%s`: `%s` (%d bytes) ", f, v, len(v))
			} else {
				value += fmt.Sprintf("field `%s`: %d bytes, binary ", f, len(v))
			}
		}
	}
	return usage, fmt.Sprintf("`%s` %s %s %s, %s", key, typ, enc, value, ttl)
}
