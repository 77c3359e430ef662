package luascript_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// drawAlgorithm draws one of the six algorithms with a small limit, so
// that histories reach it.
func drawAlgorithm(t *rapid.T, label string) algorithm.Algorithm {
	return drawOfKind(t, label, rapid.IntRange(0, 5).Draw(t, label+"-kind"))
}

// drawOfKind draws an algorithm of the kind numbered k (as drawAlgorithm
// numbers them) with a small limit.
func drawOfKind(t *rapid.T, label string, k int) algorithm.Algorithm {
	limit := rapid.Int64Range(1, 8).Draw(t, label+"-limit")
	window := time.Duration(rapid.Int64Range(1, 50).Draw(t, label+"-ms")) * time.Millisecond
	var alg algorithm.Algorithm
	var err error
	switch k {
	case 0:
		alg, err = tokenbucket.New(tokenbucket.Config{Capacity: limit, Rate: float64(limit) / window.Seconds()})
	case 1:
		alg, err = tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: limit, Tokens: rapid.Int64Range(1, limit).Draw(t, label+"-tokens"), Interval: window})
	case 2:
		alg, err = gcra.Per(limit, window)
	case 3:
		alg, err = fixedwindow.Per(limit, window)
	case 4:
		alg, err = slidingwindow.Per(limit, window)
	default:
		alg, err = slidinglog.Per(limit, window)
	}
	if err != nil {
		t.Fatal(err)
	}
	return alg
}

