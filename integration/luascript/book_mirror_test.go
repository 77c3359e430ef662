package luascript_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// mirrorBookings runs a random sequence of Take, Peek, Book (random maximum
// delays), Cancel of an earlier booking and Refund on one key through the
// decision and booking scripts of alg (luascript.For, ForOp), and through
// alg's Go transitions applied as a table applies them (store.Booker):
// every reply must be Go's, number for number.
func mirrorBookings(t *testing.T, client redis.UniversalClient, alg algorithm.Algorithm, key string, rng *rand.Rand, now, step int64, steps int) {
	t.Helper()
	b, ok := alg.(algorithm.Booker)
	if !ok {
		t.Skipf("%v does not book yet", alg)
	}
	ctx := t.Context()
	l := luascript.LimitOf(alg, "m")
	decide, params, err := luascript.For(l)
	if err != nil {
		t.Fatal(err)
	}
	var ops [luascript.OpUndo + 1]*luascript.Script
	for op := luascript.OpBook; op <= luascript.OpUndo; op++ {
		if ops[op], _, err = luascript.ForOp(op, l); err != nil {
			if errors.Is(err, store.ErrAlgorithmUnsupported) {
				t.Skipf("%v: %v", alg, err)
			}
			t.Fatal(err)
		}
	}
	keys := luascript.Keys(key, "m")
	if alg.Spec().Name != "slidinglog" {
		keys = keys[:1]
	} else {
		keys = keys[1:]
	}
	run := func(s *luascript.Script, now, cost int64, extra ...string) *redis.Cmd {
		args := append([]any{strconv.FormatInt(now, 10), strconv.FormatInt(cost, 10), "600000"}, anys(params)...)
		args = append(args, anys(extra)...)
		return client.Eval(ctx, s.Source, keys, args...)
	}
	ints := func(what string, cmd *redis.Cmd) []int64 {
		t.Helper()
		r, err := cmd.Int64Slice()
		if err != nil {
			t.Fatalf("%v: %s: %v", alg, what, err)
		}
		return r
	}
	type booking struct {
		act, cost int64
		pre, post algorithm.State
		values    []string
	}
	var (
		s       algorithm.State
		exists  bool
		pending []booking
	)
	limit := alg.Limit()
	drawCost := func() int64 {
		if rng.IntN(3) == 0 {
			return 1 + rng.Int64N(limit)
		}
		return 1 + rng.Int64N(min(limit, 3))
	}
	for i := range steps {
		switch rng.IntN(5) {
		case 0:
			now -= rng.Int64N(step/4 + 1)
		default:
			now += rng.Int64N(step + 1)
		}
		if !exists {
			// The script finds no state and starts from Init at its now,
			// until something is written.
			s = b.Init(algorithm.State{}, now)
		}
		var what string
		var got, want []int64
		switch op := rng.IntN(7); op {
		case 0, 1: // Take, Peek
			cost := drawCost()
			if op == 1 {
				cost = 0
			}
			what = fmt.Sprintf("step %d: take %d at %d", i, cost, now)
			got = ints(what, run(decide, now, cost))
			var r algorithm.Result
			if cost == 0 {
				r = b.Peek(s, now, 1)
			} else {
				s, r = b.Take(s, now, cost)
				exists = exists || r.Allowed()
			}
			want = []int64{r.Remaining, r.RetryAfter, r.ResetAfter}
		case 2, 3: // Book
			cost := drawCost()
			maxDelay := rng.Int64N(4*step + 1)
			if rng.IntN(4) == 0 {
				maxDelay = algorithm.MaxDuration
			}
			what = fmt.Sprintf("step %d: book %d at %d within %d", i, cost, now, maxDelay)
			reply, err := run(ops[luascript.OpBook], now, cost, strconv.FormatInt(maxDelay, 10), testNonce).StringSlice()
			if err != nil || len(reply) != 8 {
				t.Fatalf("%v: %s: %v %v", alg, what, reply, err)
			}
			for _, v := range reply[:5] {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("%v: %s: reply %v: %v", alg, what, reply, err)
				}
				got = append(got, n)
			}
			act, ok := algorithm.EarliestAll([]algorithm.Algorithm{b}, []algorithm.State{s}, now, algorithm.BookingDeadline(now, maxDelay), cost)
			var r algorithm.Result
			if ok {
				pre := algorithm.CloneState(s)
				s, r = b.Book(s, now, act, cost)
				exists = true
				pending = append(pending, booking{act: act, cost: cost, pre: pre, post: algorithm.CloneState(s), values: reply[5:]})
				want = []int64{1, act, r.Remaining, r.RetryAfter, r.ResetAfter}
			} else {
				r = b.Peek(s, now, cost)
				want = []int64{0, act, r.Remaining, r.RetryAfter, r.ResetAfter}
			}
		case 4: // Cancel
			if len(pending) == 0 {
				continue
			}
			j := rng.IntN(len(pending))
			bk := pending[j]
			pending = append(pending[:j], pending[j+1:]...)
			what = fmt.Sprintf("step %d: cancel %d due at %d, at %d", i, bk.cost, bk.act, now)
			args := append([]string{strconv.FormatInt(bk.act, 10)}, bk.values...)
			got = ints(what, run(ops[luascript.OpCancel], now, bk.cost, args...))
			give := int64(0)
			if bk.act > now {
				exact := algorithm.ExactUndo(b) && s.N0 == bk.post.N0 && s.N1 == bk.post.N1 && s.N2 == bk.post.N2
				if exact {
					s, give = bk.pre, bk.cost
				} else if give = b.Unused(s, now, bk.act, bk.cost); give > 0 {
					s, _, _ = b.(algorithm.Undoer).Undo(s, now, bk.act, bk.cost, bk.cost, false)
				}
			}
			want = []int64{give}
		case 6: // A Reservation's Refund (OpUndo), due or not, then a peek
			if len(pending) == 0 {
				continue
			}
			j := rng.IntN(len(pending))
			bk := pending[j]
			pending = append(pending[:j], pending[j+1:]...)
			what = fmt.Sprintf("step %d: undo %d due at %d, at %d", i, bk.cost, bk.act, now)
			args := append([]string{strconv.FormatInt(bk.act, 10)}, bk.values...)
			ints(what, run(ops[luascript.OpUndo], now, bk.cost, args...))
			if algorithm.ExactUndo(b) && s.N0 == bk.post.N0 && s.N1 == bk.post.N1 && s.N2 == bk.post.N2 {
				s = bk.pre
				if bk.values[0] == "" {
					exists = false // the booking made the state: there is none again
				}
			} else {
				s, _, _ = b.(algorithm.Undoer).Undo(s, now, bk.act, bk.cost, bk.cost, false)
			}
			what += ", then a peek"
			got = ints(what, run(decide, now, 0))
			r := b.Peek(s, now, 1)
			want = []int64{r.Remaining, r.RetryAfter, r.ResetAfter}
		case 5: // Refund
			n := 1 + rng.Int64N(limit)
			what = fmt.Sprintf("step %d: refund %d at %d", i, n, now)
			got = ints(what, run(ops[luascript.OpRefund], now, n))
			var r algorithm.Result
			s, r = b.Refund(s, now, n)
			want = []int64{r.Remaining, r.RetryAfter, r.ResetAfter}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%v: %s: script replied %v, Go %v", alg, what, got, want)
		}
	}
}

