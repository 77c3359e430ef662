package luascript_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
)

// call is one script call of a mirror test: Take(now, cost), or Peek(now)
// when cost is 0.
type call struct{ now, cost int64 }

// mirror runs calls on one key through alg's script, on client, and
// through alg's Go transition, and fails at the first reply that differs
// from the Go result. The store tests compare the two on small limits;
// this compares them on the extremes (large limits, costs, windows and
// logs), where the numbers the script handles are largest. check, when
// not nil, runs after each call with the Go state.
func mirror(t *testing.T, client redis.UniversalClient, alg algorithm.Algorithm, key string, calls []call,
	check func(i int, s algorithm.State)) {
	t.Helper()
	mirrorFrom(t, client, alg, key, alg.Init(algorithm.State{}, calls[0].now), calls, check)
}

// mirrorFrom is mirror from s, a Go state equivalent to what key holds.
func mirrorFrom(t *testing.T, client redis.UniversalClient, alg algorithm.Algorithm, key string, s algorithm.State,
	calls []call, check func(i int, s algorithm.State)) {
	t.Helper()
	ctx := t.Context()
	script, params, err := luascript.For(luascript.LimitOf(alg, "m"))
	if err != nil {
		t.Fatal(err)
	}
	if err := client.ScriptLoad(ctx, script.Source).Err(); err != nil {
		t.Fatal(err)
	}
	for i, c := range calls {
		// A TTL margin of 10 minutes: the calls' instants are not the
		// server's, whose TTLs count real time.
		args := append([]any{strconv.FormatInt(c.now, 10), strconv.FormatInt(c.cost, 10), "600000"}, anys(params)...)
		var cmd *redis.Cmd
		var want algorithm.Result
		if c.cost == 0 {
			cmd = client.EvalShaRO(ctx, script.SHA1, luascript.Keys(key, "m"), args...)
		} else {
			cmd = client.EvalSha(ctx, script.SHA1, luascript.Keys(key, "m"), args...)
		}
		// Scripts flushed by another package's test (its ScriptFlush case
		// flushes the shared server several times in a row, so reloading
		// can lose the race again): a NOSCRIPT reply ran nothing, and EVAL
		// sends the script with the call.
		if err := cmd.Err(); err != nil && isNoScript(err) {
			if c.cost == 0 {
				cmd = client.EvalRO(ctx, script.Source, luascript.Keys(key, "m"), args...)
			} else {
				cmd = client.Eval(ctx, script.Source, luascript.Keys(key, "m"), args...)
			}
		}
		if c.cost == 0 {
			want = alg.Peek(s, c.now, 1)
		} else {
			s, want = alg.Take(s, c.now, c.cost)
		}
		reply, err := cmd.Int64Slice()
		if err != nil {
			t.Fatalf("call %d, cost %d at %d: %v", i, c.cost, c.now, err)
		}
		got := algorithm.Result{}
		if len(reply) == 3 {
			got = algorithm.Result{Remaining: reply[0], RetryAfter: reply[1], ResetAfter: reply[2]}
		}
		if len(reply) != 3 || got != want {
			t.Fatalf("%v, call %d (cost %d at %d, %+dµs from the previous): script replied %v, Go decides %+v",
				alg, i, c.cost, c.now, c.now-calls[max(i-1, 0)].now, reply, want)
		}
		if check != nil {
			check(i, s)
		}
	}
}

// TestSlidingLogMirror runs long sequences on large logs, on every
// target: thousands of live entries, all of them expiring at once (which
// the script trims 1000 at a time), costs up to the limit, denials that
// search deep into the log, and a clock that steps back.
func TestSlidingLogMirror(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		n := 4000
		if target.Mini != nil {
			n = 1500 // gopher-lua is slow
		}
		const window = 2000 // µs
		alg, err := slidinglog.New(slidinglog.Config{Limit: slidinglog.MaxLimit, Window: window * time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		now := int64(1_763_700_000_000_000)
		var calls []call
		for len(calls) < n {
			switch r := rng.IntN(100); {
			case r < 2:
				now += window + rng.Int64N(3*window) // everything expires
			case r < 4:
				now -= rng.Int64N(window) // steps back
			case r < 70:
				now += rng.Int64N(3)
			}
			cost := int64(1 + rng.IntN(3))
			switch r := rng.IntN(100); {
			case r < 10:
				cost = 0
			case r < 15:
				cost = 1 + rng.Int64N(slidinglog.MaxLimit)
			}
			calls = append(calls, call{now, cost})
		}
		mirror(t, client, alg, redistest.Prefix(t)+"{log}", calls, nil)
	})
}

