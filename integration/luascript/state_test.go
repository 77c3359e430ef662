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
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 10, Rate: 3.3})
	if err != nil {
		t.Fatal(err)
	}
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		if target.Cluster {
			t.Skip("the standalone server covers the real Lua")
		}
		ctx := context.Background()
		client := redistest.GoRedis(t, target)
		key := redistest.Prefix(t) + "{bucket}"
		const capacity, rate = 10.0, 3.3
		run := evaler(t, client, alg, "t", key)
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
			if _, err := run(now, 1, 0); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			raw, err := client.HGet(ctx, key+"#", "t").Bytes()
			if err != nil || len(raw) != 20 || string(raw[:4]) != "T10:" {
				t.Fatalf("step %d: state %q (%v), want \"T10:\" and 16 bytes", i, raw, err)
			}
			raw = raw[4:]
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
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 10, Rate: 3.3})
	if err != nil {
		t.Fatal(err)
	}
	target := redistest.Miniredis(t)
	ctx := context.Background()
	client := redistest.GoRedis(t, target)
	for _, v := range []string{"T10:9.5 1763700000000000", "9.5 1763700000000000", "T10:0123456789abcdefX"} {
		client.HSet(ctx, "x{k}#", "t", v)
		_, err = evaler(t, client, alg, "t", "x{k}")(1763700000000001, 1, 0)
		if err == nil || !strings.HasPrefix(err.Error(), "RLMISMATCH x{k}# field t ") {
			t.Errorf("%q read as a bucket: %v; want an RLMISMATCH refusal naming the key and field", v, err)
		}
	}
}

// evaler returns a function running alg's script under state ID id on
// the key whose base name is base (prefix and braces), at now for cost,
// with a TTL margin in ms, and returning its reply.
func evaler(t *testing.T, client redis.UniversalClient, alg algorithm.Algorithm, id, base string) func(now, cost, margin int64) ([]int64, error) {
	return evalerOf(t, client, luascript.LimitOf(alg, id), base)
}

// evalerOf is evaler for a Limit.
func evalerOf(t *testing.T, client redis.UniversalClient, l luascript.Limit, base string) func(now, cost, margin int64) ([]int64, error) {
	t.Helper()
	s, params, err := luascript.For(l)
	if err != nil {
		t.Fatal(err)
	}
	keys := luascript.Keys(base, l.ID)
	return func(now, cost, margin int64) ([]int64, error) {
		args := append([]any{strconv.FormatInt(now, 10), strconv.FormatInt(cost, 10), strconv.FormatInt(margin, 10)}, anys(params)...)
		return evalAs(t.Context(), client, s, l.Mode(), cost == 0, keys, args...).Int64Slice()
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
	alg, err := gcra.New(gcra.Config{Burst: 10, Every: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
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
			if _, err := evaler(t, client, alg, "g", key)(c.at, c.cost, 600000); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if got, err := client.HGet(ctx, key+"#", "g").Result(); err != nil || got != "G10,100000:"+strconv.FormatInt(c.tat, 10) {
				t.Fatalf("step %d: state %q, %v; want G10,100000:%d", i, got, err, c.tat)
			}
		}
		if target.Mini == nil {
			if enc, err := client.ObjectEncoding(ctx, key+"#").Result(); err != nil || enc != "listpack" {
				t.Errorf("OBJECT ENCODING = %q, %v; want listpack", enc, err)
			}
		}
	})
}

