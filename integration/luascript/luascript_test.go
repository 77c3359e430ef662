package luascript_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
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
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func TestScripts(t *testing.T) {
	var names []string
	for _, s := range luascript.Scripts() {
		names = append(names, s.Name)
		sum := sha1.Sum([]byte(s.Source))
		if got := hex.EncodeToString(sum[:]); got != s.SHA1 {
			t.Errorf("%s: SHA1 %s, want %s", s.Name, s.SHA1, got)
		}
		if !strings.HasPrefix(s.Source, "-- "+s.Name+": ") {
			t.Errorf("%s: the source does not start with a comment naming it", s.Name)
		}
		if strings.HasPrefix(s.Source, "#!") {
			t.Errorf("%s: a shebang line (miniredis rejects it)", s.Name)
		}
	}
	slices.Sort(names)
	if want := []string{"concurrency", "fixedwindow", "gcra", "slidinglog", "slidingwindow", "tokenbucket", "tokenbucket-interval"}; !slices.Equal(names, want) {
		t.Errorf("script names %q, want %q", names, want)
	}
}

// TestScriptsLoad loads every script with SCRIPT LOAD: the server compiles
// it and answers with its SHA1, which EVALSHA will then find.
func TestScriptsLoad(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		ctx := t.Context()
		client := redistest.GoRedis(t, target)
		load := func(c redis.Cmdable) error {
			for _, s := range luascript.Scripts() {
				sha, err := c.ScriptLoad(ctx, s.Source).Result()
				if err != nil {
					t.Errorf("SCRIPT LOAD %s: %v", s.Name, err)
					continue
				}
				if sha != s.SHA1 {
					t.Errorf("SCRIPT LOAD %s = %s, want %s", s.Name, sha, s.SHA1)
				}
				if ok, err := c.ScriptExists(ctx, s.SHA1).Result(); err != nil || !ok[0] {
					t.Errorf("SCRIPT EXISTS %s = %v, %v; want true", s.Name, ok, err)
				}
			}
			return nil
		}
		if cc, ok := client.(*redis.ClusterClient); ok {
			if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(c) }); err != nil {
				t.Fatal(err)
			}
			return
		}
		load(client)
	})
}

func TestFor(t *testing.T) {
	must := func(alg algorithm.Algorithm, err error) algorithm.Algorithm {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return alg
	}
	for _, c := range []struct {
		alg    algorithm.Algorithm
		params []string
	}{
		{must(tokenbucket.New(tokenbucket.Config{Capacity: 10, Rate: 0.1})), []string{"10", "0.1"}},
		{must(tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1e-7})), []string{"1", "0.0000001"}},
		{must(tokenbucket.New(tokenbucket.Config{Capacity: 1 << 40, Rate: 1e20})), []string{"1099511627776", "100000000000000000000"}},
		{must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 10, Tokens: 2, Interval: 1500 * time.Millisecond})), []string{"10", "2", "1500000"}},
		{must(slidinglog.New(slidinglog.Config{Limit: 3, Window: time.Minute})), []string{"3", "60000000"}},
		{must(fixedwindow.New(fixedwindow.Config{Limit: 7, Window: time.Duration(algorithm.MaxDuration) * time.Microsecond})), []string{"7", "281474976710656"}},
		{must(gcra.New(gcra.Config{Burst: 10, Every: 100 * time.Millisecond})), []string{"10", "100000"}},
		{must(slidingwindow.New(slidingwindow.Config{Limit: algorithm.MaxLimit, Window: time.Minute})), []string{"1099511627776", "60000000"}},
	} {
		spec := c.alg.Spec()
		s, params, err := luascript.For(luascript.LimitOf(c.alg, "id"))
		if err != nil {
			t.Errorf("For(%v): %v", spec, err)
			continue
		}
		tag, _ := algorithm.TagOf(c.alg)
		hdr := tag.Header()
		if tag.Kind == slidinglog.Kind {
			hdr = "#" + hdr[:len(hdr)-1]
		}
		if want := []string{"id", hdr}; !slices.Equal(params[:2], want) {
			t.Errorf("For(%v): ID and header %q, want %q", spec, params[:2], want)
		}
		params = params[2:]
		if s.Name != spec.Name {
			t.Errorf("For(%v): script %s", spec, s.Name)
		}
		if !slices.Equal(params, c.params) {
			t.Errorf("For(%v): params %q, want %q", spec, params, c.params)
		}
		for i, p := range params {
			if strings.ContainsAny(p, "eE") {
				t.Errorf("For(%v): param %q has an exponent", spec, p)
			}
			if v, err := strconv.ParseFloat(p, 64); err != nil || v != spec.Params[i] {
				t.Errorf("For(%v): param %q parses as %v, %v; want %v", spec, p, v, err, spec.Params[i])
			}
		}
	}
	for _, spec := range []algorithm.Spec{{}, {Name: "GCRA"}, {Name: "TokenBucket", Params: []float64{1, 1}}} {
		if _, _, err := luascript.For(luascript.Limit{Spec: spec}); !errors.Is(err, store.ErrAlgorithmUnsupported) {
			t.Errorf("For(%v): %v, want ErrAlgorithmUnsupported", spec, err)
		}
	}
	// Any double round-trips without an exponent.
	for _, v := range []float64{math.SmallestNonzeroFloat64, 1.0 / 3, 2.5e-300, 1e300, math.MaxFloat64} {
		_, params, err := luascript.For(luascript.Limit{Spec: algorithm.Spec{Name: "tokenbucket", Params: []float64{v, 1}},
			Tag: algorithm.Tag{Kind: tokenbucket.Kind, P0: 1}})
		if err != nil {
			t.Fatal(err)
		}
		params = params[2:]
		if got, err := strconv.ParseFloat(params[0], 64); err != nil || got != v || strings.ContainsAny(params[0], "eE") {
			t.Errorf("param %v encoded as %.40q, which parses back as %v, %v", v, params[0], got, err)
		}
	}
}