// TestSlidingLogTrimBounded checks that an admission trims at most 1000
// expired members, always keeping the newest of them, and that the count
// the kept one carries keeps decisions exact while the rest are trimmed.
func TestSlidingLogTrimBounded(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		if target.Cluster {
			t.Skip("the standalone server covers the real Lua")
		}
		ctx := t.Context()
		client := redistest.GoRedis(t, target)
		key := redistest.Prefix(t) + "{log}"
		const window, n = 10_000, 3500 // µs, entries
		alg, err := slidinglog.New(slidinglog.Config{Limit: slidinglog.MaxLimit, Window: window * time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		start := int64(1_763_700_000_000_000)
		var calls []call
		for i := range int64(n) {
			calls = append(calls, call{start + i, 1})
		}
		// Past the window of every entry: four admissions trim them.
		later := start + n + window
		for i := range int64(6) {
			calls = append(calls, call{later + i, 2}, call{later + i, 0})
		}
		card := func() int64 {
			c, err := client.ZCard(ctx, luascript.LogKey(key, "m")).Result()
			if err != nil {
				t.Fatal(err)
			}
			return c - 1 // the header member
		}
		var cards []int64
		mirror(t, client, alg, key, calls, func(i int, _ algorithm.State) {
			if i >= n && calls[i].cost > 0 {
				cards = append(cards, card())
			}
		})
		// n expired; each admission adds one member and trims up to 1000
		// of the expired, keeping the newest expired one.
		want := []int64{n + 1 - 1000, n + 2 - 2000, n + 3 - 3000, 1 + 4, 1 + 5, 1 + 6}
		if fmt.Sprint(cards) != fmt.Sprint(want) {
			t.Errorf("members after each admission past the window: got %v, want %v", cards, want)
		}
	})
}

// TestSlidingLogWrap checks a log whose cumulative count wraps around
// 2^52, as a key admitting for long enough does: a key holding an expired
// member counting 2^52 − 10 and a live one counting 2^52 − 3 (7 units at
// t0) decides as a Go log that admitted 7 at t0, through the wrap.
func TestSlidingLogWrap(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		ctx := t.Context()
		client := redistest.GoRedis(t, target)
		key := redistest.Prefix(t) + "{wrap}"
		const window, t0 = 1000, int64(1_763_700_000_000_000)
		alg, err := slidinglog.New(slidinglog.Config{Limit: 20, Window: window * time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		const m = 1 << 52
		err = client.ZAdd(ctx, luascript.LogKey(key, "m"), redis.Z{Score: math.Inf(-1), Member: "#L1000"},
			redis.Z{Score: float64(t0 - window - 5), Member: strconv.FormatInt(m-10, 10)},
			redis.Z{Score: float64(t0), Member: strconv.FormatInt(m-3, 10)}).Err()
		if err != nil {
			t.Fatal(err)
		}
		s, _ := alg.Take(alg.Init(algorithm.State{}, t0), t0, 7)
		rng := rand.New(rand.NewPCG(13, 14))
		now := t0
		var calls []call
		for range 200 {
			now += rng.Int64N(window / 4)
			calls = append(calls, call{now, rng.Int64N(8)})
		}
		mirrorFrom(t, client, alg, key, s, calls, nil)
		members, err := client.ZRange(ctx, luascript.LogKey(key, "m"), 1, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, mb := range members {
			if v, err := strconv.ParseInt(mb, 10, 64); err != nil || v >= m {
				t.Errorf("member %q: want a count below 2^52", mb)
			}
		}
	})
}

// TestSlidingLogOldFormat checks that a sorted set written by a previous
// format (one member "<instant>:<n>" per unit, with no header member) is
// refused, for takes and peeks alike, and left as it was.
func TestSlidingLogOldFormat(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		ctx := t.Context()
		client := redistest.GoRedis(t, target)
		base := redistest.Prefix(t) + "{old}"
		key := luascript.LogKey(base, "x")
		now := int64(1_763_700_000_000_000)
		members := []redis.Z{{Score: float64(now - 5), Member: fmt.Sprintf("%d:0", now-5)}, {Score: float64(now - 5), Member: fmt.Sprintf("%d:1", now-5)}}
		if err := client.ZAdd(ctx, key, members...).Err(); err != nil {
			t.Fatal(err)
		}
		var script *luascript.Script
		for _, s := range luascript.Scripts() {
			if s.Name == "slidinglog" {
				script = s
			}
		}
		for _, cost := range []string{"1", "0"} {
			err := evalAs(ctx, client, script, "0", false, luascript.Keys(base, "x"), strconv.FormatInt(now, 10), cost, "0", "x", "#L1000000", "10", "1000000").Err()
			if err == nil || !strings.Contains(err.Error(), "does not hold a state of this version") {
				t.Errorf("cost %s on an old-format key: got error %v, want a format error", cost, err)
			}
		}
		got, err := client.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil || fmt.Sprint(got) != fmt.Sprint(members) {
			t.Errorf("old-format key after the refused calls: %v, %v; want it unchanged, %v", got, err, members)
		}
	})
}

