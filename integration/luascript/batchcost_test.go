package luascript_test

import (
	"fmt"
	"os"
	"slices"
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
	"github.com/go-ratelimit/ratelimit/store/redisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// envAgainst names a directory of batch scripts TestBatchCost compares.
const envAgainst = "RATELIMIT_MEASURE_AGAINST"

// TestBatchCost measures the server time a batch of requests for one
// key takes per request, against the decision script's per call, from
// INFO commandstats (a measurement, not a test; gated as TestScriptCost):
//
//	RATELIMIT_MEASURE_SCRIPTS=1 RATELIMIT_REDIS_ADDR=127.0.0.1:6379 \
//	  go test -run TestBatchCost -v ./luascript   (in integration/)
//
// With RATELIMIT_MEASURE_AGAINST=dir, it also measures the batch scripts
// in dir (one per case, named as the case, "tokenbucket.lua"…) and the
// decision scripts there ("single-tokenbucket.lua"…), to compare a change
// of the scripts with the version before it.
func TestBatchCost(t *testing.T) {
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
		name   string
		limits []algorithm.Algorithm
	}{
		{"tokenbucket", []algorithm.Algorithm{must(tokenbucket.New(tokenbucket.Config{Capacity: 1 << 30, Rate: 1e6}))}},
		{"tokenbucket-interval", []algorithm.Algorithm{must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 1 << 30, Tokens: 1, Interval: time.Microsecond}))}},
		{"gcra", []algorithm.Algorithm{must(gcra.New(gcra.Config{Burst: 1 << 30, Every: time.Microsecond}))}},
		{"slidingwindow", []algorithm.Algorithm{must(slidingwindow.New(slidingwindow.Config{Limit: 1 << 30, Window: hour}))}},
		{"fixedwindow", []algorithm.Algorithm{must(fixedwindow.New(fixedwindow.Config{Limit: 1 << 30, Window: hour}))}},
		{"slidinglog", []algorithm.Algorithm{must(slidinglog.New(slidinglog.Config{Limit: slidinglog.MaxLimit, Window: 10 * time.Millisecond}))}},
		{"tokenbucket+fixedwindow", []algorithm.Algorithm{must(tokenbucket.New(tokenbucket.Config{Capacity: 1 << 30, Rate: 1e6})),
			must(fixedwindow.New(fixedwindow.Config{Limit: 1 << 30, Window: hour}))}},
	}
	evalsha := func() (n, usec int64) { return evalshaStats(ctx, t, c) }
	now := time.Now().UnixMicro()
	const requests = redisstore.MaxBatch
	const calls = 2000
	var out strings.Builder
	fmt.Fprintf(&out, "| limits | decision script: µs/call | batch of %d (%d for a log): µs/request |", requests, redisstore.MaxLogBatch)
	if os.Getenv(envAgainst) != "" {
		out.WriteString(" $" + envAgainst + "'s decision script: µs/call | its batch: µs/request |\n| --- | ---: | ---: | ---: | ---: |\n")
	} else {
		out.WriteString("\n| --- | ---: | ---: |\n")
	}
	for _, tc := range cases {
		var limits []luascript.Limit
		var ids []string
		for i, alg := range tc.limits {
			id := fmt.Sprint("c", i)
			limits = append(limits, luascript.LimitOf(alg, id))
			ids = append(ids, id)
		}
		s, params, err := luascript.For(limits...)
		if err != nil {
			t.Fatal(err)
		}
		b := luascript.Batch(s)
		for _, src := range []string{s.Source, b.Source} {
			if err := c.ScriptLoad(ctx, src).Err(); err != nil {
				t.Fatal(err)
			}
		}
		keys := luascript.Keys(redistest.Prefix(t)+"{hot}", ids...)
		measure := func(script *luascript.Script, n int) float64 {
			n0, u0 := evalsha()
			pipe := c.Pipeline()
			var cmds []*redis.Cmd
			for range calls {
				args := []any{}
				if n > 0 {
					args = append(args, strconv.Itoa(n))
					for range n {
						now++
						args = append(args, strconv.FormatInt(now, 10), "1")
					}
				} else {
					now++
					args = append(args, strconv.FormatInt(now, 10), "1")
				}
				args = append(append(args, "600000"), anys(params)...)
				cmds = append(cmds, pipe.EvalSha(ctx, script.SHA1, keys, args...))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatalf("%s: %v", script.Name, err)
			}
			for _, cmd := range cmds {
				r, err := cmd.Int64Slice()
				if err != nil || len(r) != 3*len(tc.limits)*max(n, 1) || r[1] != 0 {
					t.Fatalf("%s: reply %v, %v", script.Name, r, err)
				}
			}
			n1, u1 := evalsha()
			return float64(u1-u0) / float64(n1-n0) / float64(max(n, 1))
		}
		size := requests
		if strings.Contains(tc.name, "slidinglog") {
			size = redisstore.MaxLogBatch
		}
		var against, againstSingle *luascript.Script
		if dir := os.Getenv(envAgainst); dir != "" {
			load := func(file string) *luascript.Script {
				src, err := os.ReadFile(dir + "/" + file)
				if err != nil {
					t.Fatal(err)
				}
				s := &luascript.Script{Name: "against:" + file, Source: string(src)}
				if s.SHA1, err = c.ScriptLoad(ctx, s.Source).Result(); err != nil {
					t.Fatal(err)
				}
				return s
			}
			against, againstSingle = load(tc.name+".lua"), load("single-"+tc.name+".lua")
		}
		// Alternated rounds, the median of each: the machine's noise
		// moves rounds more than the differences measured.
		var single, batch, otherSingle, other []float64
		for range 3 {
			single = append(single, measure(s, 0))
			batch = append(batch, measure(b, size))
			if against != nil {
				otherSingle = append(otherSingle, measure(againstSingle, 0))
				other = append(other, measure(against, size))
			}
		}
		fmt.Fprintf(&out, "| %s | %.2f | %.2f |", tc.name, median(single), median(batch))
		if against != nil {
			fmt.Fprintf(&out, " %.2f | %.2f |", median(otherSingle), median(other))
		}
		out.WriteString("\n")
	}
	t.Logf("server µs (INFO commandstats), one key:\n%s", out.String())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
