package benchmarks

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// BenchmarkOwnScript runs a Limiter on the rueidis store beside a bare
// rueidis Lua.Exec of the very script the store runs (the token bucket
// of BenchmarkRedis's allowed path), with the same client, key layout and
// ARGV, serially over 10,000 keys: what the store costs beyond the call
// itself, with the script's own server time and reply on both sides.
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
	b.Run("lib=store", func(b *testing.B) {
		st, err := rueidisstore.New[string](ru, rueidisstore.WithPrefix[string](prefix()))
		if err != nil {
			b.Fatal(err)
		}
		allow := limiterOn(b, alg, st, keys)
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
	})
	b.Run("lib=bare", func(b *testing.B) {
		s, params, err := luascript.For(luascript.LimitOf(alg, "b"))
		if err != nil {
			b.Fatal(err)
		}
		lua := rueidis.NewLuaScript(s.Source)
		pre := prefix()
		rest := append([]string{"0"}, params...)
		ctx := context.Background()
		allow := func(ctx context.Context, key string) (bool, error) {
			args := append([]string{strconv.FormatInt(time.Now().UnixMicro(), 10), "1"}, rest...)
			v, err := lua.Exec(ctx, ru, luascript.Keys(pre+"{"+key+"}", "b"), args).AsIntSlice()
			return err == nil && len(v) == 3 && v[1] == 0, err
		}
		prime(b, allow, keys, true)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			ok, err := allow(ctx, keys[i%len(keys)])
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			i++
		}
	})
}
