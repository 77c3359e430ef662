package luascript_test

import (
	"fmt"
	"math"
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
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestValueBytes checks the value each algorithm writes, byte for byte,
// as design §1.3's table gives it: the header, then the body. A real
// server keeps a key's hash as a listpack.
func TestValueBytes(t *testing.T) {
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	const now = int64(1_795_439_364_302_466)
	for _, c := range []struct {
		alg  algorithm.Algorithm
		want string
	}{
		{must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 100, Tokens: 1, Interval: time.Second})), "I100:99 1795439364302466"},
		{must(gcra.Per(10, time.Minute)), fmt.Sprintf("G10,6000000:%d", now+6_000_000)},
		{must(fixedwindow.Per(100, time.Minute)), fmt.Sprintf("F100,60000000:%d 1", now/60_000_000)},
		{must(slidingwindow.Per(100, time.Minute)), fmt.Sprintf("S100,60000000:%d 1 0", now/60_000_000)},
		// 100 tokens, one taken: 99.0 and now as little-endian doubles.
		{must(tokenbucket.Per(100, time.Minute)), "T100:\x00\x00\x00\x00\x00\xc0\x58\x40" + le(float64(now))},
	} {
		redistest.Each(t, func(t *testing.T, target redistest.Target) {
			if target.Cluster {
				t.Skip("the standalone server covers the real Lua")
			}
			client := redistest.GoRedis(t, target)
			base := redistest.Prefix(t) + "{v}"
			if _, err := evaler(t, client, c.alg, "id", base)(now, 1, 600_000); err != nil {
				t.Fatal(err)
			}
			got, err := client.HGet(t.Context(), base+"#", "id").Result()
			if err == nil {
				got, err = redistest.Folded(t.Context(), client, base+"#", "id", got)
			}
			if err != nil || got != c.want {
				t.Errorf("%v: value %q, %v; want %q", c.alg, got, err, c.want)
			}
			if target.Mini == nil {
				if enc, err := client.ObjectEncoding(t.Context(), base+"#").Result(); err != nil || enc != "listpack" {
					t.Errorf("%v: OBJECT ENCODING %q, %v; want listpack", c.alg, enc, err)
				}
			}
		})
	}
	// The sliding log: its header member at -inf, then one member per instant.
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		base := redistest.Prefix(t) + "{v}"
		alg := must(slidinglog.Per(10, time.Hour))
		if _, err := evaler(t, client, alg, "id", base)(now, 3, 600_000); err != nil {
			t.Fatal(err)
		}
		got, err := client.ZRangeWithScores(t.Context(), base+"#id", 0, -1).Result()
		if want := fmt.Sprint([]redis.Z{{Score: math.Inf(-1), Member: "#L3600000000"}, {Score: float64(now), Member: "3"}}); err != nil || fmt.Sprint(got) != want {
			t.Errorf("sliding log: %v, %v; want %s", got, err, want)
		}
	})
}

func le(x float64) string {
	var b [8]byte
	u := math.Float64bits(x)
	for i := range b {
		b[i] = byte(u >> (8 * i))
	}
	return string(b[:])
}

