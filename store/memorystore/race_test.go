package memorystore

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestDecisionsRaceWriters decides on a set of keys from many goroutines
// while others add keys, reset them and make the index grow and shift
// under the readers, on one shard. Lookups that miss must fall back to the
// locked path, never make a second entry for a key, and never lose a
// charge: each key admits exactly its capacity.
func TestDecisionsRaceWriters(t *testing.T) {
	const (
		capacity = 16
		keys     = 300
		readers  = 6
		writers  = 2
		now      = int64(1_700_000_000_000_000)
	)
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: capacity, Rate: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	s := New[string](WithShards(1), WithGrace(0))
	tab, err := s.Open(store.LimitsOf(alg), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admitted := make([][capacity * 2]int32, readers)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("churn-%d-%d", w, i%500)
				if _, err := tab.Take(ctx, k, now, 1, nil); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					tab.Reset(ctx, k)
				}
			}
		}()
	}
	var rg sync.WaitGroup
	for r := range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			for round := range capacity * 2 {
				for k := range keys {
					key := fmt.Sprint("key-", (k+r*37)%keys)
					res, err := tab.Take(ctx, key, now, 1, nil)
					if err != nil {
						t.Error(err)
						return
					}
					if res.Allowed() {
						admitted[r][round]++
					}
					if _, err := tab.Peek(ctx, key, now, nil); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	rg.Wait()
	close(stop)
	wg.Wait()
	var total int32
	for r := range admitted {
		for _, n := range admitted[r] {
			total += n
		}
	}
	if want := int32(keys * capacity); total != want {
		t.Errorf("%d admitted over %d keys of capacity %d, want exactly %d", total, keys, capacity, want)
	}
	for k := range keys {
		r, _ := tab.Peek(ctx, fmt.Sprint("key-", k), now, nil)
		if r.Remaining != 0 {
			t.Errorf("key-%d: Peek = %+v, want it drained", k, r)
		}
	}
}
