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

// BenchmarkNewKeyAtCap times the Take of a key never seen before by a
// table at its cap, every key held asking for no less than a day: each new
// key makes its shard sample keys and evict one. The clock moves 1µs per
// new key and the grace period is 0, so every sweep visits its whole shard
// (each shard sweeps once per cap/shards of its new keys): the time per
// new key includes that, amortised.
func BenchmarkNewKeyAtCap(b *testing.B) {
	for _, maxKeys := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("cap=%d", maxKeys), func(b *testing.B) {
			s := memorystore.New[int](memorystore.WithMaxKeys(maxKeys), memorystore.WithGrace(0))
			tab := open(b, s, mustBucket(b, 10, 10.0/86400))
			now := t0
			for k := range maxKeys {
				now++
				take(b, tab, k, now, 1)
			}
			k := maxKeys
			b.ReportAllocs()
			for b.Loop() {
				now++
				tab.Take(ctx, k, now, 1, nil)
				k++
			}
			if st := s.Stats(); st.Evicted == 0 || st.Keys > maxKeys {
				b.Fatalf("Stats() = %+v: the table was meant to stay full and evict", st)
			}
		})
	}
}
