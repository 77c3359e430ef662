package ratelimit

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// held returns how many denials c holds.
func (c *denialCache[K]) held() int {
	n := 0
	for i := range c.sets {
		for j := range c.ways {
			if c.sets[i].slots[j].Load() != nil {
				n++
			}
		}
	}
	return n
}

// denyAll is a table that denies every cost for an hour from now.
type denyAll struct{}

func (denyAll) Take(_ context.Context, _ string, now, _ int64, _ []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{RetryAfter: 3_600_000_000, ResetAfter: 3_600_000_000}, nil
}
func (t denyAll) Peek(ctx context.Context, key string, now int64, out []algorithm.Result) (algorithm.Result, error) {
	return t.Take(ctx, key, now, 1, out)
}
func (denyAll) Reset(context.Context, string) error { return nil }

// TestDenialCacheHoldsAtMostItsSize denies 100 times more keys than the
// cache holds: it never holds more than its size, and at the end holds
// nearly that many (sets fill unevenly).
func TestDenialCacheHoldsAtMostItsSize(t *testing.T) {
	for _, size := range []int{1, 3, 8, 9, 100, 1000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			c, err := newDenialCache[string](size)
			if err != nil {
				t.Fatal(err)
			}
			table := &denialTable[string]{next: denyAll{}, cache: c}
			for i := range 100 * size {
				if _, err := table.Take(context.Background(), fmt.Sprint("k", i), int64(i), 1, nil); err != nil {
					t.Fatal(err)
				}
				if i%size == 0 && c.held() > size {
					t.Fatalf("after %d denied keys the cache holds %d, more than its size %d", i+1, c.held(), size)
				}
			}
			if n := c.held(); n > size || n < size*3/4 {
				t.Errorf("after %d denied keys the cache holds %d; want at most %d and most of that", 100*size, n, size)
			}
		})
	}
}
