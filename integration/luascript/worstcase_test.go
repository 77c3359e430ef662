package luascript_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
)

// serverTime runs the script in a pipeline between two TIME commands and
// returns the server time between them: an upper bound on the script's
// own time (Redis runs a client's pipelined commands one after the other),
// with its reply.
func serverTime(t testing.TB, c *redis.Client, s *luascript.Script, key string, args []any) (time.Duration, []int64) {
	t.Helper()
	d, eval := serverCall(t, c, s, key, args)
	reply, err := eval.Int64Slice()
	if err != nil {
		t.Fatalf("EVALSHA %s: %v", s.Name, err)
	}
	return d, reply
}

// serverCall is serverTime for a reply of any kind: it returns the call's
// command, which has run.
func serverCall(t testing.TB, c *redis.Client, s *luascript.Script, key string, args []any) (time.Duration, *redis.Cmd) {
	t.Helper()
	ctx := t.Context()
	var before, after *redis.TimeCmd
	var eval *redis.Cmd
	for attempt := 0; ; attempt++ {
		pipe := c.Pipeline()
		before = pipe.Time(ctx)
		eval = pipe.EvalSha(ctx, s.SHA1, luascript.Keys(key, "w"), args...)
		after = pipe.Time(ctx)
		_, err := pipe.Exec(ctx)
		if err == nil {
			break
		}
		// Another package's test flushes the shared server's scripts now
		// and then (SCRIPT FLUSH, to test the stores' reload): load it
		// again. A NOSCRIPT reply ran nothing.
		if !isNoScript(err) || attempt == 20 {
			t.Fatalf("EVALSHA %s: %v", s.Name, err)
		}
		if err := c.ScriptLoad(ctx, s.Source).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return after.Val().Sub(before.Val()), eval
}

// isNoScript reports a NOSCRIPT reply: the server does not hold the script.
func isNoScript(err error) bool { return strings.HasPrefix(err.Error(), "NOSCRIPT") }

// TestSlidingLogWorstCase runs, on a real server, the sliding log's most
// expensive calls at the largest limit, and checks their replies and the
// work each does (the members it trims, by ZCARD after):
//
//   - a cost of the whole limit on a new key (the old format wrote one
//     member per unit of cost: 1.8 s for a cost of 10^6);
//   - the largest trim: an admission once a full log (2^15 single-unit
//     entries, one per µs) has left the window at once, which trims 1000
//     of them;
//   - the deepest search: a cost of the whole limit denied on a full log,
//     whose RetryAfter is when the last of its 2^15 entries leaves;
//   - a peek at a full log;
//   - a batch of coalesced admissions (redisstore.MaxLogBatch), and one
//     of bookings, on a full log that has left the window, each request
//     trimming 1000.
//
// It logs each call's server time, and a full log's memory and how long
// DEL takes to free it. The 5 ms budget of server time is measured by
// BenchmarkSlidingLogWorstCase, not checked here: a server that shares
// its cores with other work takes several times as long (a batch's median
// 6.8 ms beside two busy loops, 1.0 ms alone), which is the machine's,
// not the script's.
func TestSlidingLogWorstCase(t *testing.T) {
	for _, r := range worstCase(t) {
		t.Logf("%-48s median %7v (runs: %v)", r.name, r.median(), fmt.Sprint(r.times))
	}
}

// BenchmarkSlidingLogWorstCase reports the server time of each of
// TestSlidingLogWorstCase's calls, the median of 7 runs, in µs, beside the
// 5 ms budget (Redis runs one script at a time, and every other client
// waits for it). One iteration is the whole scenario, filling several
// logs of 2^15 entries (a few seconds); ns/op measures that:
//
//	RATELIMIT_REDIS_ADDR=127.0.0.1:16379 go test -run='^$' -bench=SlidingLogWorstCase -benchtime=1x ./luascript
func BenchmarkSlidingLogWorstCase(b *testing.B) {
	var results []worstResult
	for range b.N {
		results = worstCase(b)
	}
	for _, r := range results {
		b.ReportMetric(float64(r.median().Microseconds()), r.unit+"-µs")
	}
}

// worstResult is one of worstCase's calls: its name, a short one for a
// benchmark's unit, and the server time of each run.
type worstResult struct {
	name, unit string
	times      []time.Duration
}

func (r worstResult) median() time.Duration {
	sorted := slices.Clone(r.times)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// worstCase runs TestSlidingLogWorstCase's calls, checking their replies
// and work, and returns their server times.
func worstCase(t testing.TB) []worstResult {
	target := redistest.Standalone(t)
	ctx := t.Context()
	c := redis.NewClient(&redis.Options{Addr: target.Addrs[0], MaxRetries: -1})
	defer c.Close()
	const limit = slidinglog.MaxLimit
	const window = time.Minute
	alg, err := slidinglog.New(slidinglog.Config{Limit: limit, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	script, params, err := luascript.For(luascript.LimitOf(alg, "w"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptLoad(ctx, script.Source).Err(); err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	args := func(now, cost int64) []any {
		// A TTL margin of 10 minutes: these instants are not the server's.
		return append([]any{strconv.FormatInt(now, 10), strconv.FormatInt(cost, 10), "600000"}, anys(params)...)
	}
	start := int64(1_763_700_000_000_000)
	w := window.Microseconds()

	// fill admits one unit per µs from start on, limit times, pipelined.
	fill := func(key string) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			err := func() error {
				for i := int64(0); i < limit; i += 1000 {
					pipe := c.Pipeline()
					for j := i; j < min(i+1000, limit); j++ {
						pipe.EvalSha(ctx, script.SHA1, luascript.Keys(key, "w"), args(start+j, 1)...)
					}
					if _, err := pipe.Exec(ctx); err != nil {
						return err
					}
				}
				return nil
			}()
			if err == nil {
				break
			}
			// Scripts flushed by another package's test (see serverTime):
			// part of a batch ran, so fill the key again from nothing.
			if !isNoScript(err) || attempt == 20 {
				t.Fatalf("filling %s: %v", key, err)
			}
			if err := c.Del(ctx, luascript.Keys(key, "w")...).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.ScriptLoad(ctx, script.Source).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := c.ZCard(ctx, luascript.LogKey(key, "w")).Result(); err != nil || n != limit+1 {
			t.Fatalf("ZCARD %s after filling = %d, %v; want %d (and the header)", key, n, err, limit)
		}
	}

	var results []worstResult
	measure := func(name, unit, key string, call func(i int) (now, cost int64), want func(i int, r algorithm.Result) bool) {
		t.Helper()
		r := worstResult{name: name, unit: unit}
		for i := range 7 {
			now, cost := call(i)
			d, reply := serverTime(t, c, script, key, args(now, cost))
			got := algorithm.Result{Remaining: reply[0], RetryAfter: reply[1], ResetAfter: reply[2]}
			if !want(i, got) {
				t.Fatalf("%s, run %d: unexpected reply %+v", name, i, got)
			}
			r.times = append(r.times, d)
		}
		results = append(results, r)
	}

	// A cost of the whole limit on new keys: one member each.
	measure("cost 2^15 on a new key", "whole-cost", prefix+"{big}", func(i int) (int64, int64) { return start + int64(i)*w, limit },
		func(_ int, r algorithm.Result) bool { return r.Allowed() && r.Remaining == 0 })
	if n, err := c.ZCard(ctx, luascript.LogKey(prefix+"{big}", "w")).Result(); err != nil || n != 3 {
		t.Errorf("ZCARD after 7 admissions of the whole limit, each a window apart = %d, %v; want 3 (the header, the newest and the newest expired)", n, err)
	}
	mem, err := c.MemoryUsage(ctx, luascript.LogKey(prefix+"{big}", "w")).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEMORY USAGE of a log that admitted 7 × 2^15 units: %d bytes", mem)

	full := prefix + "{full}"
	fill(full)
	mem, err = c.MemoryUsage(ctx, luascript.LogKey(full, "w")).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEMORY USAGE of a full log (2^15 entries): %d bytes", mem)
	// The deepest search and a peek, on the full log, changing nothing.
	measure("deny cost 2^15 on a full log", "deepest-search", full, func(int) (int64, int64) { return start + limit, limit },
		func(_ int, r algorithm.Result) bool {
			return r == algorithm.Result{RetryAfter: w - 1, ResetAfter: w - 1}
		})
	measure("peek at a full log", "peek", full, func(int) (int64, int64) { return start + limit, 0 },
		func(_ int, r algorithm.Result) bool {
			return r == algorithm.Result{RetryAfter: w - limit, ResetAfter: w - 1}
		})
	// Past the window of every entry: each admission trims 1000.
	later := start + limit + w
	measure("admit once 2^15 entries expired (trims 1000)", "trim-1000", full, func(i int) (int64, int64) { return later + int64(i), 1 },
		func(i int, r algorithm.Result) bool {
			return r == algorithm.Result{Remaining: limit - 1 - int64(i), ResetAfter: w}
		})
	if n, err := c.ZCard(ctx, luascript.LogKey(full, "w")).Result(); err != nil || n != limit-7*1000+7+1 {
		t.Errorf("ZCARD after 7 admissions past the window = %d, %v; want %d", n, err, limit-7*1000+7+1)
	}

	// A batch of coalesced admissions (redisstore.MaxLogBatch requests,
	// its bound for a log), and one of bookings (luascript.OpBatch, each
	// request's booking script whole; of 1 unit, no delay), once a full
	// log has left the window: each request trims 1000, as it would alone.
	// Each run on a copy of the same full log.
	const size = redisstore.MaxLogBatch
	source := prefix + "{source}"
	fill(source)
	copyFull := func(name string, i int) string {
		key := fmt.Sprintf("%s{%s%d}", prefix, name, i)
		if err := c.Copy(ctx, luascript.LogKey(source, "w"), luascript.LogKey(key, "w"), 0, false).Err(); err != nil {
			t.Fatal(err)
		}
		return key
	}
	// left checks the members a batch left: the full log less size×1000
	// trimmed, plus the batch's own entries and the header.
	left := func(what, key string) {
		t.Helper()
		want := int64(limit - size*1000 + size + 1)
		if n, err := c.ZCard(ctx, luascript.LogKey(key, "w")).Result(); err != nil || n != want {
			t.Fatalf("ZCARD after %s = %d, %v; want %d", what, n, err, want)
		}
	}
	batch := luascript.Batch(script)
	book, _, err := luascript.ForOp(luascript.OpBook, luascript.LimitOf(alg, "w"))
	if err != nil {
		t.Fatal(err)
	}
	books := luascript.OpBatch(book)
	for _, s := range []*luascript.Script{batch, books} {
		if err := c.ScriptLoad(ctx, s.Source).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r := worstResult{name: fmt.Sprintf("a batch of %d admissions, each trimming 1000", size), unit: "batch"}
	for i := range 7 {
		key := copyFull("batch", i)
		bargs := []any{strconv.Itoa(size)}
		for j := range size {
			bargs = append(bargs, strconv.FormatInt(later+int64(j), 10), "1")
		}
		d, reply := serverTime(t, c, batch, key, append(bargs, args(0, 0)[2:]...))
		for j := range size {
			got := algorithm.Result{Remaining: reply[3*j], RetryAfter: reply[3*j+1], ResetAfter: reply[3*j+2]}
			if got != (algorithm.Result{Remaining: limit - 1 - int64(j), ResetAfter: w}) {
				t.Fatalf("%s, run %d, request %d: unexpected reply %+v", r.name, i, j, got)
			}
		}
		left("the batch", key)
		r.times = append(r.times, d)
	}
	results = append(results, r)
	r = worstResult{name: fmt.Sprintf("a batch of %d bookings, each trimming 1000", size), unit: "booking-batch"}
	for i := range 7 {
		key := copyFull("books", i)
		bargs := []any{strconv.Itoa(size), "4"}
		for j := range size {
			bargs = append(bargs, strconv.FormatInt(later+int64(j), 10), "1", "0", testNonce)
		}
		d, eval := serverCall(t, c, books, key, append(bargs, args(0, 0)[2:]...))
		reply, err := eval.StringSlice()
		if err != nil || len(reply) != 8*size {
			t.Fatalf("%s: reply %q, %v", r.name, reply, err)
		}
		for j := range size {
			if got := reply[8*j : 8*j+3]; got[0] != "1" || got[2] != strconv.FormatInt(limit-1-int64(j), 10) {
				t.Fatalf("%s, run %d, request %d: unexpected reply %q", r.name, i, j, reply[8*j:8*j+8])
			}
		}
		left("the bookings", key)
		r.times = append(r.times, d)
	}
	results = append(results, r)

	// A key is deleted in one piece when its TTL ends (or on Reset).
	largest := prefix + "{largest}"
	fill(largest)
	pipe := c.Pipeline()
	before := pipe.Time(ctx)
	pipe.Del(ctx, luascript.LogKey(largest, "w"))
	after := pipe.Time(ctx)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("DEL of a full log (2^15 members): %v of server time", after.Val().Sub(before.Val()))

	return results
}
