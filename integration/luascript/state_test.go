package luascript_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestTokenBucketState checks the token bucket's 16-byte state: two
// little-endian doubles, written by Redis's struct library on a real
// server and by the script's plain-Lua stand-in on miniredis, and equal to
// the tokens and instant the Go transition computes, bit for bit.
func TestTokenBucketState(t *testing.T) {
	var script *luascript.Script
	for _, s := range luascript.Scripts() {
		if s.Name == "tokenbucket" {
			script = s
		}
	}
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		if target.Cluster {
			t.Skip("the standalone server covers the real Lua")
		}
		ctx := context.Background()
		client := redistest.GoRedis(t, target)
		key := redistest.Prefix(t) + "{bucket}"
		const capacity, rate = 10.0, 3.3
		perMicro := rate / 1e6
		tokens, last := capacity, int64(1_763_700_000_123_456)
		now := last
		for i, step := range []int64{0, 1, 7, 333_333, 1, 2_999_999, 12_345_678_901, 0, 1} {
			now += step
			elapsed := max(now-last, 0)
			avail := min(tokens+float64(float64(elapsed)*perMicro), capacity)
			if avail < 1 {
				continue
			}
			tokens, last = avail-1, max(last, now)
			args := []any{strconv.FormatInt(now, 10), "1", "0", "10", "3.3"}
			if err := client.EvalSha(ctx, script.SHA1, []string{key}, args...).Err(); err != nil {
				if err = client.Eval(ctx, script.Source, []string{key}, args...).Err(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			raw, err := client.Get(ctx, key).Bytes()
			if err != nil || len(raw) != 16 {
				t.Fatalf("step %d: state %q (%v), want 16 bytes", i, raw, err)
			}
			gotTokens := math.Float64frombits(binary.LittleEndian.Uint64(raw[:8]))
			gotLast := math.Float64frombits(binary.LittleEndian.Uint64(raw[8:]))
			if gotTokens != tokens || gotLast != float64(last) {
				t.Fatalf("step %d: state (%v, %v), want (%v, %v) as Go computes", i, gotTokens, gotLast, tokens, float64(last))
			}
		}
	})
}

// TestTokenBucketForeignState checks that a key holding something else
// than a bucket's state is an error, never a decision.
func TestTokenBucketForeignState(t *testing.T) {
	var script *luascript.Script
	for _, s := range luascript.Scripts() {
		if s.Name == "tokenbucket" {
			script = s
		}
	}
	target := redistest.Miniredis(t)
	ctx := context.Background()
	client := redistest.GoRedis(t, target)
	client.Set(ctx, "x{k}", "9.5 1763700000000000", 0)
	err := client.Eval(ctx, script.Source, []string{"x{k}"}, "1763700000000001", "1", "0", "10", "3.3").Err()
	if err == nil || !strings.HasPrefix(err.Error(), "RLMISMATCH x{k} ") {
		t.Fatalf("a text state read as a bucket: %v; want an RLMISMATCH refusal naming the key", err)
	}
}

// script returns the script named name.
func script(t *testing.T, name string) *luascript.Script {
	t.Helper()
	for _, s := range luascript.Scripts() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no script %q", name)
	return nil
}

// TestGCRAState checks GCRA's state: the theoretical arrival time as a
// decimal integer, which a real server keeps in its integer encoding (no
// string allocated), equal to the Go transition's.
func TestGCRAState(t *testing.T) {
	s := script(t, "gcra")
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		if target.Cluster {
			t.Skip("the standalone server covers the real Lua")
		}
		ctx := context.Background()
		client := redistest.GoRedis(t, target)
		key := redistest.Prefix(t) + "{gcra}"
		now := int64(1_763_700_000_123_456)
		// Burst 10, one every 100ms: 3, then 2 more 50ms later.
		for i, c := range []struct{ at, cost, tat int64 }{{now, 3, now + 300_000}, {now + 50_000, 2, now + 500_000}} {
			args := []any{strconv.FormatInt(c.at, 10), strconv.FormatInt(c.cost, 10), "600000", "10", "100000"}
			if err := client.Eval(ctx, s.Source, []string{key}, args...).Err(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if got, err := client.Get(ctx, key).Result(); err != nil || got != strconv.FormatInt(c.tat, 10) {
				t.Fatalf("step %d: state %q, %v; want %d", i, got, err, c.tat)
			}
		}
		if target.Mini == nil {
			if enc, err := client.ObjectEncoding(ctx, key).Result(); err != nil || enc != "int" {
				t.Errorf("OBJECT ENCODING = %q, %v; want int", enc, err)
			}
		}
	})
}

