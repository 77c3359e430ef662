package ratelimit_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// BenchmarkDeniedFlood floods one key that stays denied for years, as an
// abusive client does, through the memory store and through the Redis
// stores with and without WithDenialCache, on a real Redis at
// $RATELIMIT_REDIS_ADDR (the Redis cases skip when it is unset). Besides
// decisions/s it reports redis-calls/op: the scripts Redis ran (EVALSHA,
// EVAL and their _RO forms, from INFO commandstats) per decision, the
// first denial included, and redis-calls, their number in all. The server must serve nothing else meanwhile.
//
//	RATELIMIT_REDIS_ADDR=127.0.0.1:16379 go test -run='^$' -bench=DeniedFlood -benchmem .
func BenchmarkDeniedFlood(b *testing.B) {
	cases := []struct {
		name  string
		new   func(b *testing.B) store.Store[string]
		cache bool
	}{
		{"memory", func(*testing.B) store.Store[string] { return memorystore.New[string]() }, false},
		{"rueidis+cache", newRueidisBench, true},
		{"goredis+cache", newGoRedisBench, true},
		{"rueidis", newRueidisBench, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for _, mode := range []string{"serial", "parallel"} {
				b.Run(mode, func(b *testing.B) {
					st := c.new(b)
					alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1e-8})
					if err != nil {
						b.Fatal(err)
					}
					opts := []ratelimit.Option{ratelimit.WithName("bench")}
					if c.cache {
						opts = append(opts, ratelimit.WithDenialCache(10_000))
					}
					lim, err := ratelimit.New(alg, st, opts...)
					if err != nil {
						b.Fatal(err)
					}
					ctx := context.Background()
					if d, err := lim.Allow(ctx, "flood"); err != nil || !d.Allowed() {
						b.Fatalf("the first request = %+v, %v; want allowed", d, err)
					}
					admin := scriptCalls(b, c.name != "memory")
					before := admin()
					var allowed, failed atomic.Int64
					b.ReportAllocs()
					b.ResetTimer()
					if mode == "serial" {
						for b.Loop() {
							d, err := lim.Allow(ctx, "flood")
							if err != nil {
								failed.Add(1)
							} else if d.Allowed() {
								allowed.Add(1)
							}
						}
					} else {
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								d, err := lim.Allow(ctx, "flood")
								if err != nil {
									failed.Add(1)
								} else if d.Allowed() {
									allowed.Add(1)
								}
							}
						})
					}
					b.StopTimer()
					if failed.Load() > 0 || allowed.Load() > 0 {
						b.Fatalf("%d decisions failed and %d were allowed; want every one denied", failed.Load(), allowed.Load())
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
					if c.name != "memory" {
						calls := admin() - before
						b.ReportMetric(float64(calls)/float64(b.N), "redis-calls/op")
						b.ReportMetric(float64(calls), "redis-calls") // in all: 1 when only the first denial reached Redis
					}
				})
			}
		})
	}
}

func newRueidisBench(b *testing.B) store.Store[string] {
	st, err := rueidisstore.New[string](redistest.Rueidis(b, redistest.Standalone(b)), rueidisstore.WithPrefix[string](redistest.Prefix(b)))
	if err != nil {
		b.Fatal(err)
	}
	return st
}

func newGoRedisBench(b *testing.B) store.Store[string] {
	st, err := goredisstore.New[string](redistest.GoRedis(b, redistest.Standalone(b)), goredisstore.WithPrefix[string](redistest.Prefix(b)))
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// scriptCalls returns a function that reads how many scripts the real
// server has run, or 0 when remote is false.
func scriptCalls(b *testing.B, remote bool) func() int64 {
	if !remote {
		return func() int64 { return 0 }
	}
	m := redis.NewClient(&redis.Options{Addr: redistest.Standalone(b).Addrs[0]})
	b.Cleanup(func() { m.Close() })
	return func() int64 {
		text, err := m.Info(context.Background(), "commandstats").Result()
		if err != nil {
			b.Fatalf("INFO commandstats: %v", err)
		}
		var n int64
		for _, line := range strings.Split(text, "\r\n") {
			name, stats, ok := strings.Cut(line, ":")
			switch name {
			case "cmdstat_evalsha", "cmdstat_eval", "cmdstat_evalsha_ro", "cmdstat_eval_ro":
			default:
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
			v, err := strconv.ParseInt(calls, 10, 64)
			if !ok || err != nil {
				b.Fatalf("INFO commandstats: cannot read %q", line)
			}
			n += v
		}
		return n
	}
}
