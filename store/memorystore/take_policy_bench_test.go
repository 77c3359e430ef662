package memorystore_test

import (
	"fmt"
	"testing"

	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// BenchmarkTableTakePolicy times the store alone deciding for two limits
// at once (a Policy's table), at a fixed instant.
func BenchmarkTableTakePolicy(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("user:%d", 1_000_000+i)
		}
		tab, err := memorystore.New[string]().Open(store.LimitsOf(
			mustBucket(b, 1_000_000_000, 1e9/3600), mustBucket(b, 2_000_000_000, 1e9/3600)), nil)
		if err != nil {
			b.Fatal(err)
		}
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
	}
}
