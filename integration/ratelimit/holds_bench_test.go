package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/concurrency"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
)

// BenchmarkHolds measures the in-flight limit (package concurrency) on a
// real Redis through both clients, 64 goroutines each taking a slot with
// ReserveN(key, 1, 0), holding it 200µs (holdFor) and releasing it
// (Reservation.Release):
// on one key with a limit of 5, where most tries are refused, and over
// 10,000 keys with a limit of 20, where none is. One iteration is one
// try. It reports holds/s (tries admitted and released), tries/s, the
// script calls and Redis µs per hold from INFO commandstats (the server
// at $RATELIMIT_REDIS_ADDR should have no other clients), and the most
// holds seen at once on the one key, counted between an admission's
// return and its release's call; above the limit it fails.
//
//	RATELIMIT_REDIS_ADDR=127.0.0.1:16379 go test -run='^$' -bench=Holds -benchtime=20000x ./ratelimit
func BenchmarkHolds(b *testing.B) {
	target := redistest.Standalone(b)
	info := redistest.GoRedis(b, target)
	many := make([]string, 10_000)
	for i := range many {
		many[i] = fmt.Sprintf("tenant:%d", i)
	}
	for _, st := range append(redisStores(b), redisStoresCoalescing(b, 0)...) {
		for _, w := range []struct {
			name  string
			limit int64
			keys  []string
		}{{"hotkey/limit=5", 5, []string{"tenant"}}, {"keys=10000/limit=20", 20, many}} {
			b.Run(fmt.Sprintf("%s/%s/goroutines=64", st.Name, w.name), func(b *testing.B) {
				slots, err := concurrency.New(concurrency.Config{Limit: w.limit, Lease: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				lim, err := ratelimit.New(slots, st.New(b), ratelimit.WithName("holds"))
				if err != nil {
					b.Fatal(err)
				}
				holdsN(b, info, lim, w.keys, w.limit)
			})
		}
	}
}

// holdFor is how long each admitted try holds its slot before releasing
// it: a request's work.
const holdFor = 200 * time.Microsecond

// holdsN makes b.N tries with 64 goroutines, round robin over keys.
func holdsN(b *testing.B, info redis.UniversalClient, lim *ratelimit.Limiter[string], keys []string, limit int64) {
	ctx := context.Background()
	const goroutines = 64
	var next, held, most, holds, failed atomic.Int64
	var wg sync.WaitGroup
	calls0, usec0 := scriptStats(b, info)
	b.ResetTimer()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := g * 7919 % len(keys)
			for next.Add(1) <= int64(b.N) {
				r, err := lim.ReserveN(ctx, keys[i], 1, 0)
				if err != nil {
					failed.Add(1)
				} else if r.OK() {
					n := held.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(holdFor) // the request's work
					held.Add(-1)
					if _, err := r.Release(ctx); err != nil {
						failed.Add(1)
					}
					holds.Add(1)
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d tries or releases failed", n, b.N)
	}
	if m := most.Load(); len(keys) == 1 && m > limit {
		b.Fatalf("%d holds at once on one key, limit %d", m, limit)
	}
	if holds.Load() == 0 {
		b.Fatalf("no try of %d admitted", b.N)
	}
	calls1, usec1 := scriptStats(b, info)
	h := float64(holds.Load())
	b.ReportMetric(h/b.Elapsed().Seconds(), "holds/s")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tries/s")
	b.ReportMetric(float64(calls1-calls0)/h, "calls/hold")
	b.ReportMetric(float64(usec1-usec0)/h, "redis-µs/hold")
	if len(keys) == 1 {
		b.ReportMetric(float64(most.Load()), "most-held")
	}
}