// TestBookMirror runs mirrorBookings on every algorithm, small and extreme
// configurations, on every target.
func TestBookMirror(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		rng := rand.New(rand.NewPCG(26, 1))
		must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		type cfg struct {
			alg  algorithm.Algorithm
			step int64 // µs
		}
		cases := []cfg{
			{must(tokenbucket.New(tokenbucket.Config{Capacity: 5, Rate: 10})), 200_000},
			{must(tokenbucket.New(tokenbucket.Config{Capacity: algorithm.MaxLimit, Rate: 1e9})), 1_000},
			{must(tokenbucket.New(tokenbucket.Config{Capacity: 3, Rate: 0.001})), 2_000_000_000},
			{must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 5, Tokens: 2, Interval: time.Second})), 700_000},
			{must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 1000, Tokens: 999, Interval: time.Microsecond})), 3},
			{must(gcra.New(gcra.Config{Burst: 4, Every: 100 * time.Millisecond})), 150_000},
			{must(gcra.New(gcra.Config{Burst: algorithm.MaxLimit, Every: 256 * time.Microsecond})), 1 << 40},
			{must(fixedwindow.New(fixedwindow.Config{Limit: 5, Window: time.Second})), 600_000},
			{must(fixedwindow.New(fixedwindow.Config{Limit: algorithm.MaxLimit, Window: time.Duration(algorithm.MaxDuration/4) * time.Microsecond})), algorithm.MaxDuration / 8},
			{must(slidingwindow.New(slidingwindow.Config{Limit: 5, Window: time.Second})), 600_000},
			{must(slidingwindow.New(slidingwindow.Config{Limit: algorithm.MaxLimit, Window: time.Hour})), 1_000_000_000},
			{must(slidinglog.New(slidinglog.Config{Limit: 5, Window: time.Second})), 300_000},
			{must(slidinglog.New(slidinglog.Config{Limit: 1000, Window: time.Millisecond})), 300},
		}
		for i, c := range cases {
			t.Run(fmt.Sprintf("%d/%v", i, c.alg), func(t *testing.T) {
				for seq := range 4 {
					now := int64(1_763_700_000_000_000) + rng.Int64N(c.step+1)
					mirrorBookings(t, client, c.alg, fmt.Sprintf("%s{book:%d:%d}", redistest.Prefix(t), i, seq), rng, now, c.step, 120)
				}
			})
		}
	})
}
