package benchmarks

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// BenchmarkWaiters: 200 goroutines Wait on one key of a bucket of 1
// refilled every 2 ms, in memory, with ours and with x/time/rate: how late
// each admission lands after the instant the bucket allows it (the k-th at
// start + k·2ms: p50, p99, max), and the run's length. Both book each
// waiter once, in order:
//
//	go test -run='^$' -bench=Waiters -benchtime=5x .
func BenchmarkWaiters(b *testing.B) {
	const n, interval = 200, 2 * time.Millisecond
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: float64(time.Second / interval)})
	if err != nil {
		b.Fatal(err)
	}
	lim, err := ratelimit.New(alg, memorystore.New[string]())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		wait func(i int) func() error
	}{
		{"ratelimit", func(i int) func() error {
			key := fmt.Sprintf("w%d", i)
			return func() error { _, err := lim.Wait(ctx, key); return err }
		}},
		{"x-time-rate", func(int) func() error {
			x := rate.NewLimiter(rate.Every(interval), 1)
			return func() error { return x.Wait(ctx) }
		}},
	} {
		b.Run(fmt.Sprintf("%s/waiters=%d", c.name, n), func(b *testing.B) {
			var late []time.Duration
			for i := range b.N {
				wait := c.wait(i)
				var mu sync.Mutex
				var at []time.Time
				var wg sync.WaitGroup
				start := time.Now()
				for range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := wait(); err != nil {
							b.Error(err)
						}
						mu.Lock()
						at = append(at, time.Now())
						mu.Unlock()
					}()
				}
				wg.Wait()
				slices.SortFunc(at, time.Time.Compare)
				for k, t := range at {
					late = append(late, t.Sub(start.Add(time.Duration(k)*interval)))
				}
			}
			slices.Sort(late)
			b.ReportMetric(float64(late[len(late)/2].Microseconds())/1000, "p50-late-ms")
			b.ReportMetric(float64(late[len(late)*99/100].Microseconds())/1000, "p99-late-ms")
			b.ReportMetric(float64(late[len(late)-1].Microseconds())/1000, "max-late-ms")
		})
	}
}

// BenchmarkReserve: a booking that is due at once, then given back, on
// one key, in memory: ours (one store call each, under the key's lock) and
// x/time/rate's (one mutex):
//
//	go test -run='^$' -bench=Reserve -benchmem .
func BenchmarkReserve(b *testing.B) {
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1 << 30, Rate: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	lim, err := ratelimit.New(alg, memorystore.New[string]())
	if err != nil {
		b.Fatal(err)
	}
	x := rate.NewLimiter(1<<30, 1<<30)
	ctx := context.Background()
	b.Run("ratelimit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r, err := lim.Reserve(ctx, "k")
			if err != nil || !r.OK() {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("x-time-rate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := x.Reserve(); !r.OK() {
				b.Fatal(r)
			}
		}
	})
}
