package ratelimit_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// BenchmarkCalls is issue 27's benchmark shape: a token bucket never
// reached (limits=1), or a Policy of it and a fixed window (limits=2),
// through both clients with coalescing as by default (8 calls in flight
// per key), with 1 in flight ("-inflight1") and without ("-single"), on
// one hot key and on 10,000 keys, with 1, 8 and 64 goroutines. Besides decisions/s it reports p50 and p99
// latency, and from INFO commandstats (EVAL, EVALSHA and EVALSHA_RO
// together) the script calls per decision and Redis µs per decision. The
// server at $RATELIMIT_REDIS_ADDR should have no other clients:
//
//	RATELIMIT_REDIS_ADDR=127.0.0.1:16379 go test -run='^$' -bench=Calls -benchtime=2s ./ratelimit
func BenchmarkCalls(b *testing.B) {
	target := redistest.Standalone(b)
	info := redistest.GoRedis(b, target)
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1 << 30, Rate: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	many := make([]string, 10_000)
	for i := range many {
		many[i] = fmt.Sprintf("route:%d", i)
	}
	window, err := fixedwindow.Per(1<<30, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	stores := append(redisStores(b), redisStoresCoalescing(b, 1)...)
	for _, st := range append(stores, redisStoresCoalescing(b, 0)...) {
		for _, w := range []struct {
			name string
			keys []string
		}{{"hotkey", []string{"hot"}}, {"keys=10000", many}} {
			for _, limits := range []int{1, 2} {
				for _, g := range []int{1, 8, 64} {
					b.Run(fmt.Sprintf("%s/%s/limits=%d/goroutines=%d", st.Name, w.name, limits, g), func(b *testing.B) {
						var allow func(ctx context.Context, key string) (bool, error)
						if limits == 1 {
							lim, err := ratelimit.New(alg, st.New(b), ratelimit.WithName("bench"))
							if err != nil {
								b.Fatal(err)
							}
							allow = func(ctx context.Context, key string) (bool, error) {
								d, err := lim.Allow(ctx, key)
								return d.Allowed(), err
							}
						} else {
							// A Policy of the bucket and a fixed window, neither
							// ever reached: one hash per key, one HMGET and one
							// HSET per script.
							p, err := ratelimit.NewPolicy(st.New(b), []ratelimit.Limit{{Name: "bucket", Algorithm: alg}, {Name: "window", Algorithm: window}}, ratelimit.WithName("bench"))
							if err != nil {
								b.Fatal(err)
							}
							allow = func(ctx context.Context, key string) (bool, error) {
								d, err := p.Allow(ctx, key)
								return d.Allowed(), err
							}
						}
						callsN(b, info, allow, w.keys, g)
					})
				}
			}
		}
	}
}

// callsN makes b.N decisions with g goroutines, round robin over keys.
func callsN(b *testing.B, info redis.UniversalClient, allow func(ctx context.Context, key string) (bool, error), keys []string, g int) {
	ctx := context.Background()
	var next, failed, denied atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	latencies := make([]time.Duration, 0, b.N)
	calls0, usec0 := scriptStats(b, info)
	b.ReportAllocs()
	b.ResetTimer()
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, b.N/g+1)
			i := w * 7919 % len(keys)
			for next.Add(1) <= int64(b.N) {
				start := time.Now()
				ok, err := allow(ctx, keys[i])
				mine = append(mine, time.Since(start))
				if err != nil {
					failed.Add(1)
				} else if !ok {
					denied.Add(1)
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d decisions failed", n, b.N)
	}
	if n := denied.Load(); n > 0 {
		b.Errorf("%d of %d decisions denied; the limit should never be reached", n, b.N)
	}
	calls1, usec1 := scriptStats(b, info)
	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(latencies[(len(latencies)-1)*50/100].Microseconds()), "p50-µs")
	b.ReportMetric(float64(latencies[(len(latencies)-1)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(calls1-calls0)/float64(b.N), "calls/decision")
	b.ReportMetric(float64(usec1-usec0)/float64(b.N), "redis-µs/decision")
}

// scriptStats returns the calls and µs of EVAL, EVALSHA and EVALSHA_RO
// so far, from INFO commandstats.
func scriptStats(b testing.TB, c redis.UniversalClient) (calls, usec int64) {
	s, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(s, "\r\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "cmdstat_eval" && name != "cmdstat_evalsha" && name != "cmdstat_evalsha_ro") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls += n
			case "usec":
				usec += n
			}
		}
	}
	return calls, usec
}

// BenchmarkBookings is BenchmarkCalls for bookings: ReserveN of one unit
// with no delay (booked now or not at all) on one key, a limit never
// reached, with coalescing (the stores' default) and without ("-single"),
// 1, 8 and 64 goroutines: bookings/s as decisions/s, latency, script calls
// and Redis µs per booking.
//
//	RATELIMIT_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench Bookings ./ratelimit   (in integration/)
func BenchmarkBookings(b *testing.B) {
	target := redistest.Standalone(b)
	info := redistest.GoRedis(b, target)
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1 << 30, Rate: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	for _, st := range append(redisStores(b), redisStoresCoalescing(b, 0)...) {
		for _, g := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/hotkey/goroutines=%d", st.Name, g), func(b *testing.B) {
				lim, err := ratelimit.New(alg, st.New(b), ratelimit.WithName("bench"))
				if err != nil {
					b.Fatal(err)
				}
				callsN(b, info, func(ctx context.Context, key string) (bool, error) {
					r, err := lim.ReserveN(ctx, key, 1, 0)
					return err == nil && r.OK(), err
				}, []string{"hot"}, g)
			})
		}
	}
}
