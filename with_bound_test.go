package ratelimit_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestWithBoundedMemory gives 300,000 distinct limits through With, as a
// client choosing its own limit per request could, each once, on one key
// and on keys of their own, on the memory store: what they leave behind
// is bounded by what the store keeps (one state per key, since every
// limit of With decides under its base's quota; the store's keys,
// WithMaxKeys) and by the Limiters With keeps (MaxWithLimiters), not by
// the number of limits. The states are spent for an hour, so none expires
// during the test.
func TestWithBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("heap measurements are slow")
	}
	// In parallel with TestREADME only (no other test of the package is),
	// whose heap is a few buffers of the go command's output.
	t.Parallel()
	const limits = 300_000
	// The bound: the Limiters With keeps (MaxWithLimiters), each under 5
	// KB with its handle, its algorithm and the store's numbers of its
	// state ID and config; and the states the store keeps, each under 2
	// KB with its entry and the numbers of its ID and config (the store
	// recycles numbers nothing uses, so it holds at most about twice those
	// in use). Without those bounds, a state per limit and the numbers of
	// every limit ever opened take about 450 bytes per limit, 130 MiB.
	bound := func(states int) int64 { return int64(ratelimit.MaxWithLimiters*5<<10 + states*2<<10) }
	for _, tc := range []struct {
		name   string
		key    func(i int) int
		admit  bool // every request is admitted (a fresh key each)
		opts   []memorystore.Option
		states int
	}{
		// One state, carried from limit to limit.
		{"one key", func(int) int { return 0 }, false, nil, 1},
		// 10,000 keys kept: the store's bound applies.
		{"a key each", func(i int) int { return i }, true, []memorystore.Option{memorystore.WithMaxKeys(10_000)}, 10_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			first, err := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1.0 / 3600})
			if err != nil {
				t.Fatal(err)
			}
			base, err := ratelimit.New[int](first, memorystore.New[int](tc.opts...))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := base.Allow(ctx, -1); err != nil { // the store's table, made once
				t.Fatal(err)
			}
			before := liveHeap()
			for i := range limits {
				alg, err := tokenbucket.New(tokenbucket.Config{Capacity: int64(2 + i%1000), Rate: float64(1+i/1000) / 3600})
				if err != nil {
					t.Fatal(err)
				}
				w, err := base.With(alg)
				if err != nil {
					t.Fatal(err)
				}
				d, err := w.Allow(ctx, tc.key(i))
				if err != nil || tc.admit && !d.Allowed() {
					t.Fatalf("limit %d: %v, %v; want no error, admitted: %v", i, d, err, tc.admit)
				}
			}
			after := liveHeap()
			runtime.KeepAlive(base)
			grown := int64(after) - int64(before)
			t.Logf("%d distinct limits through With, %s: the heap grew by %.1f MiB (bound %.1f MiB)", limits, tc.name, float64(grown)/(1<<20), float64(bound(tc.states))/(1<<20))
			if grown > bound(tc.states) {
				t.Errorf("the heap grew by %d bytes, want at most %d", grown, bound(tc.states))
			}
		})
	}
}