// TestSlidingWindowState checks the sliding-window counter's state:
// "<window index> <count> <previous count>".
func TestSlidingWindowState(t *testing.T) {
	s := script(t, "slidingwindow")
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		if target.Cluster {
			t.Skip("the standalone server covers the real Lua")
		}
		ctx := context.Background()
		client := redistest.GoRedis(t, target)
		key := redistest.Prefix(t) + "{sw}"
		const window = 1_000_000
		index := int64(1_763_700_000)
		for i, c := range []struct {
			at, cost int64
			want     string
		}{
			{index*window + 5, 3, fmt.Sprintf("%d 3 0", index)},
			{index*window + 900_000, 2, fmt.Sprintf("%d 5 0", index)},
			{(index+1)*window + 1, 1, fmt.Sprintf("%d 1 5", index+1)},
			{(index+3)*window + 1, 4, fmt.Sprintf("%d 4 0", index+3)},
		} {
			args := []any{strconv.FormatInt(c.at, 10), strconv.FormatInt(c.cost, 10), "600000", "100", strconv.Itoa(window)}
			if err := client.Eval(ctx, s.Source, []string{key}, args...).Err(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if got, err := client.Get(ctx, key).Result(); err != nil || got != c.want {
				t.Fatalf("step %d: state %q, %v; want %q", i, got, err, c.want)
			}
		}
	})
}

// TestForeignState checks that a key holding another algorithm's state,
// or anything else, is an RLMISMATCH error, never a decision, and is left
// as it was. TestSharedStateMatrix and TestJunkState check every pair and
// more values through Limiters.
func TestForeignState(t *testing.T) {
	target := redistest.Miniredis(t)
	ctx := context.Background()
	client := redistest.GoRedis(t, target)
	now := "1763700000000001"
	for _, c := range []struct {
		script string
		params []any
		value  string
	}{
		{"gcra", []any{"10", "1000"}, "1763700000000000 5 0"}, // a counter's state
		{"gcra", []any{"10", "1000"}, "1763700000000000.5"},   // a fraction
		{"gcra", []any{"10", "1000"}, "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf0\x3f"},
		{"slidingwindow", []any{"10", "1000"}, "1763700000000000"}, // GCRA's
		{"slidingwindow", []any{"10", "1000"}, "1763700 5"},        // a fixed window's
		{"slidingwindow", []any{"10", "1000"}, "1763700 -5 0"},
	} {
		key := redistest.Prefix(t) + "{k}"
		client.Set(ctx, key, c.value, 0)
		for _, cost := range []string{"1", "0"} {
			args := append([]any{now, cost, "0"}, c.params...)
			if err := client.Eval(ctx, script(t, c.script).Source, []string{key}, args...).Err(); err == nil || !strings.HasPrefix(err.Error(), "RLMISMATCH "+key+" ") {
				t.Errorf("%s, cost %s, on %q: %v; want an RLMISMATCH refusal naming the key", c.script, cost, c.value, err)
			}
		}
		if got, _ := client.Get(ctx, key).Result(); got != c.value {
			t.Errorf("%s on %q: the value became %q", c.script, c.value, got)
		}
	}
}

// shared is one algorithm of the mismatch matrix, as a Limiter configures
// it.
type shared struct {
	name string
	alg  algorithm.Algorithm
}

