package luascript_test

import (
	"context"
	"encoding/binary"
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
