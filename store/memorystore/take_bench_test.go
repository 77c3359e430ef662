package memorystore_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// BenchmarkTableTake times the store alone, at a fixed instant.
func BenchmarkTableTake(b *testing.B) {
	for _, n := range []int{1, 10_000, 1_000_000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("user:%d", 1_000_000+i)
		}
		tab := open(b, memorystore.New[string](), mustBucket(b, 1_000_000_000, 1e9/3600))
		for _, k := range keys {
			take(b, tab, k, t0, 1)
		}
		b.Run(fmt.Sprintf("keys=%d/serial", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				tab.Take(ctx, keys[i], t0, 1, nil)
				if i++; i == n {
					i = 0
				}
			}
		})
		b.Run(fmt.Sprintf("keys=%d/parallel", n), func(b *testing.B) {
			// Each goroutine starts a third of the keys past the last
			// one's: goroutines walking the keys in step would meet on
			// every key, a convoy that independent callers never form.
			var started atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(started.Add(1)) * (n/3 + 1) % n
				for pb.Next() {
					tab.Take(ctx, keys[i], t0, 1, nil)
					if i++; i == n {
						i = 0
					}
				}
			})
		})
	}
}