// TestGCRAMirror runs random sequences on meters of extreme
// configurations, on every target: bursts up to algorithm.MaxLimit,
// emission intervals from 1µs to the longest, costs up to the burst.
func TestGCRAMirror(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		rng := rand.New(rand.NewPCG(9, 10))
		for i, cfg := range []gcra.Config{
			{Burst: 1, Every: time.Microsecond},
			{Burst: 3, Every: 333_333 * time.Microsecond},
			{Burst: 1000, Every: 7 * time.Microsecond},
			{Burst: algorithm.MaxLimit, Every: 256 * time.Microsecond},
			{Burst: 1, Every: time.Duration(algorithm.MaxDuration) * time.Microsecond},
		} {
			alg, err := gcra.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			every, tau := cfg.Every.Microseconds(), alg.Window().Microseconds()
			now := int64(1_763_700_000_000_000) + rng.Int64N(every)
			var calls []call
			for range 150 {
				switch rng.IntN(6) {
				case 0:
					now -= rng.Int64N(tau/4 + 1) // steps back
				case 1:
					now += rng.Int64N(tau + 2)
				default:
					now += rng.Int64N(every + 1)
				}
				now = min(now, 1<<53-4*tau) // below 2^53, as every instant must be
				cost := 1 + rng.Int64N(cfg.Burst)
				switch rng.IntN(4) {
				case 0:
					cost = 0
				case 1:
					cost = 1 + rng.Int64N(min(cfg.Burst, 3))
				}
				calls = append(calls, call{now, cost})
			}
			mirror(t, client, alg, fmt.Sprintf("%s{gcra:%d}", redistest.Prefix(t), i), calls, nil)
		}
	})
}

// TestSlidingWindowMirror runs random sequences on counters of extreme
// configurations, on every target: limits up to algorithm.MaxLimit and
// windows up to algorithm.MaxDuration, where the estimate's products reach
// 2^88 and the script divides them by long division.
func TestSlidingWindowMirror(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		rng := rand.New(rand.NewPCG(11, 12))
		for i, cfg := range []slidingwindow.Config{
			{Limit: 1, Window: time.Microsecond},
			{Limit: 7, Window: 3 * time.Microsecond},
			{Limit: 100, Window: time.Second},
			{Limit: 1 << 30, Window: time.Hour},
			{Limit: algorithm.MaxLimit, Window: 1_000_003 * time.Microsecond},
			{Limit: algorithm.MaxLimit, Window: time.Duration(algorithm.MaxDuration) * time.Microsecond},
			{Limit: algorithm.MaxLimit - 1, Window: time.Duration(algorithm.MaxDuration-1) * time.Microsecond},
		} {
			alg, err := slidingwindow.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			w := cfg.Window.Microseconds()
			now := int64(1_763_700_000_000_000) + rng.Int64N(w)
			var calls []call
			for range 150 {
				switch rng.IntN(8) {
				case 0:
					now -= rng.Int64N(w + 1) // steps back
				case 1:
					now += rng.Int64N(3 * w)
				default:
					now += rng.Int64N(w/3 + 2)
				}
				// Instants stay below 2^53 (the year 2255), as every
				// instant the algorithms compute must.
				now = min(now, 1<<53-4*w)
				cost := 1 + rng.Int64N(cfg.Limit)
				switch rng.IntN(4) {
				case 0:
					cost = 0
				case 1:
					cost = 1 + rng.Int64N(min(cfg.Limit, 3))
				}
				calls = append(calls, call{now, cost})
			}
			mirror(t, client, alg, fmt.Sprintf("%s{sw:%d}", redistest.Prefix(t), i), calls, nil)
		}
	})
}
