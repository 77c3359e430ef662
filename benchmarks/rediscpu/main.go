// Command rediscpu measures what one decision costs a Redis server, on one
// server in one run: each algorithm of this module through its rueidis
// store, beside a minimal hand-written script of the same algorithm through
// the same client (minimal/*.lua), go-redis/redis_rate (GCRA, through
// go-redis), and a pipelined INCRBY + PEXPIRE (what envoyproxy/ratelimit
// sends for a fixed window). For each it prints, per decision, the server's
// CPU time (INFO cpu: used_cpu_user + used_cpu_sys) and the time Redis
// counted in the calls themselves (INFO commandstats: usec of EVALSHA and
// EVAL, or of INCRBY and PEXPIRE, over the decisions), and the ratio of
// ours to the minimal script of the same algorithm.
//
//	cd benchmarks && go run ./rediscpu -addr 127.0.0.1:6379
//
// The server should serve no other client while it runs: their commands
// would count too. Every decision is admitted (the limits are far above
// what a run asks), on keys that already hold state: the common path.
// Each variant runs -rounds times, the variants interleaved, and the table
// gives the median round.
//
// -exp name=file.lua:algorithm adds a variant that runs, through our store
// with its keys and arguments, file.lua in place of the algorithm's decision
// script: a changed copy of a generated script, to measure one change at a
// time.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

var (
	//go:embed minimal/tokenbucket.lua
	minTokenBucket string
	//go:embed minimal/tokenbucket-interval.lua
	minInterval string
	//go:embed minimal/gcra.lua
	minGCRA string
	//go:embed minimal/fixedwindow.lua
	minFixedWindow string
	//go:embed minimal/slidingwindow.lua
	minSlidingWindow string
	//go:embed minimal/slidinglog.lua
	minSlidingLog string
)

func main() {
	addr := flag.String("addr", os.Getenv("RATELIMIT_REDIS_ADDR"), "the Redis to measure (host:port; default $RATELIMIT_REDIS_ADDR)")
	nkeys := flag.Int("keys", 10_000, "distinct keys per variant")
	callers := flag.Int("callers", 16, "goroutines deciding at once")
	decisions := flag.Int("decisions", 50_000, "decisions per variant per round")
	rounds := flag.Int("rounds", 3, "rounds, the variants interleaved in each")
	only := flag.String("only", "", "run only the variants whose name matches this regular expression")
	hook := flag.String("hook", "", "a command run before and after each measured round, with the arguments \"before\" or \"after\" and the variant's name (for a profiler's control, such as callgrind_control)")
	var exps expFlags
	flag.Var(&exps, "exp", "name=file.lua:algorithm: our store running file.lua as the algorithm's decision script (repeatable)")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "rediscpu: no Redis: give -addr or set RATELIMIT_REDIS_ADDR")
		os.Exit(2)
	}
	if err := run(*addr, *nkeys, *callers, *decisions, *rounds, *only, *hook, exps); err != nil {
		fmt.Fprintln(os.Stderr, "rediscpu:", err)
		os.Exit(1)
	}
}

// An alg is one algorithm as the run configures it: our algorithm, and the
// minimal script's source and arguments after now and cost.
type alg struct {
	name    string
	ours    algorithm.Algorithm
	minimal string
	args    []string
}

// algs returns the algorithms, each configured so that every decision of
// a run is admitted: limits of 2^30, and a sliding log over one second
// (so that its sets hold the few admissions of the last second, trimmed as
// they expire, as a busy key's do).
func algs() ([]alg, error) {
	must := func(a any, err error) algorithm.Algorithm {
		if err != nil {
			panic(err)
		}
		return a.(algorithm.Algorithm)
	}
	var out []alg
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		const lim = 1 << 30
		hour := time.Hour.Microseconds()
		out = []alg{
			{"tokenbucket", must(tokenbucket.New(tokenbucket.Config{Capacity: lim, Rate: 1e6})), minTokenBucket, []string{"1073741824", "1000000"}},
			{"tokenbucket-interval", must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: lim, Tokens: 1, Interval: time.Microsecond})),
				minInterval, []string{"1073741824", "1", "1"}},
			{"gcra", must(gcra.New(gcra.Config{Burst: lim, Every: time.Microsecond})), minGCRA, []string{"1073741824", "1"}},
			{"fixedwindow", must(fixedwindow.New(fixedwindow.Config{Limit: lim, Window: time.Hour})), minFixedWindow, []string{"1073741824", strconv.FormatInt(hour, 10)}},
			{"slidingwindow", must(slidingwindow.New(slidingwindow.Config{Limit: lim, Window: time.Hour})), minSlidingWindow, []string{"1073741824", strconv.FormatInt(hour, 10)}},
			{"slidinglog", must(slidinglog.New(slidinglog.Config{Limit: slidinglog.MaxLimit, Window: time.Second})), minSlidingLog, []string{strconv.FormatInt(slidinglog.MaxLimit, 10), "1000000"}},
		}
		return nil
	}()
	return out, err
}

