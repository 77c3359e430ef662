package luascript_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
)

// TestCounterCharges checks that a fixed window's state of the window of
// now is kept as a counter (docs/design/counter-window.md) and charged
// with one HINCRBY: after a key's first charge in a window (which reads
// its field and writes the counter), a plain decision and each group of a
// multi script run one HINCRBY on the key's hash and neither read nor
// write its field; a refusal gives its charge back at once, and a unit
// refused by a later group gives back the charges of the groups before
// it, so the counters hold what the decisions admitted.
func TestCounterCharges(t *testing.T) {
	target := redistest.StartServer(t).Target()
	client := redistest.GoRedis(t, target)
	seen := monitorAll(t, target.Addrs[0])
	ctx := t.Context()
	alg, err := fixedwindow.Per(3, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	limit := luascript.LimitOf(alg, "c")
	decision, params, err := luascript.For(limit)
	if err != nil {
		t.Fatal(err)
	}
	multi, kinds, ok := luascript.MultiKinds(decision, decision)
	if !ok || kinds[0] != 1 || kinds[1] != 1 {
		t.Fatalf("MultiKinds: %v, %v", kinds, ok)
	}
	now := time.Now().UnixMicro()
	now = now - now%3_600_000_000 + 600_000_000 // 10 minutes into an hour
	index := strconv.FormatInt(now/3_600_000_000, 10)
	base := redistest.Prefix(t)
	hashA, hashB := luascript.Keys(base+"{a}", "c")[0], luascript.Keys(base+"{b}", "c")[0]
	cfield := "c{" + limit.Header() + index
	decide := func(hash string, cost int) []int64 {
		t.Helper()
		args := append([]any{strconv.FormatInt(now, 10), strconv.Itoa(cost), "600000"}, anys(params)...)
		got, err := client.Eval(ctx, decision.Source, []string{hash}, args...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// One unit of a group on each key, cost 1 each.
	unit := func() []int64 {
		t.Helper()
		args := append([]any{"1", strconv.Itoa(len(params) + 1), strconv.FormatInt(now, 10), "600000"}, anys(params)...)
		args = append(args, "2", "1 1 1 1", "0", "1 1 1 1", "0")
		got, err := client.Eval(ctx, multi.Source, []string{hashA, hashB}, args...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	counter := func(hash string) string {
		t.Helper()
		v, err := client.HGet(ctx, hash, cfield).Result()
		if err != nil {
			t.Fatalf("HGET %s %s: %v", hash, cfield, err)
		}
		return v
	}
	// reads checks that the commands on the hashes since the last look
	// were HINCRBYs alone, as many as hincrby says.
	reads := func(what string, hincrby map[string]int) {
		t.Helper()
		got := seen()
		for _, hash := range []string{hashA, hashB} {
			if n := got[hash]; n["HINCRBY"] != hincrby[hash] || len(n) > 1 || len(n) == 1 && hincrby[hash] == 0 {
				t.Errorf("%s: %v on %s, want %d HINCRBY alone", what, n, hash, hincrby[hash])
			}
		}
	}
	seen()
	decide(hashA, 1)
	decide(hashB, 1)
	if v := client.HGet(ctx, hashA, "c").Val(); v != limit.Header()+index+" *" {
		t.Fatalf("the field after a first charge: %q, want the window's index and *", v)
	}
	seen()
	if got := decide(hashA, 1); got[0] != 1 {
		t.Fatalf("second charge: %v, want 1 remaining", got)
	}
	reads("a plain charge", map[string]int{hashA: 1})
	if got := unit(); len(got) != 7 || got[0] != 1 || got[1] != 0 || got[4] != 1 {
		t.Fatalf("a unit of two: %v, want admitted, 0 and 1 remaining", got)
	}
	reads("a unit", map[string]int{hashA: 1, hashB: 1})
	// A refusal of a full window keeps its charge (a count past the limit
	// reads as the limit): one command.
	if got := decide(hashA, 1); got[0] != 0 || got[1] <= 0 {
		t.Fatalf("a charge past the limit: %v, want a refusal", got)
	}
	reads("a full window's refusal", map[string]int{hashA: 1})
	if v := counter(hashA); v != "4" {
		t.Errorf("the counter after a full window's refusal: %s, want 4", v)
	}
	if got := decide(hashA, 0); got[0] != 0 {
		t.Errorf("a peek of a full window: %v, want 0 remaining", got)
	}
	// A refusal of a window with room: the charge is given back at once.
	// (The peek read the counter back into the field, and removed it.)
	if v := client.HGet(ctx, hashA, "c").Val(); v != limit.Header()+index+" 3" {
		t.Errorf("the field after a peek: %q, want the count read back", v)
	}
	client.HSet(ctx, hashA, "c", limit.Header()+index+" *", cfield, "2")
	seen()
	if got := decide(hashA, 2); got[0] != 1 || got[1] <= 0 {
		t.Fatalf("a charge of 2 past the limit: %v, want a refusal, 1 remaining", got)
	}
	reads("a refusal", map[string]int{hashA: 2})
	if v := counter(hashA); v != "2" {
		t.Errorf("the counter after a refusal: %s, want 2", v)
	}
	// A unit whose first group fits and whose last does not: the first's
	// charge is given back.
	decide(hashB, 1)
	client.HSet(ctx, hashA, cfield, "1")
	seen()
	if got := unit(); got[0] != 0 || got[1] != 2 || got[4] != 0 {
		t.Fatalf("a unit refused by its last group: %v, want denied, 2 and 0 remaining", got)
	}
	reads("a refused unit", map[string]int{hashA: 2, hashB: 1})
	if a, b := counter(hashA), counter(hashB); a != "1" || b != "4" {
		t.Errorf("the counters after a refused unit: %s, %s, want 1, 4", a, b)
	}
}

// TestCounterJunk checks that a counter holding anything but a whole
// number of at least 0 (junk, a negative, a fraction, nothing) is an
// RLMISMATCH refusal naming the key, as a field holding junk is, never a
// decision, and that what the counter held stays, read back into the
// state's field; and that a count past the limit (a full window's, with
// the refusals it kept) reads as the limit: a refusal, 0 remaining.
func TestCounterJunk(t *testing.T) {
	alg, err := fixedwindow.Per(10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	limit := luascript.LimitOf(alg, "x")
	now := int64(1763700000000001)
	index := fmt.Sprint(now / 60_000_000)
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		ctx := context.Background()
		client := redistest.GoRedis(t, target)
		for _, junk := range []string{"junk", "-3", "1.5", ""} {
			for _, cost := range []int64{1, 0} {
				key := redistest.Prefix(t) + "{k}"
				hash := key + "#"
				client.HSet(ctx, hash, "x", limit.Header()+index+" *", "x{"+limit.Header()+index, junk)
				run := evaler(t, client, alg, "x", key)
				if _, err := run(now, cost, 0); err == nil || !strings.HasPrefix(err.Error(), "RLMISMATCH "+hash+" field x ") {
					t.Errorf("cost %d, on a counter of %q: %v; want an RLMISMATCH refusal naming the key", cost, junk, err)
				}
				got, err := client.HGet(ctx, hash, "x").Result()
				if err == nil {
					got, err = redistest.Folded(ctx, client, hash, "x", got)
				}
				if want := limit.Header() + index + " " + junk; err != nil || got != want {
					t.Errorf("cost %d, on a counter of %q: the state became %q, %v; want %q", cost, junk, got, err, want)
				}
			}
		}
		for _, full := range []string{"10", "11", "21", "9223372036854775807", "99999999999999999999"} {
			for _, cost := range []int64{1, 0} {
				key := redistest.Prefix(t) + "{k}"
				hash := key + "#"
				client.HSet(ctx, hash, "x", limit.Header()+index+" *", "x{"+limit.Header()+index, full)
				got, err := evaler(t, client, alg, "x", key)(now, cost, 0)
				if err != nil || len(got) != 3 || got[0] != 0 || got[1] <= 0 {
					t.Errorf("cost %d, on a counter of %s: %v, %v; want a refusal, 0 remaining", cost, full, got, err)
				}
			}
		}
	})
}

// TestCounterRoom checks that a counter takes one of the fields a key
// keeps: a fixed window's charge on a key with room for its field alone
// keeps its state as text, one with room for both keeps a counter, and
// the key never holds more than store.MaxStatesPerKey fields; the
// decisions are the same either way.
func TestCounterRoom(t *testing.T) {
	alg, err := fixedwindow.Per(10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1763700000000001)
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		ctx := context.Background()
		client := redistest.GoRedis(t, target)
		for _, others := range []int{store.MaxStatesPerKey - 2, store.MaxStatesPerKey - 1} {
			key := redistest.Prefix(t) + "{k}"
			hash := key + "#"
			fields := make([]any, 0, 2*others)
			for i := range others {
				fields = append(fields, fmt.Sprint("o", i), "T1:x")
			}
			client.HSet(ctx, hash, fields...)
			run := evaler(t, client, alg, "x", key)
			for i := range 3 {
				got, err := run(now, 1, 0)
				if err != nil || got[0] != int64(9-i) {
					t.Fatalf("%d other fields, charge %d: %v, %v; want %d remaining", others, i, got, err, 9-i)
				}
			}
			n := client.HLen(ctx, hash).Val()
			counter := client.HGet(ctx, hash, "x").Val() == luascript.LimitOf(alg, "x").Header()+fmt.Sprint(now/60_000_000)+" *"
			if n > store.MaxStatesPerKey || counter != (others+2 <= store.MaxStatesPerKey) {
				t.Errorf("%d other fields: the key holds %d fields, a counter: %v", others, n, counter)
			}
		}
	})
}
