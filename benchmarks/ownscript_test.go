package benchmarks

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// BenchmarkOwnScript runs a Limiter on the rueidis store beside a bare
// rueidis Lua.Exec of the very script the store runs (the token bucket
// of BenchmarkRedis's allowed path), with the same client, key layout and
// ARGV, over 10,000 keys: what the store costs beyond the call itself,
// with the script's own server time and reply on both sides. mode=serial
// is one caller (latency); mode=parallel is 64 callers at once, pipelined
// by rueidis (throughput, where the process's own CPU per decision shows).
func BenchmarkOwnScript(b *testing.B) {
	addr := os.Getenv("RATELIMIT_REDIS_ADDR")
	if addr == "" {
		b.Skip("set RATELIMIT_REDIS_ADDR=host:port of a Redis to run")
	}
	ru, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer ru.Close()
	keys := shuffled(makeKeys(10_000), 0)
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1 << 30, Rate: 1e6})
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []mode{modeSerial, modeParallel} {
		b.Run("mode="+string(mode), func(b *testing.B) { ownScript(b, ru, alg, keys, mode) })
	}
}

func ownScript(b *testing.B, ru rueidis.Client, alg algorithm.Algorithm, keys []string, mode mode) {
	measure := func(b *testing.B, allow allowFunc) {
		// The process's CPU time per decision (user and system, every
		// goroutine's: the client's reader and writer too) is what the
		// store adds beyond the call, less blurred than wall time by
		// Redis and other work sharing the cores.
		start := cpuTime()
		defer func() {
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		}()
		if mode == modeParallel {
			parallel(b, allow, keys, true, 64, false)
			return
		}
		ctx := context.Background()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			ok, err := allow(ctx, keys[i%len(keys)])
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			i++
		}
		report(b, 0, true)
	}
	b.Run("lib=store", func(b *testing.B) {
		st, err := rueidisstore.New[string](ru, rueidisstore.WithPrefix[string](prefix()))
		if err != nil {
			b.Fatal(err)
		}
		measure(b, limiterOn(b, alg, st, keys))
	})
	b.Run("lib=bare", func(b *testing.B) {
		s, params, err := luascript.For(luascript.LimitOf(alg, "b"))
		if err != nil {
			b.Fatal(err)
		}
		lua := rueidis.NewLuaScript(s.Source)
		pre := prefix()
		rest := append([]string{"0"}, params...)
		allow := func(ctx context.Context, key string) (bool, error) {
			args := append([]string{strconv.FormatInt(time.Now().UnixMicro(), 10), "1"}, rest...)
			v, err := lua.Exec(ctx, ru, luascript.Keys(pre+"{"+key+"}", "b"), args).AsIntSlice()
			return err == nil && len(v) == 3 && v[1] == 0, err
		}
		prime(b, allow, keys, true)
		measure(b, allow)
	})
}
