package luascript_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestManyLimits runs the decision script and the batch script of Policies
// of many limits (up to redisstore.MaxLimits): Lua allows a function 200
// locals and 60 upvalues, which a script with a variable or two per limit
// would pass, failing to compile on every call. So does a script that nests
// its limits' parts (up to 4 limits), where every limit's locals are live at
// once: Policies of 2 to 4 limits of each algorithm, the largest bodies,
// run too. Each Policy also books, cancels and refunds: the booking
// scripts nest up to 4 limits as well.
func TestManyLimits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		ctx := t.Context()
		base := redistest.Prefix(t)
		must := func(alg algorithm.Algorithm, err error) algorithm.Algorithm { return mustAlg(t, alg, err) }
		bucket := must(tokenbucket.New(tokenbucket.Config{Capacity: 10, Rate: 1}))
		window := must(fixedwindow.Per(10, time.Second))
		logl := must(slidinglog.Per(10, time.Second))
		interval := must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 10, Tokens: 1, Interval: time.Second}))
		cell := must(gcra.Per(10, time.Second))
		sliding := must(slidingwindow.Per(10, time.Second))
		var policies [][]algorithm.Algorithm
		for _, n := range []int{2, 61, 130, redisstore.MaxLimits} {
			algs := make([]algorithm.Algorithm, n)
			for i := range algs {
				switch {
				case i%10 == 9:
					algs[i] = logl
				case i%2 == 0:
					algs[i] = bucket
				default:
					algs[i] = window
				}
			}
			policies = append(policies, algs)
		}
		for _, alg := range []algorithm.Algorithm{bucket, interval, cell, window, sliding, logl} {
			for n := 2; n <= 4; n++ {
				policies = append(policies, slices.Repeat([]algorithm.Algorithm{alg}, n))
			}
		}
		policies = append(policies, []algorithm.Algorithm{logl, sliding, interval, bucket})
		for p, algs := range policies {
			n := len(algs)
			limits := make([]luascript.Limit, n)
			ids := make([]string, n)
			for i, alg := range algs {
				ids[i] = fmt.Sprint("l", i)
				limits[i] = luascript.LimitOf(alg, ids[i])
			}
			single, params, err := luascript.For(limits...)
			if err != nil {
				t.Fatal(err)
			}
			batch := luascript.Batch(single)
			keys := luascript.Keys(fmt.Sprintf("%s{%d}", base, p), ids...)
			now := time.Now().UnixMicro()
			args := []any{strconv.FormatInt(now, 10), "1", "1000"}
			got, err := client.Eval(ctx, single.Source, keys, append(args, anys(params)...)...).Int64Slice()
			if err != nil || len(got) != 3*n || got[1] != 0 {
				t.Fatalf("%d limits, one request: %v, %v", n, got, err)
			}
			args = []any{"3"}
			for i := range 3 {
				args = append(args, strconv.FormatInt(now+int64(i), 10), "1")
			}
			args = append(args, "1000")
			got, err = client.Eval(ctx, batch.Source, keys, append(args, anys(params)...)...).Int64Slice()
			if err != nil || len(got) != 3*3*n {
				t.Fatalf("%d limits, a batch of 3: %v, %v", n, got, err)
			}
			for r := range 3 {
				for l := range n {
					// Each limit of 10 had 1 taken before: 8, 7, 6 remain.
					if rem, retry := got[3*(r*n+l)], got[3*(r*n+l)+1]; rem != int64(8-r) || retry != 0 {
						t.Fatalf("%d limits, request %d, limit %d: remaining %d, retry %d; want %d, 0", n, r, l, rem, retry, 8-r)
					}
				}
			}
			// The booking scripts, which nest up to 4 limits too: a booking
			// of 8 (6 remain: it waits for refills), its cancel before it is
			// due (each limit gives the 8 back), then a refund of 1.
			at := strconv.FormatInt(now+3, 10)
			script := func(op luascript.Op) string {
				s, _, err := luascript.ForOp(op, limits...)
				if err != nil {
					t.Fatal(err)
				}
				return s.Source
			}
			booked, err := client.Eval(ctx, script(luascript.OpBook), keys, append(append([]any{at, "8", "1000"}, anys(params)...), "100000000", testNonce)...).StringSlice()
			if err != nil || len(booked) != 2+6*n || booked[0] != "1" || booked[1] <= at {
				t.Fatalf("%d limits, a booking of 8: %q, %v", n, booked, err)
			}
			cancel := append(append([]any{at, "8", "1000"}, anys(params)...), booked[1])
			for _, s := range booked[2+3*n:] {
				cancel = append(cancel, s)
			}
			given, err := client.Eval(ctx, script(luascript.OpCancel), keys, cancel...).Int64Slice()
			if err != nil || len(given) != n || slices.ContainsFunc(given, func(g int64) bool { return g != 8 }) {
				t.Fatalf("%d limits, its cancel: %v, %v", n, given, err)
			}
			got, err = client.Eval(ctx, script(luascript.OpRefund), keys, append([]any{at, "1", "1000"}, anys(params)...)...).Int64Slice()
			if err != nil || len(got) != 3*n {
				t.Fatalf("%d limits, a refund of 1: %v, %v", n, got, err)
			}
			for l := range n {
				if got[3*l] != 7 {
					t.Fatalf("%d limits, a refund of 1: limit %d has %d remaining, want 7 (%v)", n, l, got[3*l], got)
				}
			}
		}
	})
}