// A variant is one way of deciding, measured on its own keys.
type variant struct {
	name  string
	group string // the algorithm it is compared within
	// minimal marks the group's minimal script, the ratios' base.
	minimal bool
	// top are the commands the client sends (their commandstats usec is
	// the decision's); the commands a script calls are counted inside.
	top    []string
	decide func(ctx context.Context, key string) error
}

func run(addr string, nkeys, callers, decisions, rounds int, only, hook string, exps expFlags) error {
	ctx := context.Background()
	ru, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer ru.Close()
	gr := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 2 * callers})
	defer gr.Close()
	prefix := "cpu:" + strconv.Itoa(os.Getpid()) + ":"
	vs, err := variants(ru, prefix, exps)
	if err != nil {
		return err
	}
	vs = append(vs, peers(ru, gr, prefix)...)
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return err
		}
		vs = slices.DeleteFunc(vs, func(v variant) bool { return !re.MatchString(v.name) })
	}
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	for _, v := range vs {
		// Every key holds state before the rounds.
		if _, err := decideAll(ctx, v.decide, keys, callers, len(keys)); err != nil {
			return fmt.Errorf("%s: priming: %w", v.name, err)
		}
	}
	results, err := measureRounds(ctx, ru, vs, keys, callers, decisions, rounds, hook)
	if err != nil {
		return err
	}
	report(os.Stdout, vs, results, nkeys, callers, decisions, rounds)
	return nil
}

// scripts are the commands a script's client sends.
var scripts = []string{"evalsha", "eval", "evalsha_ro", "eval_ro"}

// variants returns, for each algorithm, ours through the rueidis store and
// the minimal script through the same client, then the experiments, each
// on keys under prefix.
func variants(ru rueidis.Client, prefix string, exps expFlags) ([]variant, error) {
	all, err := algs()
	if err != nil {
		return nil, err
	}
	var vs []variant
	for _, a := range all {
		st, err := rueidisstore.New[string](ru, rueidisstore.WithPrefix[string](prefix+"ours:"+a.name+":"))
		if err != nil {
			return nil, err
		}
		ours, err := oursOn(st, a.ours)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.name, err)
		}
		vs = append(vs, variant{name: "ours " + a.name, group: a.name, top: scripts, decide: ours})
		vs = append(vs, variant{name: "minimal " + a.name, group: a.name, minimal: true, top: scripts,
			decide: minimalOn(ru, a.minimal, prefix+"min:"+a.name+":", a.args)})
	}
	for _, e := range exps {
		a := algNamed(all, e.alg)
		if a == nil {
			return nil, fmt.Errorf("-exp %s: no algorithm %q", e.name, e.alg)
		}
		src, err := os.ReadFile(e.file)
		if err != nil {
			return nil, err
		}
		st, err := redisstore.New[string](&swapRunner{client: ru, source: string(src)}, redisstore.WithPrefix[string](prefix+"exp:"+e.name+":"))
		if err != nil {
			return nil, err
		}
		ours, err := oursOn(st, a.ours)
		if err != nil {
			return nil, fmt.Errorf("-exp %s: %w", e.name, err)
		}
		vs = append(vs, variant{name: "exp " + e.name, group: a.name, top: scripts, decide: ours})
	}
	return vs, nil
}

// peers returns what others send for a decision: go-redis/redis_rate's
// GCRA, and a fixed window's pipelined INCRBY and PEXPIRE (what
// envoyproxy/ratelimit sends), on keys under prefix.
func peers(ru rueidis.Client, gr *redis.Client, prefix string) []variant {
	limiter := redis_rate.NewLimiter(gr)
	limit := redis_rate.Limit{Rate: 1 << 30, Burst: 1 << 30, Period: time.Hour}
	return []variant{
		{name: "go-redis/redis_rate", group: "gcra", top: scripts,
			decide: func(ctx context.Context, key string) error {
				res, err := limiter.Allow(ctx, prefix+"redis_rate:"+key, limit)
				if err == nil && res.Allowed == 0 {
					err = errors.New("redis_rate denied")
				}
				return err
			}},
		{name: "INCRBY+PEXPIRE", group: "fixedwindow", top: []string{"incrby", "pexpire"},
			decide: func(ctx context.Context, key string) error {
				k := prefix + "incrby:" + key
				for _, r := range ru.DoMulti(ctx, ru.B().Incrby().Key(k).Increment(1).Build(), ru.B().Pexpire().Key(k).Milliseconds(3_600_000).Build()) {
					if err := r.Error(); err != nil {
						return err
					}
				}
				return nil
			}},
	}
}

