package luascript_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
)

// TestOpBatchMirror checks luascript.OpBatch against its booking script:
// a batch of bookings (random times, costs and maximum delays), of
// refunds, or of cancels of bookings made before (in random order, some
// twice), for a limit of each algorithm or a policy of two or three,
// replies what the op's script replies to the same requests sent one by
// one on another key, and leaves the same state (every hash field, every
// sorted set member and score) with the same TTL, after a history of
// Takes and bookings, or over a state of another algorithm under the same
// ID (which both refuse or both start afresh).
func TestOpBatchMirror(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		base := redistest.Prefix(t)
		run := 0
		rapid.Check(t, func(rt *rapid.T) {
			run++
			n := rapid.IntRange(1, 3).Draw(rt, "limits")
			limits := make([]luascript.Limit, n)
			ids := make([]string, n)
			maxCost := int64(algorithm.MaxLimit)
			for i := range limits {
				alg := drawAlgorithm(rt, fmt.Sprint("limit", i))
				maxCost = min(maxCost, alg.Limit())
				ids[i] = fmt.Sprint("id", i)
				limits[i] = luascript.LimitOf(alg, ids[i])
				limits[i].ResetOnMismatch = rapid.Bool().Draw(rt, fmt.Sprint("afresh", i))
			}
			decide, params, err := luascript.For(limits...)
			if err != nil {
				rt.Fatal(err)
			}
			var ops [luascript.OpUndo + 1]*luascript.Script
			for op := luascript.OpBook; op <= luascript.OpUndo; op++ {
				if ops[op], _, err = luascript.ForOp(op, limits...); err != nil {
					rt.Fatal(err)
				}
			}
			one := luascript.Keys(fmt.Sprintf("%s{one%d}", base, run), ids...)
			many := luascript.Keys(fmt.Sprintf("%s{many%d}", base, run), ids...)
			// A margin long enough that no key expires while the requests
			// are sent one by one (see TestBatchMirror).
			margin := strconv.FormatInt(rapid.Int64Range(5_000, 10_000).Draw(rt, "margin"), 10)
			ctx := t.Context()
			defer client.Del(ctx, append(one, many...)...)
			eval := func(s *luascript.Script, keys []string, now, cost int64, extra ...string) ([]any, error) {
				args := append([]any{strconv.FormatInt(now, 10), strconv.FormatInt(cost, 10), margin}, anys(params)...)
				return client.Eval(ctx, s.Source, keys, append(args, anys(extra)...)...).Slice()
			}
			// both sends a request to both keys, one by one, which must
			// reply the same.
			both := func(what string, s *luascript.Script, now, cost int64, extra ...string) []any {
				a, errA := eval(s, one, now, cost, extra...)
				b, errB := eval(s, many, now, cost, extra...)
				if (errA == nil) != (errB == nil) || fmt.Sprint(a) != fmt.Sprint(b) {
					rt.Fatalf("%s on two keys: %v %v / %v %v", what, a, errA, b, errB)
				}
				return a
			}

			// The keys' TTLs count from here on: a key the one-by-one
			// requests leave unwritten (a refund of nothing) keeps the TTL
			// its history wrote, which a loaded machine makes any age.
			start := time.Now()
			now := time.Now().UnixMicro()
			if rapid.IntRange(0, 3).Draw(rt, "foreign") == 0 {
				other := luascript.LimitOf(drawAlgorithm(rt, "foreign"), ids[0])
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
			drawBook := func(label string) (cost int64, maxDelay string) {
				cost = rapid.Int64Range(1, maxCost).Draw(rt, label+"-cost")
				d := rapid.Int64Range(0, 200_000).Draw(rt, label+"-delay")
				if rapid.IntRange(0, 3).Draw(rt, label+"-unbounded") == 0 {
					d = algorithm.MaxDuration
				}
				return cost, strconv.FormatInt(d, 10)
			}
			// bookings are those made so far (both keys hold the same), as
			// a cancel's arguments: the instant, then the values.
			type booking struct {
				cost  int64
				extra []string
			}
			var bookings []booking
			for i := range rapid.IntRange(0, 6).Draw(rt, "history") {
				now += rapid.Int64Range(0, 20_000).Draw(rt, fmt.Sprint("history-step", i))
				if rapid.Bool().Draw(rt, fmt.Sprint("history-take", i)) {
					both("take", decide, now, rapid.Int64Range(1, maxCost).Draw(rt, fmt.Sprint("history-cost", i)))
					continue
				}
				cost, maxDelay := drawBook(fmt.Sprint("history", i))
				if r := both("book", ops[luascript.OpBook], now, cost, maxDelay, testNonce); len(r) > 0 && r[0] == "1" {
					extra := []string{r[1].(string)}
					for _, v := range r[2+3*n:] {
						extra = append(extra, v.(string))
					}
					bookings = append(bookings, booking{cost, extra})
				}
			}

			op := luascript.Op(rapid.IntRange(int(luascript.OpBook), int(luascript.OpUndo)).Draw(rt, "op"))
			if (op == luascript.OpCancel || op == luascript.OpUndo) && len(bookings) == 0 {
				op = luascript.OpRefund
			}
			size := rapid.IntRange(1, 30).Draw(rt, "batch")
			m := 2
			switch op {
			case luascript.OpBook:
				m = 4
			case luascript.OpCancel, luascript.OpUndo:
				m = 3 + 3*n
			}
			argv := []any{strconv.Itoa(size), strconv.Itoa(m)}
			var want []any
			var wantErr error
			for i := range size {
				now += rapid.Int64Range(-3_000, 10_000).Draw(rt, fmt.Sprint("step", i))
				var cost int64
				var extra []string
				switch op {
				case luascript.OpBook:
					var d string
					cost, d = drawBook(fmt.Sprint("req", i))
					extra = []string{d, testNonce}
				case luascript.OpRefund:
					cost = rapid.Int64Range(1, 2*maxCost).Draw(rt, fmt.Sprint("refund", i))
				case luascript.OpCancel, luascript.OpUndo:
					b := rapid.SampledFrom(bookings).Draw(rt, fmt.Sprint("cancel", i))
					cost, extra = b.cost, b.extra
				}
				argv = append(append(argv, strconv.FormatInt(now, 10), strconv.FormatInt(cost, 10)), anys(extra)...)
				if wantErr != nil {
					continue
				}
				got, err := eval(ops[op], one, now, cost, extra...)
				if err != nil {
					wantErr = err
					continue
				}
				want = append(want, got...)
			}
			argv = append(append(argv, margin), anys(params)...)
			got, err := client.Eval(ctx, luascript.OpBatch(ops[op]).Source, many, argv...).Slice()
			switch {
			case wantErr != nil && len(want) == 0:
				if err == nil || err.Error() != strings.ReplaceAll(wantErr.Error(), fmt.Sprintf("{one%d}", run), fmt.Sprintf("{many%d}", run)) {
					rt.Fatalf("%v batch: %v, %v; one by one the first request failed: %v", op, got, err, wantErr)
				}
			case err != nil:
				rt.Fatalf("%v batch: %v; one by one: %v, %v", op, err, want, wantErr)
			case fmt.Sprint(got) != fmt.Sprint(want):
				rt.Fatalf("%v batch replied\n%v\none by one\n%v", op, got, want)
			}
			sameKeys(t, rt, client, one, many, fmt.Sprintf("the %v batch", op), time.Since(start))
		})
	})
}
