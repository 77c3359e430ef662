package luascript_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
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
	if err == nil {
		t.Fatal("a text state was read as a bucket")
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
// or anything else, is an error, never a decision, and is left as it was.
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
			if err := client.Eval(ctx, script(t, c.script).Source, []string{key}, args...).Err(); err == nil {
				t.Errorf("%s, cost %s, on %q: no error", c.script, cost, c.value)
			}
		}
		if got, _ := client.Get(ctx, key).Result(); got != c.value {
			t.Errorf("%s on %q: the value became %q", c.script, c.value, got)
		}
	}
}