// TestSlidingWindowState checks the sliding-window counter's state:
// "<window index> <count> <previous count>".
func TestSlidingWindowState(t *testing.T) {
	alg, err := slidingwindow.New(slidingwindow.Config{Limit: 100, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
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
			if _, err := evaler(t, client, alg, "s", key)(c.at, c.cost, 600000); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if got, err := client.HGet(ctx, key+"#", "s").Result(); err != nil || got != "S100,1000000:"+c.want {
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
	now := int64(1763700000000001)
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	g := must(gcra.New(gcra.Config{Burst: 10, Every: time.Millisecond}))
	sw := must(slidingwindow.New(slidingwindow.Config{Limit: 10, Window: time.Millisecond}))
	for _, c := range []struct {
		alg   algorithm.Algorithm
		value string
	}{
		{g, "G10,1000:1763700000000000 5 0"}, // a counter's state
		{g, "G10,1000:1763700000000000.5"},   // a fraction
		{g, "S10,1000:1763700000000000"},     // another algorithm's header
		{g, "1763700000000000"},              // the format before headers
		{g, "G10,1000,5:1763700000000000"},
		{g, "G10:1763700000000000"},
		{g, "G0,1000:1763700000000000"},
		{g, "G99999999999999999999,1000:1763700000000000"},
		{g, "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf0\x3f"},
		{sw, "S10,1000:1763700 5"}, // a fixed window's body
		{sw, "S10,1000:1763700 -5 0"},
		{sw, "F10,1000:1763700"}, // a fixed window's header, a body it cannot read
		{sw, "1763700 5 0"},
	} {
		key := redistest.Prefix(t) + "{k}"
		client.HSet(ctx, key+"#", "x", c.value)
		run := evaler(t, client, c.alg, "x", key)
		for _, cost := range []int64{1, 0} {
			if _, err := run(now, cost, 0); err == nil || !strings.HasPrefix(err.Error(), "RLMISMATCH "+key+"# field x ") {
				t.Errorf("%v, cost %d, on %q: %v; want an RLMISMATCH refusal naming the key", c.alg, cost, c.value, err)
			}
		}
		if got, _ := client.HGet(ctx, key+"#", "x").Result(); got != c.value {
			t.Errorf("%v on %q: the value became %q", c.alg, c.value, got)
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

// snapshot describes what keys hold, whatever their types.
func snapshot(t *testing.T, client redis.UniversalClient, keys ...string) string {
	t.Helper()
	var out []string
	for _, k := range keys {
		out = append(out, snapshot1(t, client, k))
	}
	return strings.Join(out, "; ")
}

func snapshot1(t *testing.T, client redis.UniversalClient, key string) string {
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
		v, err = redistest.FoldedHash(ctx, client, key)
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
func sharedReader(t *testing.T, alg algorithm.Algorithm, st store.Store[string], clk clock.Clock, opts ...ratelimit.Option) *ratelimit.Limiter[string] {
	t.Helper()
	lim, err := ratelimit.New(alg, st, append([]ratelimit.Option{ratelimit.WithName("shared"), ratelimit.WithClock(clk),
		ratelimit.WithFailurePolicy(ratelimit.FailOpen), ratelimit.WithBreaker(ratelimit.Breaker{Failures: 1, ProbeInterval: time.Hour})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// checkRead runs Peek, Allow, then AllowAll (with another key) of lim on
// "k", whose Redis key is key,
// holding what what describes: each either decides within range (bound is the longest wait
// allowed) or, when mismatch is allowed, fails with ErrStateMismatch alone,
// with the script's refusal and no raw Lua error, and leaves the value as
// it was. It returns whether any call was a mismatch.
func checkRead(t *testing.T, lim *ratelimit.Limiter[string], client redis.UniversalClient, keys []string, what string, bound time.Duration, decides bool) bool {
	t.Helper()
	ctx := t.Context()
	before := snapshot(t, client, keys...)
	mismatched := false
	for _, op := range []string{"peek", "allow", "AllowAll"} {
		var d ratelimit.Decision
		var err error
		switch op {
		case "peek":
			d, err = lim.Peek(ctx, "k")
		case "allow":
			d, err = lim.Allow(ctx, "k")
		default: // the multi script, beside a clean key
			reqs := []ratelimit.Request[string]{{Limiter: lim, Key: "k", N: 1}, {Limiter: lim, Key: "clean", N: 1}}
			_, err = ratelimit.AllowAll(ctx, reqs)
			d = reqs[0].Decision
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
			if after := snapshot(t, client, keys...); after != before {
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
// stores: a reader of another algorithm decides from what the other
// algorithm's state had used (3 of 10: its own fresh state charged with
// them, algorithm.Carry), with or without ResetOnMismatch (issue 48: a
// change of algorithm under a name carries the usage), and its admission
// replaces that state, which the writer then reads the same way. A reader
// of the same algorithm goes on deciding.
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
						keys := luascript.Keys(prefix+"{k}", "shared")
						st := newStore(t, target, prefix)
						fake := clock.NewFake(t0)
						writer := sharedReader(t, w.alg, st, fake)
						if d, err := writer.AllowN(t.Context(), "k", 3); err != nil || !d.Allowed() {
							t.Fatalf("%s writing: %v, %v", w.name, d, err)
						}
						fake.Advance(time.Millisecond)
						before := snapshot(t, client, keys...)
						if before == "none; none" {
							t.Fatalf("%s wrote no key %s", w.name, keys)
						}
						reader := sharedReader(t, r.alg, st, fake)
						if w.name == r.name {
							checkRead(t, reader, client, keys, w.name+"'s "+before+" read by "+r.name, time.Hour, true)
							continue
						}
						// A peek reports the 3 used carried and writes
						// nothing, an admission replaces the state; with
						// ResetOnMismatch or without.
						afresh := reader
						if len(w.name)%2 == 0 {
							afresh = sharedReader(t, r.alg, st, fake, ratelimit.WithResetOnMismatch())
						}
						ctx := t.Context()
						if d, err := afresh.Peek(ctx, "k"); err != nil || !d.Allowed() || d.Remaining() != 7 {
							t.Errorf("%s's state peeked by %s afresh: %v, %v; want the 3 used carried, 7 remaining", w.name, r.name, d, err)
						}
						if after := snapshot(t, client, keys...); after != before {
							t.Errorf("%s's state peeked by %s afresh: %s became %s", w.name, r.name, before, after)
						}
						if d, err := afresh.AllowN(ctx, "k", 2); err != nil || !d.Allowed() || d.Remaining() != 5 {
							t.Errorf("%s's state taken by %s afresh: %v, %v; want 5 remaining", w.name, r.name, d, err)
						}
						if d, err := reader.Peek(ctx, "k"); err != nil || d.Remaining() != 5 {
							t.Errorf("%s after %s afresh took 2: %v, %v; want its state, 5 remaining", r.name, w.name, d, err)
						}
						if d, err := writer.Peek(ctx, "k"); err != nil || d.Remaining() > 5 {
							t.Errorf("%s after %s replaced its state: %v, %v; want the 5 used carried back", w.name, r.name, d, err)
						}
						var other string
						if w.name == "slidinglog" {
							other = snapshot(t, client, keys[1])
						} else if r.name == "slidinglog" {
							other = snapshot(t, client, keys[0])
						}
						if other != "" && other != "none" && !strings.HasPrefix(other, "none") {
							t.Errorf("%s replaced %s's state, which is still there: %s", r.name, w.name, other)
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
		// Tokens below zero are a debt (a booking's), within 2^53.
		bits(math.Inf(1), 1.7637e15), bits(-1e300, 1.7637e15), bits(math.Inf(-1), 1.7637e15), bits(1, math.Inf(-1)), bits(1, 0.5), bits(1e300, 1.7637e15),
	}
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		ctx := t.Context()
		st := sharedStores()["goredis"]
		for _, r := range sharedAlgorithms(t) {
			// where: 0 the field "shared" of the key's hash, 1 the hash's
			// key itself, 2 the sorted set of the ID.
			type junk struct {
				what  string
				where int
				write func(key string) error
			}
			var junks []junk
			for _, s := range strs {
				junks = append(junks, junk{fmt.Sprintf("field %q", s), 0, func(key string) error { return client.HSet(ctx, key, "shared", s).Err() }})
				for _, h := range []string{"T10:", "I10:", "G10,6000000:", "F10,60000000:", "S10,60000000:"} {
					junks = append(junks, junk{fmt.Sprintf("field %q", h+s), 0, func(key string) error { return client.HSet(ctx, key, "shared", h+s).Err() }})
				}
			}
			for where, k := range []string{"", "the hash's key", "the sorted set's key"} {
				if where == 0 {
					continue
				}
				junks = append(junks,
					junk{k + ": a string", where, func(key string) error { return client.Set(ctx, key, "1 2", 0).Err() }},
					junk{k + ": a list", where, func(key string) error { return client.RPush(ctx, key, "1", "2").Err() }},
				)
			}
			junks = append(junks,
				junk{"the hash's key: a zset", 1, func(key string) error { return client.ZAdd(ctx, key, redis.Z{Score: 1, Member: "x"}).Err() }},
				junk{"a hash at the sorted set's key", 2, func(key string) error { return client.HSet(ctx, key, "f", "1").Err() }},
				junk{"a zset of text", 2, func(key string) error { return client.ZAdd(ctx, key, redis.Z{Score: 1, Member: "x"}).Err() }},
				junk{"a zset of the format before headers", 2, func(key string) error {
					return client.ZAdd(ctx, key, redis.Z{Score: 1.7637e15, Member: "3"}).Err()
				}},
				junk{"a zset out of range", 2, func(key string) error {
					return client.ZAdd(ctx, key, redis.Z{Score: math.Inf(-1), Member: "#L60000000"}, redis.Z{Score: math.Inf(1), Member: "3"}).Err()
				}},
				junk{"a zset of huge members", 2, func(key string) error {
					return client.ZAdd(ctx, key, redis.Z{Score: math.Inf(-1), Member: "#L60000000"}, redis.Z{Score: 1.7637e15, Member: "99999999999999999999"}).Err()
				}},
				junk{"a zset of fractions", 2, func(key string) error {
					return client.ZAdd(ctx, key, redis.Z{Score: math.Inf(-1), Member: "#L60000000"}, redis.Z{Score: 1.7637e15 + 0.5, Member: "3"}).Err()
				}},
				junk{"a zset with a header at another score", 2, func(key string) error {
					return client.ZAdd(ctx, key, redis.Z{Score: 0, Member: "#L60000000"}, redis.Z{Score: 1.7637e15, Member: "3"}).Err()
				}},
				junk{"a zset with a header of no window", 2, func(key string) error {
					return client.ZAdd(ctx, key, redis.Z{Score: math.Inf(-1), Member: "#L0"}, redis.Z{Score: 1.7637e15, Member: "3"}).Err()
				}},
			)
			for _, j := range junks {
				prefix := redistest.Prefix(t)
				keys := luascript.Keys(prefix+"{k}", "shared")
				if err := j.write(keys[j.where/2]); err != nil {
					t.Fatal(err)
				}
				reader := sharedReader(t, r.alg, st(t, target, prefix), clock.NewFake(t0))
				// A sliding log reads the hash only for its own field.
				decides := r.name == "slidinglog" && j.where == 1
				// Junk under a header of another kind is that kind's state,
				// carried by what its reader makes of it, or refused (issue
				// 48: another kind's state carries its usage).
				var other byte
				if h, ok := strings.CutPrefix(j.what, `field "`); ok && len(h) > 1 && h[0] >= 'A' && h[0] <= 'Z' && h[1] >= '0' && h[1] <= '9' {
					other = h[0]
				} else if j.what == "a zset with a header of no window" {
					other = 'L'
				}
				carried := other != 0 && other != strings.TrimPrefix(luascript.LimitOf(r.alg, "shared").Header(), "#")[0]
				if !checkRead(t, reader, client, keys, j.what+" read by "+r.name, time.Hour, decides) && !decides && !carried {
					t.Errorf("%s read by %s: decided, want ErrStateMismatch", j.what, r.name)
				}
				client.Del(ctx, keys...)
			}
		}
	})
}

// TestLoweredLimit is the case: a window that counted 95 under a
// limit of 100, read under a limit of 10 with the same state ID, denies
// with nothing remaining, where the reply was negative (an outage, which
// FailOpen admitted), and agrees with the Go transition of the old state
// carried as-is (Inherit, as the memory store carries it): under the same
// window, as-is keeps what the counts mean (design §2.8; a count above the
// limit in the windows' own states is a fill pointer booked ahead, so it
// is not kept as it is).
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
				tag, _ := algorithm.TagOf(p.old)
				s = p.new.(algorithm.Inheritor).Inherit(tag, s, now, algorithm.AsIs)
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
// same state ID, and back. What was counted in the window running now
// counts in the reader's window running now (design §2.4, §2.5): the
// script decides as Go does on that state, with waits within the
// reader's window, where the minute's index read as an hour's made every
// wait 1,318,233 h.
func TestLongerWindow(t *testing.T) {
	t0 := time.UnixMicro(1_763_700_000_000_000 + 30*60_000_000 + 20_000_000) // 30 min 20 s past a whole hour
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, c := range []struct {
		name     string
		old, new algorithm.Algorithm
		window   int64         // the reader's
		bound    time.Duration // the longest wait: one window, two for a counter
	}{
		{"fixedwindow", must(fixedwindow.Per(10, time.Minute)), must(fixedwindow.Per(10, time.Hour)), time.Hour.Microseconds(), time.Hour},
		{"slidingwindow", must(slidingwindow.Per(10, time.Minute)), must(slidingwindow.Per(10, time.Hour)), time.Hour.Microseconds(), 2 * time.Hour},
		{"fixedwindow, shorter", must(fixedwindow.Per(10, time.Hour)), must(fixedwindow.Per(10, time.Minute)), time.Minute.Microseconds(), time.Minute},
		{"slidingwindow, shorter", must(slidingwindow.Per(10, time.Hour)), must(slidingwindow.Per(10, time.Minute)), time.Minute.Microseconds(), 2 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, target redistest.Target) {
				ctx := t.Context()
				fake := clock.NewFake(t0)
				st := sharedStores()["goredis"](t, target, redistest.Prefix(t))
				if d, err := sharedReader(t, c.old, st, fake).AllowN(ctx, "k", 10); err != nil || !d.Allowed() {
					t.Fatalf("the first window: %v, %v", d, err)
				}
				fake.Advance(time.Second)
				now := t0.UnixMicro() + 1_000_000
				// The 10 counted, in the reader's window of now.
				s := algorithm.State{N0: algorithm.FloorDiv(now, c.window), N1: 10}
				lim := sharedReader(t, c.new, st, fake)
				d, err := lim.Peek(ctx, "k")
				want := c.new.Peek(s, now, 1)
				got := algorithm.Result{Remaining: d.Remaining(), RetryAfter: d.RetryAfter().Microseconds(), ResetAfter: d.ResetAfter().Microseconds()}
				if err != nil || got != want || d.Allowed() || d.RetryAfter() <= 0 || d.RetryAfter() > c.bound || d.ResetAfter() <= 0 || d.ResetAfter() > c.bound {
					t.Errorf("Peek: the script gives %v, %v; Go %+v; want them equal, denied, waits within (0, %v]", d, err, want, c.bound)
				}
				if d, err := lim.Allow(ctx, "k"); err != nil || d.Allowed() || d.RetryAfter() <= 0 || d.RetryAfter() > c.bound || d.ResetAfter() <= 0 || d.ResetAfter() > c.bound {
					t.Errorf("Allow: %v, %v; want denied, waits within (0, %v]", d, err, c.bound)
				}
			})
		})
	}
}

// TestInheritExamples runs design §2's examples on every algorithm, on
// both rules, through a Limiter whose limit changed under one state ID:
// 95 used of 100, then a limit of 10, leaves nothing (as-is: 95 used;
// proportional: 9.5, rounded up); 5 used of 10, then a limit of 100,
// leaves 95 (as-is) or 50 (proportional). A peek converts and writes
// nothing; the admission that follows writes the converted state under
// the new header.
func TestInheritExamples(t *testing.T) {
	t0 := time.UnixMicro(1_763_700_000_000_000 + 20_000_000)
	type mk func(limit int64) algorithm.Algorithm
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	kinds := []struct {
		name string
		make mk
	}{
		{"tokenbucket", func(n int64) algorithm.Algorithm { return must(tokenbucket.Per(n, time.Hour)) }},
		{"tokenbucket-interval", func(n int64) algorithm.Algorithm {
			return must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: n, Tokens: n, Interval: time.Hour}))
		}},
		{"gcra", func(n int64) algorithm.Algorithm { return must(gcra.Per(n, time.Hour)) }},
		{"fixedwindow", func(n int64) algorithm.Algorithm { return must(fixedwindow.Per(n, time.Hour)) }},
		{"slidingwindow", func(n int64) algorithm.Algorithm { return must(slidingwindow.Per(n, time.Hour)) }},
		{"slidinglog", func(n int64) algorithm.Algorithm { return must(slidinglog.Per(n, time.Hour)) }},
	}
	cases := []struct {
		from, used, to int64
		rule           algorithm.Rule
		left           int64
	}{
		{100, 95, 10, algorithm.AsIs, 0},
		{10, 5, 100, algorithm.AsIs, 95},
		{100, 95, 10, algorithm.Proportional, 0},
		{10, 5, 100, algorithm.Proportional, 50},
	}
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		for _, k := range kinds {
			for _, c := range cases {
				if c.rule == algorithm.Proportional && k.name == "slidinglog" {
					continue // refused at New
				}
				name := fmt.Sprintf("%s %d→%d after %d, %v", k.name, c.from, c.to, c.used, c.rule)
				ctx := t.Context()
				fake := clock.NewFake(t0)
				prefix := redistest.Prefix(t)
				st := sharedStores()["goredis"](t, target, prefix)
				if d, err := sharedReader(t, k.make(c.from), st, fake).AllowN(ctx, "k", int(c.used)); err != nil || !d.Allowed() {
					t.Fatalf("%s: using %d: %v, %v", name, c.used, d, err)
				}
				keys := luascript.Keys(prefix+"{k}", "shared")
				before := snapshot(t, client, keys...)
				lim := sharedReader(t, k.make(c.to), st, fake, ratelimit.WithInheritance(c.rule))
				d, err := lim.Peek(ctx, "k")
				if err != nil || d.Remaining() != c.left || d.Allowed() != (c.left > 0) {
					t.Errorf("%s: Peek = %v, %v; want %d remaining", name, d, err, c.left)
				}
				if after := snapshot(t, client, keys...); after != before {
					t.Errorf("%s: Peek changed %s to %s", name, before, after)
				}
				d, err = lim.Allow(ctx, "k")
				if err != nil || d.Allowed() != (c.left > 0) || d.Remaining() != max(c.left-1, 0) {
					t.Errorf("%s: Allow = %v, %v; want %d remaining, allowed %v", name, d, err, max(c.left-1, 0), c.left > 0)
				}
				if d.RetryAfter() < 0 || d.ResetAfter() < 0 || d.ResetAfter() > 2*time.Hour || d.RetryAfter() > 2*time.Hour {
					t.Errorf("%s: Allow = %v; want waits within [0, 2h]", name, d)
				}
				if c.left > 0 {
					// Written under the new header: read as it is now.
					hdr := snapshot(t, client, keys...)
					tag, _ := algorithm.TagOf(k.make(c.to))
					h := tag.Header()
					if tag.Kind == slidinglog.Kind {
						h = "#" + h[:len(h)-1]
					}
					if !strings.Contains(hdr, h) {
						t.Errorf("%s: after the admission %s; want the header %s", name, hdr, h)
					}
					if d, err := lim.Peek(ctx, "k"); err != nil || d.Remaining() != c.left-1 {
						t.Errorf("%s: Peek after the admission = %v, %v; want %d remaining", name, d, err, c.left-1)
					}
				}
			}
		}
	})
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
				client.HSet(t.Context(), key+"#", "m", fmt.Sprintf("F3,%d:%d 2", window, s.N0))
				mirrorFrom(t, client, fixed, key, s, calls, nil)
				key = redistest.Prefix(t) + "{sw}"
				s = algorithm.State{N0: index + ahead, N1: 2, N2: 1}
				client.HSet(t.Context(), key+"#", "m", fmt.Sprintf("S3,%d:%d 2 1", window, s.N0))
				mirrorFrom(t, client, counter, key, s, calls, nil)
			}
		}
	})
}