// TestHashTTL checks a key's TTL, which its fields share: a write that
// needs a longer TTL extends it (PEXPIRE GT), a shorter one leaves it, and
// a key without a TTL that holds none of the script's fields gets one
// (PEXPIRE NX, since GT counts no TTL as an infinite one). A key that
// holds one has a TTL, as every write sets one, unless it was made
// persistent by hand: it then stays so (the script calls GT alone,
// TestOneExpirePerWrite). The TTL is never 0.
func TestHashTTL(t *testing.T) {
	long, err := fixedwindow.Per(10, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	short, err := gcra.Per(10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		ctx := t.Context()
		client := redistest.GoRedis(t, target)
		base := redistest.Prefix(t) + "{ttl}"
		hash := base + "#"
		now := int64(1_763_701_200_000_000) + 1_800_000_000 // half an hour before the hour's end
		pttl := func() time.Duration {
			t.Helper()
			d, err := client.PTTL(ctx, hash).Result()
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		// A GCRA unit: 6 s.
		if _, err := evaler(t, client, short, "short", base)(now, 1, 0); err != nil {
			t.Fatal(err)
		}
		if d := pttl(); d <= 5*time.Second || d > 6*time.Second {
			t.Fatalf("PTTL after one GCRA unit = %v, want 6s", d)
		}
		// The fixed window's end, within the hour: longer, extended.
		end := time.Duration(((now/3_600_000_000+1)*3_600_000_000-now)/1000) * time.Millisecond
		if _, err := evaler(t, client, long, "long", base)(now, 1, 0); err != nil {
			t.Fatal(err)
		}
		if d := pttl(); d < end-time.Second || d > end+time.Millisecond {
			t.Fatalf("PTTL after the window's write = %v, want %v (extended)", d, end)
		}
		// The GCRA again: shorter, so the key keeps the window's TTL.
		if _, err := evaler(t, client, short, "short", base)(now, 1, 0); err != nil {
			t.Fatal(err)
		}
		if d := pttl(); d < end-time.Second || d > end+time.Millisecond {
			t.Fatalf("PTTL after a shorter write = %v, want %v (kept)", d, end)
		}
		// Made persistent by hand (PERSIST): a write of a field the key
		// holds leaves it so.
		if err := client.Persist(ctx, hash).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := evaler(t, client, short, "short", base)(now, 1, 0); err != nil {
			t.Fatal(err)
		}
		if d := pttl(); d != -1 {
			t.Fatalf("PTTL after a write to a persistent key that holds the field = %v, want none (-1ns)", d)
		}
		// No TTL, and none of the script's fields (another ID's only): the
		// write sets one.
		if err := client.HDel(ctx, hash, "short").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := evaler(t, client, short, "short", base)(now, 1, 0); err != nil {
			t.Fatal(err)
		}
		if d := pttl(); d <= 0 || d > 18*time.Second {
			t.Fatalf("PTTL after a write to a key without one = %v, want the write's (18s)", d)
		}
	})
}

// TestOldLayoutIgnored runs a limit next to keys of the layout before
// headers (prefix{k} and prefix{k}:ID, spent), as during a rolling
// deploy: the new layout decides on its own, and leaves them as they were.
func TestOldLayoutIgnored(t *testing.T) {
	alg, err := fixedwindow.Per(10, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMicro(1_763_700_000_000_000)
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		ctx := t.Context()
		client := redistest.GoRedis(t, target)
		prefix := redistest.Prefix(t)
		old := fmt.Sprintf("%d 10", t0.UnixMicro()/3_600_000_000)
		for _, k := range []string{prefix + "{k}", prefix + "{k}:shared"} {
			if err := client.Set(ctx, k, old, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
		}
		st := sharedStores()["goredis"](t, target, prefix)
		lim := sharedReader(t, alg, st, clock.NewFake(t0))
		if d, err := lim.Allow(ctx, "k"); err != nil || !d.Allowed() || d.Remaining() != 9 {
			t.Errorf("Allow beside spent keys of the old layout = %v, %v; want 9 remaining", d, err)
		}
		for _, k := range []string{prefix + "{k}", prefix + "{k}:shared"} {
			if v, err := client.Get(ctx, k).Result(); err != nil || v != old {
				t.Errorf("old key %s = %q, %v; want it unchanged, %q", k, v, err, old)
			}
		}
	})
}

// TestResetOwnFields checks that a Limiter's Reset forgets its own state
// under its ID, the hash field or the sorted set, and no other ID's.
func TestResetOwnFields(t *testing.T) {
	a, err := gcra.Per(10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	log, err := slidinglog.Per(10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMicro(1_763_700_000_000_000)
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		for name, newStore := range sharedStores() {
			t.Run(name, func(t *testing.T) {
				ctx := t.Context()
				client := redistest.GoRedis(t, target)
				prefix := redistest.Prefix(t)
				st := newStore(t, target, prefix)
				clk := ratelimit.WithClock(clock.NewFake(t0))
				lims := map[string]*ratelimit.Limiter[string]{}
				for _, id := range []string{"a", "b", "c"} {
					alg := algorithm.Algorithm(a)
					if id == "c" {
						alg = log
					}
					lim, err := ratelimit.New(alg, st, clk, ratelimit.WithName(id))
					if err != nil {
						t.Fatal(err)
					}
					if _, err := lim.AllowN(ctx, "k", 3); err != nil {
						t.Fatal(err)
					}
					lims[id] = lim
				}
				hash := luascript.HashKey(prefix + "{k}")
				if err := lims["a"].Reset(ctx, "k"); err != nil {
					t.Fatal(err)
				}
				if got, _ := client.HKeys(ctx, hash).Result(); fmt.Sprint(got) != "[b]" {
					t.Errorf("fields after a's Reset: %q, want [b]", got)
				}
				if err := lims["c"].Reset(ctx, "k"); err != nil {
					t.Fatal(err)
				}
				if n, _ := client.Exists(ctx, luascript.LogKey(prefix+"{k}", "c")).Result(); n != 0 {
					t.Errorf("c's sorted set after its Reset: EXISTS = %d, want 0", n)
				}
				if d, err := lims["b"].Peek(ctx, "k"); err != nil || d.Remaining() != 7 {
					t.Errorf("b after a's and c's Resets: %v, %v; want its 7 remaining", d, err)
				}
				if d, err := lims["a"].Peek(ctx, "k"); err != nil || d.Remaining() != 10 {
					t.Errorf("a after its Reset: %v, %v; want a fresh key", d, err)
				}
			})
		}
	})
}

// TestPolicyOneHSET checks a Policy's write: its string-state limits'
// fields go in one HSET, the key's TTL is the longest they need, a log of
// the same key keeps its sorted set; and with ResetOnMismatch on every
// limit, a key of another type is replaced once, keeping both fields.
func TestPolicyOneHSET(t *testing.T) {
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	t0 := time.UnixMicro(1_763_701_200_000_000 + 1_800_000_000) // half an hour before the hour's end
	limits := []ratelimit.Limit{
		{Name: "burst", Algorithm: must(gcra.Per(10, time.Minute)), ResetOnMismatch: true},
		{Name: "hourly", Algorithm: must(fixedwindow.Per(100, time.Hour)), ResetOnMismatch: true},
		{Name: "log", Algorithm: must(slidinglog.Per(5, time.Minute)), ResetOnMismatch: true},
	}
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		for name, newStore := range sharedStores() {
			t.Run(name, func(t *testing.T) {
				ctx := t.Context()
				client := redistest.GoRedis(t, target)
				prefix := redistest.Prefix(t)
				p, err := ratelimit.NewPolicy(newStore(t, target, prefix), limits, ratelimit.WithName("p"), ratelimit.WithClock(clock.NewFake(t0)))
				if err != nil {
					t.Fatal(err)
				}
				hash := luascript.HashKey(prefix + "{k}")
				if err := client.Set(ctx, hash, "not a hash", 0).Err(); err != nil {
					t.Fatal(err)
				}
				for i := range 2 {
					if d, err := p.AllowN(ctx, "k", 2); err != nil || !d.Allowed() {
						t.Fatalf("AllowN %d: %v, %v", i, d, err)
					}
				}
				got, err := redistest.FoldedHash(ctx, client, hash)
				if err != nil || len(got) != 2 || got["p/burst"] == "" || got["p/hourly"] == "" {
					t.Fatalf("hash after two admissions: %q, %v; want the fields p/burst and p/hourly", got, err)
				}
				if want := fmt.Sprintf("F100,3600000000:%d 4", t0.UnixMicro()/3_600_000_000); got["p/hourly"] != want {
					t.Errorf("p/hourly = %q, want %q", got["p/hourly"], want)
				}
				// The TTL is the fixed window's, the longer: 30 minutes, and
				// the 10-minute margin of sharedStores.
				if d := client.PTTL(ctx, hash).Val(); d < 39*time.Minute || d > 40*time.Minute {
					t.Errorf("PTTL = %v, want 40m", d)
				}
				if n := client.ZCard(ctx, luascript.LogKey(prefix+"{k}", "p/log")).Val(); n != 2 {
					t.Errorf("the log's sorted set has %d members, want 2 (the header, and one instant)", n)
				}
			})
		}
	})
}