// TestShortTTLKeepsKey runs the script of every algorithm, configured so
// that the key's state resets in under a millisecond, 20,000 times on a
// real server, each followed in the same pipeline by EXISTS and TIME: the
// key the script just wrote must not be gone unless the server's clock
// moved past any deadline the script may have set (≥ 1 ms). PEXPIRE with
// 1 ms reads the clock for the deadline, then again to see whether it has
// passed, and deletes the key at once when a millisecond ends in between:
// the sliding log asks it for 2 ms at least. The failure is a race, so a
// run finds it with high probability (3 runs in 3 before the fix), not
// always.
func TestShortTTLKeepsKey(t *testing.T) {
	target := redistest.Standalone(t)
	ctx := t.Context()
	client := redistest.GoRedis(t, target)
	prefix := redistest.Prefix(t)
	for _, c := range []struct {
		name   string
		params []string // ID, header, mode, parameters
	}{
		{"tokenbucket", []string{"x", "T10:", "10", "1000000"}},
		{"tokenbucket-interval", []string{"x", "I10:", "10", "10", "1"}},
		{"slidinglog", []string{"x", "#L1", "10", "1"}},
		{"fixedwindow", []string{"x", "F10,2:", "10", "2"}},
		{"gcra", []string{"x", "G10,1:", "10", "1"}},
		{"slidingwindow", []string{"x", "S10,1:", "10", "1"}},
	} {
		var script *luascript.Script
		for _, s := range luascript.Scripts() {
			if s.Name == c.name {
				script = s
			}
		}
		if err := client.ScriptLoad(ctx, script.Source).Err(); err != nil {
			t.Fatal(err)
		}
		args := append([]any{"1700000000000001", "1", "0"}, anys(c.params)...) // now, cost, TTL margin
		const batches, perBatch = 20, 1000
		lost := 0
		for b := range batches {
			var times []*redis.TimeCmd
			exists := make([]*redis.IntCmd, perBatch)
			for attempt := 0; ; attempt++ {
				pipe := client.Pipeline()
				times = []*redis.TimeCmd{pipe.Time(ctx)}
				for i := range perBatch {
					keys := luascript.Keys(fmt.Sprintf("%s{%s:%d:%d:%d}", prefix, c.name, b, attempt, i), "x")
					pipe.EvalSha(ctx, script.SHA1, keys, args...)
					exists[i] = pipe.Exists(ctx, keys...)
					times = append(times, pipe.Time(ctx))
				}
				_, err := pipe.Exec(ctx)
				if err == nil {
					break
				}
				// Scripts flushed by another package's test: the batch
				// again, on keys of its own, once the script is back.
				if !isNoScript(err) || attempt == 20 {
					t.Fatalf("%s: %v", c.name, err)
				}
				if err := client.ScriptLoad(ctx, script.Source).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for i, e := range exists {
				before, after := times[i].Val().UnixMilli(), times[i+1].Val().UnixMilli()
				if e.Val() == 0 && after <= before+1 {
					lost++ // no deadline of 1 ms or more had passed
				}
			}
		}
		if lost > 0 {
			t.Errorf("%s: %d of %d keys were gone right after the script that wrote them", c.name, lost, batches*perBatch)
		}
	}
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