// sharedAlgorithms are the six algorithms, each with a limit of 10.
func sharedAlgorithms(t *testing.T) []shared {
	t.Helper()
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	return []shared{
		{"tokenbucket", must(tokenbucket.New(tokenbucket.Config{Capacity: 10, Rate: 1}))},
		{"tokenbucket-interval", must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 10, Tokens: 1, Interval: time.Second}))},
		{"gcra", must(gcra.Per(10, time.Minute))},
		{"fixedwindow", must(fixedwindow.Per(10, time.Minute))},
		{"slidingwindow", must(slidingwindow.Per(10, time.Minute))},
		{"slidinglog", must(slidinglog.Per(10, time.Minute))},
	}
}

// sharedStores are the two Redis stores, each opened on target under
// prefix.
func sharedStores() map[string]func(t *testing.T, target redistest.Target, prefix string) store.Store[string] {
	return map[string]func(t *testing.T, target redistest.Target, prefix string) store.Store[string]{
		"goredis": func(t *testing.T, target redistest.Target, prefix string) store.Store[string] {
			st, err := goredisstore.New[string](redistest.GoRedis(t, target), goredisstore.WithPrefix[string](prefix),
				goredisstore.WithTTLMargin[string](10*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"rueidis": func(t *testing.T, target redistest.Target, prefix string) store.Store[string] {
			st, err := rueidisstore.New[string](redistest.Rueidis(t, target), rueidisstore.WithPrefix[string](prefix),
				rueidisstore.WithTTLMargin[string](10*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
}

// snapshot describes what key holds, whatever its type.
func snapshot(t *testing.T, client redis.UniversalClient, key string) string {
	t.Helper()
	ctx := t.Context()
	typ, err := client.Type(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	switch typ {
	case "string":
		v, err = client.Get(ctx, key).Result()
	case "zset":
		v, err = client.ZRangeWithScores(ctx, key, 0, -1).Result()
	case "hash":
		v, err = client.HGetAll(ctx, key).Result()
	case "list":
		v, err = client.LRange(ctx, key, 0, -1).Result()
	}
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %q", typ, fmt.Sprint(v))
}

// sharedReader is a Limiter of alg under the state ID "shared", failing
// open, with a breaker that one counted failure opens.
func sharedReader(t *testing.T, alg algorithm.Algorithm, st store.Store[string], clk clock.Clock) *ratelimit.Limiter[string] {
	t.Helper()
	lim, err := ratelimit.New(alg, st, ratelimit.WithStateID("shared"), ratelimit.WithClock(clk),
		ratelimit.WithFailurePolicy(ratelimit.FailOpen), ratelimit.WithBreaker(ratelimit.Breaker{Failures: 1, ProbeInterval: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// checkRead runs Peek then Allow of lim on "k", whose Redis key is key,
// holding what what describes: each either decides within range (bound is the longest wait
// allowed) or, when mismatch is allowed, fails with ErrStateMismatch alone,
// with the script's refusal and no raw Lua error, and leaves the value as
// it was. It returns whether any call was a mismatch.
func checkRead(t *testing.T, lim *ratelimit.Limiter[string], client redis.UniversalClient, key, what string, bound time.Duration, decides bool) bool {
	t.Helper()
	ctx := t.Context()
	before := snapshot(t, client, key)
	mismatched := false
	for _, op := range []string{"peek", "allow"} {
		var d ratelimit.Decision
		var err error
		if op == "peek" {
			d, err = lim.Peek(ctx, "k")
		} else {
			d, err = lim.Allow(ctx, "k")
		}
		if err != nil {
			mismatched = true
			if !errors.Is(err, ratelimit.ErrStateMismatch) || errors.Is(err, ratelimit.ErrStoreUnavailable) || errors.Is(err, ratelimit.ErrStoreFull) {
				t.Errorf("%s on %s: %v; want ErrStateMismatch alone", op, what, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "RLMISMATCH ") || strings.Contains(msg, "attempt to") || strings.Contains(msg, "user_script") {
				t.Errorf("%s on %s: %v; want the script's RLMISMATCH refusal, no raw Lua error", op, what, err)
			}
			if decides {
				t.Errorf("%s on %s: %v; want a decision", op, what, err)
			}
			if after := snapshot(t, client, key); after != before {
				t.Errorf("%s on %s: the value became %s", op, what, after)
			}
			continue
		}
		if d.Source() != ratelimit.FromStore || d.Remaining() < 0 || d.Remaining() > d.Limit() ||
			d.RetryAfter() < 0 || d.RetryAfter() > bound || d.ResetAfter() < 0 || d.ResetAfter() > bound {
			t.Errorf("%s on %s: %v; want the store's decision, in range (waits within %v)", op, what, d, bound)
		}
	}
	// The breaker, which one counted failure opens, is closed.
	if d, err := lim.Peek(ctx, "other"); err != nil || d.Source() != ratelimit.FromStore || d.BreakerOpen() {
		t.Errorf("after reading %s: Peek of another key = %v, %v; want the store's decision (the breaker closed)", what, d, err)
	}
	return mismatched
}

// TestSharedStateMatrix writes each algorithm's state under one state ID
// and reads it with every algorithm, through Limiters on both Redis
// stores: a reader of another algorithm fails with ErrStateMismatch, the
// value left as it was and the breaker closed, except for the pair
// today's format cannot tell apart (a fixed window's "<index> <count>"
// reads as an interval bucket's "<tokens> <instant>"), which decides, in
// range. A reader of the same algorithm goes on deciding.
func TestSharedStateMatrix(t *testing.T) {
	t0 := time.UnixMicro(1_763_700_000_000_000)
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		for name, newStore := range sharedStores() {
			t.Run(name, func(t *testing.T) {
				algs := sharedAlgorithms(t)
				for _, w := range algs {
					for _, r := range algs {
						prefix := redistest.Prefix(t)
						key := prefix + "{k}:shared"
						st := newStore(t, target, prefix)
						fake := clock.NewFake(t0)
						writer := sharedReader(t, w.alg, st, fake)
						if d, err := writer.AllowN(t.Context(), "k", 3); err != nil || !d.Allowed() {
							t.Fatalf("%s writing: %v, %v", w.name, d, err)
						}
						fake.Advance(time.Millisecond)
						before := snapshot(t, client, key)
						if strings.HasPrefix(before, "none") {
							t.Fatalf("%s wrote no key %s", w.name, key)
						}
						reader := sharedReader(t, r.alg, st, fake)
						same := w.name == r.name
						gap := w.name == "fixedwindow" && r.name == "tokenbucket-interval"
						mismatched := checkRead(t, reader, client, key, w.name+"'s "+before+" read by "+r.name, time.Hour, same || gap)
						if !same && !gap && !mismatched {
							t.Errorf("%s's state read by %s: decided, want ErrStateMismatch", w.name, r.name)
						}
					}
				}
			})
		}
	})
}

// TestJunkState checks every algorithm on keys holding what none of them
// writes: text of the wrong shape, numbers out of range, NaN and
// infinities in a bucket's bytes, and keys of the wrong Redis type.
func TestJunkState(t *testing.T) {
	t0 := time.UnixMicro(1_763_700_000_000_000)
	bits := func(tokens, last float64) string {
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], math.Float64bits(tokens))
		binary.LittleEndian.PutUint64(b[8:], math.Float64bits(last))
		return string(b[:])
	}
	strs := []string{
		"", "x", "1 2 3 4", "1e400", "-9999999999999999999 1", "99999999999999999999 1", "1 99999999999999999999",
		"1 2 99999999999999999999", "1.5 2", " 1 2", "0x10", "nan", "inf 1", "1763700000000000.5",
		"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
		bits(math.Inf(1), 1.7637e15), bits(-1, 1.7637e15), bits(1, math.Inf(-1)), bits(1, 0.5), bits(1e300, 1.7637e15),
	}
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		ctx := t.Context()
		st := sharedStores()["goredis"]
		for _, r := range sharedAlgorithms(t) {
			type junk struct {
				what  string
				write func(key string) error
			}
			var junks []junk
			for _, s := range strs {
				junks = append(junks, junk{fmt.Sprintf("%q", s), func(key string) error { return client.Set(ctx, key, s, 0).Err() }})
			}
			junks = append(junks,
				junk{"a hash", func(key string) error { return client.HSet(ctx, key, "f", "1").Err() }},
				junk{"a list", func(key string) error { return client.RPush(ctx, key, "1", "2").Err() }},
				junk{"a zset of text", func(key string) error { return client.ZAdd(ctx, key, redis.Z{Score: 1, Member: "x"}).Err() }},
				junk{"a zset out of range", func(key string) error {
					return client.ZAdd(ctx, key, redis.Z{Score: math.Inf(1), Member: "3"}).Err()
				}},
				junk{"a zset of huge members", func(key string) error {
					return client.ZAdd(ctx, key, redis.Z{Score: 1.7637e15, Member: "99999999999999999999"}).Err()
				}},
				junk{"a zset of fractions", func(key string) error {
					return client.ZAdd(ctx, key, redis.Z{Score: 1.7637e15 + 0.5, Member: "3"}).Err()
				}},
			)
			for _, j := range junks {
				prefix := redistest.Prefix(t)
				key := prefix + "{k}:shared"
				if err := j.write(key); err != nil {
					t.Fatal(err)
				}
				reader := sharedReader(t, r.alg, st(t, target, prefix), clock.NewFake(t0))
				if !checkRead(t, reader, client, key, j.what+" read by "+r.name, time.Hour, false) {
					t.Errorf("%s read by %s: decided, want ErrStateMismatch", j.what, r.name)
				}
				client.Del(ctx, key)
			}
		}
	})
}

// TestLoweredLimit is the case: a window that counted 95 under a
// limit of 100, read under a limit of 10 with the same state ID, denies
// with nothing remaining, where the reply was negative (an outage, which
// FailOpen admitted), and agrees with the Go transition.
func TestLoweredLimit(t *testing.T) {
	t0 := time.UnixMicro(1_763_700_000_000_000)
	type pair struct{ old, new algorithm.Algorithm }
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	pairs := map[string]pair{
		"fixedwindow":   {must(fixedwindow.Per(100, time.Minute)), must(fixedwindow.Per(10, time.Minute))},
		"slidingwindow": {must(slidingwindow.Per(100, time.Minute)), must(slidingwindow.Per(10, time.Minute))},
		"slidinglog":    {must(slidinglog.Per(100, time.Minute)), must(slidinglog.Per(10, time.Minute))},
	}
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		for name, p := range pairs {
			t.Run(name, func(t *testing.T) {
				ctx := t.Context()
				fake := clock.NewFake(t0)
				st := sharedStores()["goredis"](t, target, redistest.Prefix(t))
				old := sharedReader(t, p.old, st, fake)
				now := t0.UnixMicro()
				s := p.old.Init(algorithm.State{}, now)
				for range 19 {
					if d, err := old.AllowN(ctx, "k", 5); err != nil || !d.Allowed() {
						t.Fatalf("limit 100: %v, %v", d, err)
					}
					s, _ = p.old.Take(s, now, 5)
					fake.Advance(time.Millisecond)
					now += 1000
				}
				lim := sharedReader(t, p.new, st, fake)
				for _, op := range []string{"peek", "allow"} {
					var d ratelimit.Decision
					var err error
					var want algorithm.Result
					if op == "peek" {
						d, err = lim.Peek(ctx, "k")
						want = p.new.Peek(s, now, 1)
					} else {
						d, err = lim.Allow(ctx, "k")
						_, want = p.new.Take(s, now, 1)
					}
					if err != nil || d.Allowed() || d.Remaining() != 0 || d.Source() != ratelimit.FromStore {
						t.Errorf("%s under limit 10 after 95: %v, %v; want denied by the store, 0 remaining", op, d, err)
					}
					got := algorithm.Result{Remaining: d.Remaining(), RetryAfter: d.RetryAfter().Microseconds(), ResetAfter: d.ResetAfter().Microseconds()}
					if want.Remaining != 0 || want.Allowed() || got != want {
						t.Errorf("%s under limit 10 after 95: the script gives %+v, Go %+v; want both denied with 0 remaining", op, got, want)
					}
				}
			})
		}
	})
}

// TestLongerWindow is the other case: a fixed window (and a
// sliding-window counter) of a minute, read as one of an hour under the
// same state ID. The minute's index lies centuries ahead in hours: the
// state counts as fresh, where it made every wait about that long.
func TestLongerWindow(t *testing.T) {
	t0 := time.UnixMicro(1_763_700_000_000_000)
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, c := range []struct {
		name     string
		old, new algorithm.Algorithm
		bound    time.Duration // the longest wait: one window, two for a counter
	}{
		{"fixedwindow", must(fixedwindow.Per(10, time.Minute)), must(fixedwindow.Per(10, time.Hour)), time.Hour},
		{"slidingwindow", must(slidingwindow.Per(10, time.Minute)), must(slidingwindow.Per(10, time.Hour)), 2 * time.Hour},
		{"fixedwindow, shorter", must(fixedwindow.Per(10, time.Hour)), must(fixedwindow.Per(10, time.Minute)), time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, target redistest.Target) {
				ctx := t.Context()
				fake := clock.NewFake(t0)
				st := sharedStores()["goredis"](t, target, redistest.Prefix(t))
				if d, err := sharedReader(t, c.old, st, fake).AllowN(ctx, "k", 10); err != nil || !d.Allowed() {
					t.Fatalf("the first window: %v, %v", d, err)
				}
				now := t0.UnixMicro()
				s, _ := c.old.Take(c.old.Init(algorithm.State{}, now), now, 10)
				lim := sharedReader(t, c.new, st, fake)
				d, err := lim.Peek(ctx, "k")
				want := c.new.Peek(s, now, 1)
				got := algorithm.Result{Remaining: d.Remaining(), RetryAfter: d.RetryAfter().Microseconds(), ResetAfter: d.ResetAfter().Microseconds()}
				if err != nil || got != want || d.RetryAfter() < 0 || d.RetryAfter() > c.bound || d.ResetAfter() < 0 || d.ResetAfter() > c.bound {
					t.Errorf("Peek: the script gives %v, %v; Go %+v; want them equal, waits within [0, %v]", d, err, want, c.bound)
				}
				if d, err := lim.Allow(ctx, "k"); err != nil || d.RetryAfter() < 0 || d.RetryAfter() > c.bound || d.ResetAfter() < 0 || d.ResetAfter() > c.bound {
					t.Errorf("Allow: %v, %v; want waits within [0, %v]", d, err, c.bound)
				}
			})
		})
	}
}

// TestFarAheadMirror checks the rule for a counted window far ahead of
// now's at its edge, script against Go: ⌊2^48/window⌋ windows ahead still
// counts, one more is fresh, for windows from 7µs to the longest.
func TestFarAheadMirror(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		now := int64(1_763_700_000_123_456)
		for _, window := range []int64{7, 1_000_000, 3_600_000_000, algorithm.MaxDuration - 1, algorithm.MaxDuration} {
			fixed, err := fixedwindow.New(fixedwindow.Config{Limit: 3, Window: time.Duration(window) * time.Microsecond})
			if err != nil {
				t.Fatal(err)
			}
			counter, err := slidingwindow.New(slidingwindow.Config{Limit: 3, Window: time.Duration(window) * time.Microsecond})
			if err != nil {
				t.Fatal(err)
			}
			index := algorithm.FloorDiv(now, window)
			for _, ahead := range []int64{1, 2, algorithm.MaxDuration / window, algorithm.MaxDuration/window + 1} {
				calls := []call{{now, 0}, {now, 1}, {now + 1, 0}}
				key := redistest.Prefix(t) + "{fw}"
				s := algorithm.State{N0: index + ahead, N1: 2}
				client.Set(t.Context(), key, fmt.Sprintf("%d 2", s.N0), 0)
				mirrorFrom(t, client, fixed, key, s, calls, nil)
				key = redistest.Prefix(t) + "{sw}"
				s = algorithm.State{N0: index + ahead, N1: 2, N2: 1}
				client.Set(t.Context(), key, fmt.Sprintf("%d 2 1", s.N0), 0)
				mirrorFrom(t, client, counter, key, s, calls, nil)
			}
		}
	})
}
