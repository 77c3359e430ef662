package luascript_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
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
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// envMeasureScripts runs TestScriptCost, a measurement rather than a test.
const envMeasureScripts = "RATELIMIT_MEASURE_SCRIPTS"

// TestScriptCost measures the server time each algorithm's script takes
// per call on the real server at $RATELIMIT_REDIS_ADDR, from INFO
// commandstats (usec of EVALSHA over its calls, before and after), on
// 1000 keys that already have state, for an admitted and a denied
// request; and MEMORY USAGE of one key before them. It prints a markdown table:
//
//	RATELIMIT_MEASURE_SCRIPTS=1 RATELIMIT_REDIS_ADDR=127.0.0.1:6379 \
//	  go test -run TestScriptCost -v ./luascript   (in integration/)
//
// The server should have no other clients: their EVALSHA calls would
// count too.
func TestScriptCost(t *testing.T) {
	if os.Getenv(envMeasureScripts) != "1" {
		t.Skipf("a measurement, not a test: set %s=1 (and %s) to run it", envMeasureScripts, redistest.EnvAddr)
	}
	target := redistest.Standalone(t)
	ctx := t.Context()
	c := redis.NewClient(&redis.Options{Addr: target.Addrs[0], MaxRetries: -1})
	defer c.Close()
	must := func(alg algorithm.Algorithm, err error) algorithm.Algorithm { return mustAlg(t, alg, err) }
	const hour = time.Hour
	cases := []struct {
		name            string
		allowed, denied algorithm.Algorithm
		entries         int // admissions per key before measuring
		// allowed2 and denied2, when set, are a second limit (state ID
		// "d") decided with the first by one script, as a Policy's.
		allowed2, denied2 algorithm.Algorithm
	}{
		{"tokenbucket", must(tokenbucket.New(tokenbucket.Config{Capacity: 1 << 30, Rate: 1e6})),
			must(tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1e-4})), 1, nil, nil},
		{"tokenbucket-interval", must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 1 << 30, Tokens: 1, Interval: time.Microsecond})),
			must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 1, Tokens: 1, Interval: hour})), 1, nil, nil},
		{"gcra", must(gcra.New(gcra.Config{Burst: 1 << 30, Every: time.Microsecond})),
			must(gcra.New(gcra.Config{Burst: 1, Every: hour})), 1, nil, nil},
		{"slidingwindow", must(slidingwindow.New(slidingwindow.Config{Limit: 1 << 30, Window: hour})),
			must(slidingwindow.New(slidingwindow.Config{Limit: 1, Window: hour})), 1, nil, nil},
		{"fixedwindow", must(fixedwindow.New(fixedwindow.Config{Limit: 1 << 30, Window: hour})),
			must(fixedwindow.New(fixedwindow.Config{Limit: 1, Window: hour})), 1, nil, nil},
		{"slidinglog, 1 entry", must(slidinglog.New(slidinglog.Config{Limit: slidinglog.MaxLimit, Window: hour})),
			must(slidinglog.New(slidinglog.Config{Limit: 1, Window: hour})), 1, nil, nil},
		{"slidinglog, 100 entries", must(slidinglog.New(slidinglog.Config{Limit: slidinglog.MaxLimit, Window: hour})),
			must(slidinglog.New(slidinglog.Config{Limit: 100, Window: hour})), 100, nil, nil},
		{"slidinglog, 10,000 entries", must(slidinglog.New(slidinglog.Config{Limit: slidinglog.MaxLimit, Window: hour})),
			must(slidinglog.New(slidinglog.Config{Limit: 10_000, Window: hour})), 10_000, nil, nil},
		// BenchmarkPolicy's two limits, in one script.
		{"tokenbucket+fixedwindow (policy)", must(tokenbucket.New(tokenbucket.Config{Capacity: 1 << 30, Rate: 1e6})),
			must(tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1e-4})), 1,
			must(fixedwindow.New(fixedwindow.Config{Limit: 1 << 30, Window: hour})),
			must(fixedwindow.New(fixedwindow.Config{Limit: 1, Window: hour}))},
	}
	const calls = 20_000
	evalsha := func() (n, usec int64) { return evalshaStats(ctx, t, c) }
	now := time.Now().UnixMicro()
	// run calls the script calls times round the keys, pipelined, and
	// returns the server µs per call; each reply must be want.
	run := func(s *luascript.Script, prefix string, params []string, keys, n, perKey int, admitted bool) float64 {
		t.Helper()
		n0, u0 := evalsha()
		for done := 0; done < n; {
			pipe := c.Pipeline()
			var cmds []*redis.Cmd
			for i := 0; i < 1000 && done < n; i, done = i+1, done+1 {
				now++
				key := fmt.Sprintf("%s{%d}", prefix, done/perKey%keys)
				args := append([]any{strconv.FormatInt(now, 10), "1", "600000"}, anys(params)...)
				cmds = append(cmds, pipe.EvalSha(ctx, s.SHA1, luascript.Keys(key, "c"), args...))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
			for _, cmd := range cmds {
				if r, err := cmd.Int64Slice(); err != nil || (r[1] == 0) != admitted {
					t.Fatalf("%s: reply %v, %v; want admitted=%v", s.Name, r, err, admitted)
				}
			}
		}
		n1, u1 := evalsha()
		return float64(u1-u0) / float64(n1-n0)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "| algorithm | admitted: server µs/call | denied: server µs/call | MEMORY USAGE of a key |\n| --- | ---: | ---: | ---: |\n")
	for _, tc := range cases {
		limits := func(first, second algorithm.Algorithm) []luascript.Limit {
			l := []luascript.Limit{luascript.LimitOf(first, "c")}
			if second != nil {
				l = append(l, luascript.LimitOf(second, "d"))
			}
			return l
		}
		s, params, err := luascript.For(limits(tc.allowed, tc.allowed2)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ScriptLoad(ctx, s.Source).Err(); err != nil {
			t.Fatal(err)
		}
		keys := 1000
		if tc.entries >= 10_000 {
			keys = 10 // 10^5 entries to write, not 10^7
		}
		prefix := redistest.Prefix(t)
		run(s, prefix, params, keys, keys*tc.entries, tc.entries, true) // state, and the log's entries, one per µs
		memKey := luascript.HashKey(prefix + "{0}")
		if strings.HasPrefix(tc.name, "slidinglog") {
			memKey = luascript.LogKey(prefix+"{0}", "c")
		}
		mem, err := c.MemoryUsage(ctx, memKey, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		allowed := run(s, prefix, params, keys, calls, 1, true)
		_, dparams, _ := luascript.For(limits(tc.denied, tc.denied2)...)
		dprefix := redistest.Prefix(t)
		run(s, dprefix, dparams, keys, keys*tc.entries, tc.entries, true) // use up the limit
		denied := run(s, dprefix, dparams, keys, calls, 1, false)
		fmt.Fprintf(&out, "| %s | %.1f | %.1f | %d |\n", tc.name, allowed, denied, mem)
	}
	t.Logf("server time per EVALSHA (INFO commandstats), %d calls on 1000 keys with state (10 for the largest log):\n%s", calls, out.String())
}