// TestPolicyOneHMGET checks a Policy's read: its string-state limits'
// fields come from one HMGET at the script's start, and each limit's load
// judges its own value exactly as an HGET of its own did: a key of
// another type fails the first string-state limit with "is not a hash"
// (WRONGTYPE stands for every field), and a foreign value in a later
// field fails naming that field, with nothing written either way.
func TestPolicyOneHMGET(t *testing.T) {
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	bucket := luascript.LimitOf(must(tokenbucket.PerSecond(10)), "burst")
	logl := luascript.LimitOf(must(slidinglog.Per(5, time.Minute)), "log")
	hourly := luascript.LimitOf(must(fixedwindow.Per(100, time.Hour)), "hourly")
	now := fmt.Sprint(time.Now().UnixMicro())
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		ctx := t.Context()
		client := redistest.GoRedis(t, target)
		for _, tc := range []struct {
			name   string
			limits []luascript.Limit
			setup  func(hash string) error
			want   string // what the error reply starts with, after "RLMISMATCH <hash> field "
		}{
			{"not a hash", []luascript.Limit{bucket, hourly},
				func(hash string) error { return client.Set(ctx, hash, "x", 0).Err() },
				"burst is not a hash, not T10:"},
			{"not a hash, log first", []luascript.Limit{logl, bucket, hourly},
				func(hash string) error { return client.Set(ctx, hash, "x", 0).Err() },
				"burst is not a hash, not T10:"},
			{"second field foreign", []luascript.Limit{bucket, logl, hourly},
				func(hash string) error { return client.HSet(ctx, hash, "hourly", "junk").Err() },
				"hourly holds a value of no known format, not F100,"},
			// Another kind's state is carried (issue 48), so the refusal
			// is the foreign second field's.
			{"first field of another kind", []luascript.Limit{bucket, hourly},
				func(hash string) error { return client.HSet(ctx, hash, "burst", "F1,1:0 0", "hourly", "junk").Err() },
				"hourly holds a value of no known format, not F100,"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				base := redistest.Prefix(t) + "{k}"
				hash := luascript.HashKey(base)
				if err := tc.setup(hash); err != nil {
					t.Fatal(err)
				}
				s, params, err := luascript.For(tc.limits...)
				if err != nil {
					t.Fatal(err)
				}
				if want := "local hv = redis.pcall('HMGET', hkey"; !strings.Contains(s.Source, want) {
					t.Fatalf("%s's script has no %q", s.Name, want)
				}
				keys := []string{hash}
				for _, l := range tc.limits {
					if l.ID == "log" {
						keys = append(keys, luascript.LogKey(base, l.ID))
					}
				}
				args := append([]any{now, "1", "0"}, anys(params)...)
				before, _ := client.Dump(ctx, hash).Result()
				_, err = evalAs(ctx, client, s, luascript.Modes(tc.limits...), false, keys, args...).Result()
				if want := "RLMISMATCH " + hash + " field " + tc.want; err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Fatalf("%s: %v; want an error starting %q", s.Name, err, want)
				}
				if after, _ := client.Dump(ctx, hash).Result(); after != before {
					t.Errorf("the key changed on a mismatch")
				}
				if n := client.Exists(ctx, luascript.LogKey(base, "log")).Val(); n != 0 {
					t.Errorf("the log's sorted set was written on a mismatch")
				}
			})
		}
	})
}
