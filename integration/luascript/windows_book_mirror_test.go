package luascript_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
)

// TestWindowsBookMirror runs random histories of Take, Peek, Book (the
// book script: the earliest instant within a maximum delay) and Refund
// on one key, through the scripts and through the Go transitions of the
// fixed window and the sliding-window counter, from small limits and
// windows to the largest, with clocks that step back, and fails at the
// first reply or stored value that differs.
func TestWindowsBookMirror(t *testing.T) {
	var algs []algorithm.Booker
	for _, c := range []struct {
		limit  int64
		window time.Duration
	}{
		{3, time.Second}, {10, 7 * time.Microsecond}, {1, time.Microsecond},
		{1 << 30, time.Minute}, {algorithm.MaxLimit, time.Duration(algorithm.MaxDuration) * time.Microsecond},
	} {
		f, err := fixedwindow.New(fixedwindow.Config{Limit: c.limit, Window: c.window})
		if err != nil {
			t.Fatal(err)
		}
		s, err := slidingwindow.New(slidingwindow.Config{Limit: c.limit, Window: c.window})
		if err != nil {
			t.Fatal(err)
		}
		algs = append(algs, f, s)
	}
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		n := 150
		if target.Mini != nil {
			n = 80 // gopher-lua is slow
		}
		for i, alg := range algs {
			t.Run(fmt.Sprint(alg), func(t *testing.T) {
				windowsBookMirror(t, client, alg, redistest.Prefix(t)+"{book}", rand.New(rand.NewPCG(26, uint64(i))), n)
			})
		}
	})
}

func windowsBookMirror(t *testing.T, client redis.UniversalClient, alg algorithm.Booker, key string, rng *rand.Rand, n int) {
	ctx := t.Context()
	lim := luascript.LimitOf(alg, "m")
	decide, params, err := luascript.For(lim)
	if err != nil {
		t.Fatal(err)
	}
	book, _, err := luascript.ForOp(luascript.OpBook, lim)
	if err != nil {
		t.Fatal(err)
	}
	refund, _, err := luascript.ForOp(luascript.OpRefund, lim)
	if err != nil {
		t.Fatal(err)
	}
	window := alg.Spec().Params[1]
	w := int64(window)
	limit := alg.Limit()
	keys := luascript.Keys(key, "m")
	hdr := lim.Header()
	format := func(s algorithm.State) string {
		if alg.Spec().Name == "fixedwindow" {
			return fmt.Sprintf("%s%d %d", hdr, s.N0, s.N1)
		}
		return fmt.Sprintf("%s%d %d %d", hdr, s.N0, s.N1, s.N2)
	}
	now := int64(1_763_700_000_000_000) + rng.Int64N(w)
	s := alg.Init(algorithm.State{}, now)
	var log []string
	ahead := 0 // bookings due after now
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%v, after %v: "+format, append([]any{alg, log}, args...)...)
	}
	for range n {
		switch rng.IntN(10) {
		case 0:
			now -= rng.Int64N(w + 1)
		case 1:
			now += rng.Int64N(3 * w)
		default:
			now += rng.Int64N(w/3 + 2)
		}
		if now > 1<<52 {
			// Instants stay below 2^53 (algorithm.MaxDuration past them
			// too), where the script's doubles are exact: a clock stepping
			// back far, past what a window keeps.
			now -= 1 << 51
		}
		cost := 1 + rng.Int64N(min(limit, 3))
		if rng.IntN(2) == 0 {
			cost = limit - rng.Int64N(limit/2+1) // fills windows of any limit
		}
		args := []any{strconv.FormatInt(now, 10), strconv.FormatInt(cost, 10), "600000"}
		args = append(args, anys(params)...)
		var got, want []string
		switch op := rng.IntN(10); {
		case op < 3: // Take or Peek
			if op == 0 {
				args[1] = "0"
			}
			log = append(log, fmt.Sprintf("decide(%d, %s)", now, args[1]))
			reply, err := client.Eval(ctx, decide.Source, keys, args...).Int64Slice()
			if err != nil {
				fail("%v", err)
			}
			var r algorithm.Result
			if op == 0 {
				r = alg.Peek(s, now, 1)
			} else {
				s, r = alg.Take(s, now, cost)
			}
			got, want = windowStrs(reply), []string{fmt.Sprint(r.Remaining), fmt.Sprint(r.RetryAfter), fmt.Sprint(r.ResetAfter)}
		case op < 8: // Book
			// At most algorithm.MaxDuration, as stores pass it.
			delay := min(rng.Int64N(3*w), algorithm.MaxDuration)
			if rng.IntN(4) == 0 {
				delay = algorithm.MaxDuration
			}
			log = append(log, fmt.Sprintf("book(%d, %d, %d)", now, cost, delay))
			before := ""
			if v, err := client.HGet(ctx, keys[0], "m").Result(); err == nil {
				if before, err = redistest.Folded(ctx, client, keys[0], "m", v); err != nil {
					fail("%v", err)
				}
			}
			got, err = client.Eval(ctx, book.Source, keys, append(args, strconv.FormatInt(delay, 10), testNonce)...).StringSlice()
			if err != nil {
				fail("%v", err)
			}
			act, ok := algorithm.EarliestAll([]algorithm.Algorithm{alg}, []algorithm.State{s}, now, algorithm.BookingDeadline(now, delay), cost)
			if !ok {
				r := alg.Peek(s, now, cost)
				want = []string{"0", fmt.Sprint(act), fmt.Sprint(r.Remaining), fmt.Sprint(r.RetryAfter), fmt.Sprint(r.ResetAfter), "", "", ""}
			} else {
				var r algorithm.Result
				var err error
				later := []int64{now, act, act + w, act + 2*w}
				if s, r, err = algorithm.CheckBook(alg, s, now, act, cost, later); err != nil {
					fail("%v", err)
				}
				if act > now {
					ahead++
				}
				want = []string{"1", fmt.Sprint(act), fmt.Sprint(r.Remaining), fmt.Sprint(r.RetryAfter), fmt.Sprint(r.ResetAfter), noGen(before), format(s), testGen}
				if len(got) == 8 {
					got[5], got[6] = noGen(got[5]), noGen(got[6])
				}
			}
		default: // Refund
			log = append(log, fmt.Sprintf("refund(%d, %d)", now, cost))
			reply, err := client.Eval(ctx, refund.Source, keys, args...).Int64Slice()
			if err != nil {
				fail("%v", err)
			}
			var r algorithm.Result
			s, r = alg.Refund(s, now, cost)
			got, want = windowStrs(reply), []string{fmt.Sprint(r.Remaining), fmt.Sprint(r.RetryAfter), fmt.Sprint(r.ResetAfter)}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			fail("the script replied %q, Go %q", got, want)
		}
	}
	if ahead < n/20 {
		t.Errorf("%v: %d of %d calls booked ahead: the history tests too little", alg, ahead, n)
	}
}

func windowStrs(v []int64) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = strconv.FormatInt(x, 10)
	}
	return out
}