// measureRounds runs rounds rounds of decisions decisions of every
// variant, the variants interleaved, each between two reads of the
// server's INFO (and the hook's calls), and returns each variant's rounds.
func measureRounds(ctx context.Context, ru rueidis.Client, vs []variant, keys []string, callers, decisions, rounds int, hook string) (map[string][]measure, error) {
	// The variants of one algorithm run next to each other, in turns,
	// so that what else the machine does weighs on them alike.
	slices.SortStableFunc(vs, func(a, b variant) int { return strings.Compare(a.group, b.group) })
	results := map[string][]measure{}
	for r := range rounds {
		order := slices.Clone(vs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, v := range order {
			if err := runHook(hook, "before", v.name); err != nil {
				return nil, err
			}
			before, err := readInfo(ctx, ru)
			if err != nil {
				return nil, err
			}
			wall, err := decideAll(ctx, v.decide, rotate(keys, r*7919), callers, decisions)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", v.name, err)
			}
			after, err := readInfo(ctx, ru)
			if err != nil {
				return nil, err
			}
			if err := runHook(hook, "after", v.name); err != nil {
				return nil, err
			}
			results[v.name] = append(results[v.name], after.since(before, v.top, decisions, wall))
		}
	}
	return results, nil
}

// runHook runs the command hook, when there is one, with the arguments
// when and the variant's name.
func runHook(hook, when, name string) error {
	if hook == "" {
		return nil
	}
	cmd := exec.Command("sh", "-c", hook+` "$0" "$1"`, when, name)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// oursOn returns a decision of a on a table of the store made, under the
// state ID "b".
func oursOn(st *redisstore.Store[string], a algorithm.Algorithm) (func(context.Context, string) error, error) {
	t, err := st.Open([]store.Limit{{Algorithm: a, ID: "b"}}, clock.Local())
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, key string) error {
		r, err := t.Take(ctx, key, time.Now().UnixMicro(), 1, nil)
		if err == nil && !r.Allowed() {
			err = fmt.Errorf("denied: %+v", r)
		}
		return err
	}, nil
}

// minimalOn returns a decision by the minimal script src on the key
// prefix + key, with ARGV now, 1, then args.
func minimalOn(ru rueidis.Client, src, prefix string, args []string) func(context.Context, string) error {
	lua := rueidis.NewLuaScript(src)
	return func(ctx context.Context, key string) error {
		argv := append([]string{strconv.FormatInt(time.Now().UnixMicro(), 10), "1"}, args...)
		v, err := lua.Exec(ctx, ru, []string{prefix + "{" + key + "}"}, argv).AsIntSlice()
		if err == nil && (len(v) != 3 || v[1] != 0) {
			err = fmt.Errorf("denied: %v", v)
		}
		return err
	}
}

// decideAll makes n decisions with callers goroutines, going round keys,
// and returns how long they took.
func decideAll(ctx context.Context, decide func(context.Context, string) error, keys []string, callers, n int) (time.Duration, error) {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr atomic.Pointer[error]
	)
	start := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || firstErr.Load() != nil {
					return
				}
				if err := decide(ctx, keys[i%int64(len(keys))]); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return 0, *p
	}
	return time.Since(start), nil
}

// rotate returns keys starting at k mod len(keys), so that each round
// visits them in another order of arrival.
func rotate(keys []string, k int) []string {
	k %= len(keys)
	return append(slices.Clone(keys[k:]), keys[:k]...)
}

// A snapshot is what INFO cpu and INFO commandstats said at one moment.
type snapshot struct {
	cpu   float64            // used_cpu_user + used_cpu_sys, seconds
	sys   float64            // used_cpu_sys, seconds
	calls map[string]float64 // cmdstat_<name> calls
	usec  map[string]float64 // cmdstat_<name> usec
}

var cmdstat = regexp.MustCompile(`(?m)^cmdstat_([a-z_|]+):calls=(\d+),usec=(\d+),`)