// TestBatchMirror checks luascript.Batch against its decision script: a
// batch of requests (random times, costs up to the limit), for a
// limit of each algorithm or a policy of two or three, replies what the
// decision script replies to the same requests sent one by one on another
// key, and leaves the same state (every hash field, every sorted set
// member and score) with the same TTL, whatever the key held before
// (histories made by single calls first, or a state of another algorithm
// under the same ID, which both refuse or both start afresh).
func TestBatchMirror(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		base := redistest.Prefix(t)
		run := 0
		rapid.Check(t, func(rt *rapid.T) {
			run++
			n := rapid.IntRange(1, 3).Draw(rt, "limits")
			limits := make([]luascript.Limit, n)
			maxCost := int64(algorithm.MaxLimit)
			kinds := make([]int, n)
			for i := range limits {
				kinds[i] = rapid.IntRange(0, 5).Draw(rt, fmt.Sprint("limit", i, "-kind"))
				alg := drawOfKind(rt, fmt.Sprint("limit", i), kinds[i])
				maxCost = min(maxCost, alg.Limit())
				limits[i] = luascript.LimitOf(alg, fmt.Sprint("id", i))
				// Costs run from 1 to the smallest limit: the stores
				// refuse larger ones before any script runs.
				limits[i].ResetOnMismatch = rapid.Bool().Draw(rt, fmt.Sprint("afresh", i))
				// A state of the same algorithm under other parameters
				// (foreign, below) is carried by the limit's rule.
				if kinds[i] != 5 && rapid.Bool().Draw(rt, fmt.Sprint("proportional", i)) {
					limits[i].Rule = algorithm.Proportional
				}
			}
			single, params, err := luascript.For(limits...)
			if err != nil {
				rt.Fatal(err)
			}
			batch := luascript.Batch(single)
			ids := make([]string, n)
			for i, l := range limits {
				ids[i] = l.ID
			}
			one := luascript.Keys(fmt.Sprintf("%s{one%d}", base, run), ids...)
			many := luascript.Keys(fmt.Sprintf("%s{many%d}", base, run), ids...)
			// A margin long enough that no key expires while the requests
			// are sent one by one, which takes real time where the batch
			// takes none (Redis expires keys by its own clock).
			margin := strconv.FormatInt(rapid.Int64Range(5_000, 10_000).Draw(rt, "margin"), 10)
			ctx := t.Context()
			defer client.Del(ctx, append(one, many...)...)

			// What the keys hold before: a foreign state under the first
			// ID, or a history of single calls on both.
			// The keys' TTLs count from here on: a key the one-by-one
			// requests leave unwritten (a refund of nothing) keeps the TTL
			// its history wrote, which a loaded machine makes any age.
			start := time.Now()
			now := time.Now().UnixMicro()
			// A foreign state is another algorithm's, or, as often, the same
			// algorithm's under other parameters (a limit changed on a
			// live key), which every request of the batch converts until
			// one admission writes the state under its own.
			if rapid.IntRange(0, 2).Draw(rt, "foreign") == 0 {
				kind := kinds[0]
				if rapid.Bool().Draw(rt, "foreign-other-kind") {
					kind = rapid.IntRange(0, 5).Draw(rt, "foreign-kind")
				}
				other := luascript.LimitOf(drawOfKind(rt, "foreign", kind), ids[0])
				s, p, err := luascript.For(other)
				if err != nil {
					rt.Fatal(err)
				}
				for _, keys := range [][]string{one, many} {
					args := append([]any{strconv.FormatInt(now, 10), "1", margin}, anys(p)...)
					if err := client.Eval(ctx, s.Source, keys, args...).Err(); err != nil {
						rt.Fatalf("foreign state: %v", err)
					}
				}
			}
			call := func(keys []string, now int64, cost int64) ([]int64, error) {
				args := append([]any{strconv.FormatInt(now, 10), strconv.FormatInt(cost, 10), margin}, anys(params)...)
				return client.Eval(ctx, single.Source, keys, args...).Int64Slice()
			}
			for i := range rapid.IntRange(0, 5).Draw(rt, "history") {
				now += rapid.Int64Range(0, 20_000).Draw(rt, fmt.Sprint("history-step", i))
				cost := rapid.Int64Range(1, maxCost).Draw(rt, fmt.Sprint("history-cost", i))
				a, errA := call(one, now, cost)
				b, errB := call(many, now, cost)
				if (errA == nil) != (errB == nil) || !slices.Equal(a, b) {
					rt.Fatalf("the same history on two keys: %v %v / %v %v", a, errA, b, errB)
				}
			}

			size := rapid.IntRange(1, 40).Draw(rt, "batch")
			argv := []any{strconv.Itoa(size)}
			var want []int64
			var wantErr error
			for i := range size {
				// Mostly forward, sometimes back (a request that read its
				// clock earlier and queued later).
				now += rapid.Int64Range(-3_000, 10_000).Draw(rt, fmt.Sprint("step", i))
				cost := rapid.Int64Range(1, maxCost).Draw(rt, fmt.Sprint("cost", i))
				argv = append(argv, strconv.FormatInt(now, 10), strconv.FormatInt(cost, 10))
				if wantErr != nil {
					continue
				}
				got, err := call(one, now, cost)
				if err != nil {
					wantErr = err
					continue
				}
				want = append(want, got...)
			}
			argv = append(append(argv, margin), anys(params)...)
			got, err := client.Eval(ctx, batch.Source, many, argv...).Int64Slice()
			switch {
			case wantErr != nil && len(want) == 0:
				// The same error, but for the key's name.
				if err == nil || err.Error() != strings.ReplaceAll(wantErr.Error(), fmt.Sprintf("{one%d}", run), fmt.Sprintf("{many%d}", run)) {
					rt.Fatalf("batch: %v, %v; one by one the first request failed: %v", got, err, wantErr)
				}
			case err != nil:
				rt.Fatalf("batch: %v; one by one: %v, %v", err, want, wantErr)
			case !slices.Equal(got, want):
				rt.Fatalf("batch replied\n%v\none by one\n%v", got, want)
			}
			sameKeys(t, rt, client, one, many, "the batch", time.Since(start))
		})
	})
}

// sameKeys fails rt unless the keys one and many, pairwise, hold the same
// (every hash field, every sorted set member and score) with the same TTL:
// the keys a history left one request at a time, and those after, a
// batch. The keys were written up to apart from each other (the one-by-one
// calls take real time, the batch's none, and a key either side leaves
// unwritten keeps the TTL its history wrote), so their TTLs may differ by
// that much; beyond that, by at most 50 ms.
func sameKeys(t *testing.T, rt *rapid.T, client redis.UniversalClient, one, many []string, after string, apart time.Duration) {
	for i := range one {
		a, b := snapshot1(t, client, one[i]), snapshot1(t, client, many[i])
		if a != b {
			rt.Fatalf("key %d holds %s one by one, %s after %s", i, a, b, after)
		}
		ta, tb := client.PTTL(t.Context(), one[i]).Val(), client.PTTL(t.Context(), many[i]).Val()
		if d := ta - tb; d < -apart-50*time.Millisecond || d > apart+50*time.Millisecond {
			rt.Fatalf("key %d: TTL %v one by one, %v after %s (written up to %v apart)", i, ta, tb, after, apart)
		}
	}
}
