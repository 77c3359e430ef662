package memorystore_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// TestMatchesAlgorithm drives a table with random decisions on a few keys,
// at instants that move forward and, now and then, back, and checks every
// result against the algorithm applied to a state of its own
// (algorithm.Take and Peek): the store, its lock-free answers to standing
// denials included, must decide exactly as the algorithm does. Costs of 1
// are drawn often, so that denials stand and are answered from their
// records, then retired by an admission or a Reset.
func TestMatchesAlgorithm(t *testing.T) {
	for name, alg := range allAlgorithms(t) { // each admits 5 per second
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				// Three keys never make a shard sweep, so no state is
				// dropped: a state expired at one instant is not fresh at
				// an earlier one, which a clock that steps back would see.
				tab, err := memorystore.New[int](memorystore.WithShards(1)).Open(store.LimitsOf(alg), nil)
				if err != nil {
					t.Fatal(err)
				}
				ref := map[int]*algorithm.State{}
				now := t0
				key := func(t *rapid.T) int { return rapid.IntRange(0, 2).Draw(t, "key") }
				check := func(t *rapid.T, op string, k int, cost int64, got, want algorithm.Result) {
					if got != want {
						t.Fatalf("%s(%d, cost %d) at t0%+dµs = %+v, want %+v", op, k, cost, now-t0, got, want)
					}
				}
				takeN := func(t *rapid.T, k int, cost int64) {
					s, ok := ref[k]
					if !ok {
						s = new(algorithm.State)
						*s = alg.Init(*s, now)
						ref[k] = s
					}
					var want algorithm.Result
					*s, want = alg.Take(*s, now, cost)
					got, err := tab.Take(ctx, k, now, cost, nil)
					if err != nil {
						t.Fatal(err)
					}
					check(t, "Take", k, cost, got, want)
				}
				t.Repeat(map[string]func(*rapid.T){
					"forward": func(t *rapid.T) {
						now += rapid.Int64Range(0, 400_000).Draw(t, "forward µs")
					},
					"back": func(t *rapid.T) {
						now -= rapid.Int64Range(1, 300_000).Draw(t, "back µs")
					},
					"take1": func(t *rapid.T) { takeN(t, key(t), 1) },
					"take1again": func(t *rapid.T) { // as a client hammering a key
						k := key(t)
						for range rapid.IntRange(2, 5).Draw(t, "times") {
							takeN(t, k, 1)
						}
					},
					"take": func(t *rapid.T) {
						takeN(t, key(t), rapid.Int64Range(1, alg.Limit()).Draw(t, "cost"))
					},
					"peek": func(t *rapid.T) {
						k := key(t)
						want := algorithm.Fresh(alg.Limit())
						if s, ok := ref[k]; ok {
							want = alg.Peek(*s, now, 1)
						}
						got, err := tab.Peek(ctx, k, now, nil)
						if err != nil {
							t.Fatal(err)
						}
						check(t, "Peek", k, 1, got, want)
					},
					"reset": func(t *rapid.T) {
						k := key(t)
						if err := tab.Reset(ctx, k); err != nil {
							t.Fatal(err)
						}
						delete(ref, k)
					},
				})
			})
		})
	}
}