// readInfo reads a snapshot of the server.
func readInfo(ctx context.Context, ru rueidis.Client) (snapshot, error) {
	s := snapshot{calls: map[string]float64{}, usec: map[string]float64{}}
	text, err := ru.Do(ctx, ru.B().Info().Section("cpu").Section("commandstats").Build()).ToString()
	if err != nil {
		return s, err
	}
	for _, field := range []string{"used_cpu_user", "used_cpu_sys"} {
		m := regexp.MustCompile(`(?m)^` + field + `:([0-9.]+)`).FindStringSubmatch(text)
		if m == nil {
			return s, fmt.Errorf("INFO cpu has no %s", field)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		s.cpu += v
		if field == "used_cpu_sys" {
			s.sys = v
		}
	}
	for _, m := range cmdstat.FindAllStringSubmatch(text, -1) {
		s.calls[m[1]], _ = strconv.ParseFloat(m[2], 64)
		s.usec[m[1]], _ = strconv.ParseFloat(m[3], 64)
	}
	return s, nil
}

// A measure is one round of one variant, per decision.
type measure struct {
	cpu, usec, calls float64 // µs of CPU, µs in its commands, calls of them
	sys              float64 // µs of CPU in the kernel (part of cpu)
	rate             float64 // decisions per second, wall clock
}

// since returns what the server did between before and s for n
// decisions that took wall, counting the commands top.
func (s snapshot) since(before snapshot, top []string, n int, wall time.Duration) measure {
	m := measure{cpu: (s.cpu - before.cpu) * 1e6 / float64(n), sys: (s.sys - before.sys) * 1e6 / float64(n), rate: float64(n) / wall.Seconds()}
	for _, c := range top {
		m.usec += (s.usec[c] - before.usec[c]) / float64(n)
		m.calls += (s.calls[c] - before.calls[c]) / float64(n)
	}
	return m
}

// median returns the round whose CPU per decision is the median.
func median(ms []measure) measure {
	s := slices.Clone(ms)
	slices.SortFunc(s, func(a, b measure) int { return cmpFloat(a.cpu, b.cpu) })
	return s[len(s)/2]
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// report prints the table: per variant the median round, and ours and
// the experiments against the minimal script of their algorithm.
func report(w *os.File, vs []variant, results map[string][]measure, nkeys, callers, decisions, rounds int) {
	fmt.Fprintf(w, "# %d decisions per variant per round, %d rounds (median shown), %d callers, %d keys, every decision admitted\n",
		decisions, rounds, callers, nkeys)
	fmt.Fprintln(w, "# vs minimal: the median, over the rounds, of the round's ratio to the minimal script of the same algorithm (its range after it)")
	base := map[string][]measure{}
	for _, v := range vs {
		if v.minimal {
			base[v.group] = results[v.name]
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tCPU µs/decision\t(of it sys)\tcommand µs/decision\tcalls/decision\tCPU vs minimal\tcommand vs minimal\tdecisions/s\t")
	for _, v := range vs {
		m := median(results[v.name])
		cpu, usec := "", ""
		if b := base[v.group]; !v.minimal && len(b) == len(results[v.name]) {
			cpu = ratios(results[v.name], b, func(m measure) float64 { return m.cpu })
			usec = ratios(results[v.name], b, func(m measure) float64 { return m.usec })
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t%.0f\t\n", v.name, m.cpu, m.sys, m.usec, m.calls, cpu, usec, math.Round(m.rate))
	}
	tw.Flush()
}

// ratios returns the median of the rounds' ratios of f of ms to f of
// base, and their range.
func ratios(ms, base []measure, f func(measure) float64) string {
	rs := make([]float64, len(ms))
	for i := range ms {
		rs[i] = f(ms[i]) / f(base[i])
	}
	slices.Sort(rs)
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", rs[len(rs)/2], rs[0], rs[len(rs)-1])
}

// An exp is one -exp flag.
type exp struct{ name, file, alg string }

type expFlags []exp

func (e *expFlags) String() string { return fmt.Sprint(*e) }

func (e *expFlags) Set(s string) error {
	name, rest, ok1 := strings.Cut(s, "=")
	file, a, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || name == "" {
		return errors.New("want name=file.lua:algorithm")
	}
	*e = append(*e, exp{name, file, a})
	return nil
}

func algNamed(all []alg, name string) *alg {
	for i := range all {
		if all[i].name == name {
			return &all[i]
		}
	}
	return nil
}

// swapRunner runs every decision script through rueidis with source in
// its place: an experiment's script, given our keys and arguments.
type swapRunner struct {
	client rueidis.Client
	source string
	once   sync.Once
	lua    *rueidis.Lua
}

func (r *swapRunner) Eval(ctx context.Context, s *redisstore.Script, readOnly bool, keys []string, a redisstore.Args, reply []int64) ([]int64, error) {
	if readOnly || a.Batch != nil {
		return nil, errors.New("swapRunner: decisions only (no peeks, no batches)")
	}
	r.once.Do(func() { r.lua = rueidis.NewLuaScript(r.source) })
	return r.lua.Exec(ctx, r.client, keys, append([]string{a.Now, a.Cost}, a.Rest...)).AsIntSlice()
}

func (r *swapRunner) EvalStrings(ctx context.Context, s *redisstore.Script, keys []string, args []string) ([]string, error) {
	return nil, errors.New("swapRunner: decisions only")
}

func (r *swapRunner) Del(ctx context.Context, keys []string) error {
	return r.client.Do(ctx, r.client.B().Unlink().Key(keys...).Build()).Error()
}
