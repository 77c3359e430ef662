package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store"
)

const prefix = "rl:"

// suffix ends the name of a key's hash, which holds window's state in
// the field id. Both are written out, not computed, so that a change of
// the key layout, which would orphan every key already stored, fails here.
const suffix = "#"

// id is window's state ID, store.DefaultID of its spec: the field of the
// key's hash that holds its state.
const id = "243609ca"

func window(t testing.TB) algorithm.Algorithm {
	t.Helper()
	alg, err := fixedwindow.New(fixedwindow.Config{Limit: 5, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return alg
}

func openTable[K comparable](t testing.TB, run Runner, encode store.KeyEncoder[K], clk clock.Clock) *Table[K] {
	t.Helper()
	table, err := open(run, config[K]{Prefix: prefix, Encode: encode}, store.LimitsOf(window(t)), clk)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return table
}

// tricky are user keys that could collide or take over the hash tag if
// the encoding were careless.
var tricky = []string{
	"", "a", "a}b", "}b", "a}", "}", "{", "{}", "}{", "{a}", "a{b}c", "{a}b",
	`\`, `\\`, `\)`, `\}`, `)`, `\\)`, `\\\`, "a\\", "\\a",
	"\x00", "a\x00b", "\xff", "\xfe\xff", "\xc3\x28", "😀", "{😀}",
	"prefix:{x}", "rl:{x}", strings.Repeat("}", 10), strings.Repeat("\\", 10),
}

// fataler is what checkKey needs of *testing.T (and of *rapid.T, in the
// integration tests).
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// decode inverts the escaping inside the braces of a key, or fails.
func decode(t fataler, key string) string {
	t.Helper()
	if !strings.HasPrefix(key, prefix+"{") || !strings.HasSuffix(key, "}"+suffix) {
		t.Fatalf("key %q: want %q + \"{\" + encoded key + \"}\" + %q", key, prefix, suffix)
	}
	inner := key[len(prefix)+1 : len(key)-len(suffix)-1]
	if inner == `\` {
		return "" // the empty key's own tag
	}
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		switch c := inner[i]; {
		case c == '}':
			t.Fatalf("key %q: an unescaped '}' inside the braces", key)
		case c != '\\':
			b.WriteByte(c)
		case i+1 < len(inner) && inner[i+1] == '\\':
			b.WriteByte('\\')
			i++
		case i+1 < len(inner) && inner[i+1] == ')':
			b.WriteByte('}')
			i++
		default:
			t.Fatalf("key %q: a lone '\\' at %d", key, i)
		}
	}
	return b.String()
}

// hashTag returns the part of key Redis Cluster hashes: the text between
// the first '{' and the first '}' after it, when that is not empty.
func hashTag(key string) string {
	s := strings.IndexByte(key, '{')
	if s < 0 {
		return key
	}
	e := strings.IndexByte(key[s+1:], '}')
	if e <= 0 {
		return key
	}
	return key[s+1 : s+1+e]
}

func checkKey(t fataler, table *Table[string], key string) string {
	t.Helper()
	got, err := table.Key(key)
	if err != nil {
		t.Fatalf("Key(%q): %v", key, err)
	}
	if back := decode(t, got); back != key {
		t.Fatalf("Key(%q) = %q, which decodes to %q", key, got, back)
	}
	encoded := got[len(prefix)+1 : len(got)-len(suffix)-1]
	// The tag is the whole encoded key, never empty: an empty one would
	// make Redis hash each whole name, and a script's keys would not
	// share a slot.
	if tag := hashTag(got); tag == "" || tag != encoded {
		t.Fatalf("Key(%q) = %q: the hash tag is %q, want the whole encoded key %q", key, got, tag, encoded)
	}
	return got
}

func TestKeyInjective(t *testing.T) {
	table := openTable[string](t, nil, nil, clock.Local())
	seen := map[string]string{}
	for _, k := range tricky {
		got := checkKey(t, table, k)
		if other, dup := seen[got]; dup {
			t.Errorf("Key(%q) = Key(%q) = %q", k, other, got)
		}
		seen[got] = k
	}
	// The examples that made the escaping necessary.
	for _, pair := range [][2]string{{"a}b", "a"}, {`\)`, "}"}, {`\\`, `\`}} {
		if checkKey(t, table, pair[0]) == checkKey(t, table, pair[1]) {
			t.Errorf("Key(%q) = Key(%q)", pair[0], pair[1])
		}
	}
}

func TestKeyConcurrent(t *testing.T) {
	table := openTable[string](t, nil, nil, clock.Local())
	done := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := range 1000 {
				k := fmt.Sprintf("%d}%d\\%d", g, i, g*i)
				if got, err := table.Key(k); err != nil || got != prefix+"{"+strings.NewReplacer(`\`, `\\`, "}", `\)`).Replace(k)+"}"+suffix {
					done <- fmt.Errorf("Key(%q) = %q, %v; want %q", k, got, err, prefix+"{"+strings.NewReplacer(`\`, `\\`, "}", `\)`).Replace(k)+"}"+suffix)
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestKeyEncoders(t *testing.T) {
	ints := openTable[int](t, nil, nil, clock.Local())
	if got, err := ints.Key(-42); err != nil || got != prefix+"{-42}"+suffix {
		t.Errorf("Key(-42) with the default encoder = %q, %v; want %q", got, err, prefix+"{-42}"+suffix)
	}
	type pair struct{ a, b string }
	pairs := openTable(t, nil, func(dst []byte, k pair) []byte {
		return append(append(append(dst, k.a...), '}'), k.b...)
	}, clock.Local())
	if got, err := pairs.Key(pair{"x", "y"}); err != nil || got != prefix+`{x\)y}`+suffix {
		t.Errorf("Key with a custom encoder = %q, %v; want %q (escaped after encoding)", got, err, prefix+`{x\)y}`+suffix)
	}
	if _, err := open(nil, config[pair]{Prefix: prefix}, store.LimitsOf(window(t)), clock.Local()); !errors.Is(err, store.ErrKeyType) {
		t.Errorf("Open[struct] without an encoder: %v, want ErrKeyType", err)
	}
}

func TestCheckPrefix(t *testing.T) {
	for _, p := range []string{"", "rl:", "a:b:", "\\", "x)"} {
		if err := checkPrefix(p); err != nil {
			t.Errorf("CheckPrefix(%q): %v, want nil", p, err)
		}
	}
	for _, p := range []string{"{", "}", "a{", "a}b", "{}", "x:{y}:"} {
		if err := checkPrefix(p); !errors.Is(err, algorithm.ErrInvalidConfig) {
			t.Errorf("CheckPrefix(%q): %v, want ErrInvalidConfig", p, err)
		}
		if _, err := open(nil, config[string]{Prefix: p}, store.LimitsOf(window(t)), clock.Local()); !errors.Is(err, algorithm.ErrInvalidConfig) {
			t.Errorf("Open with prefix %q: %v, want ErrInvalidConfig", p, err)
		}
	}
}

// unknown is an algorithm with no script.
type unknown struct{}

func (unknown) Limit() int64                                { return 1 }
func (unknown) Init(algorithm.State, int64) algorithm.State { return algorithm.State{} }
func (unknown) Take(s algorithm.State, _, _ int64) (algorithm.State, algorithm.Result) {
	return s, algorithm.Result{}
}
func (unknown) Peek(algorithm.State, int64, int64) algorithm.Result { return algorithm.Fresh(1) }
func (unknown) Spec() algorithm.Spec                                { return algorithm.Spec{Name: "unknown"} }

func TestOpenUnknownAlgorithm(t *testing.T) {
	if _, err := open(nil, config[string]{Prefix: prefix}, store.LimitsOf(unknown{}), clock.Local()); !errors.Is(err, store.ErrAlgorithmUnsupported) {
		t.Errorf("Open(unknown algorithm): %v, want ErrAlgorithmUnsupported", err)
	}
}

// call is one call a recorder received.
type call struct {
	script   string
	readOnly bool
	key      string
	args     []string
}

// recorder records calls and answers with reply and err.
type recorder struct {
	calls []call
	dels  []string
	reply []int64
	err   error
}

func (r *recorder) Eval(_ context.Context, s *Script, readOnly bool, keys []string, args Args, _ []int64) ([]int64, error) {
	if len(args.RestAny) != len(args.Rest) {
		return nil, fmt.Errorf("RestAny has %d values, Rest %d", len(args.RestAny), len(args.Rest))
	}
	for i := range args.Rest {
		if args.RestAny[i] != any(args.Rest[i]) {
			return nil, fmt.Errorf("RestAny[%d] = %v, Rest[%d] = %q", i, args.RestAny[i], i, args.Rest[i])
		}
	}
	r.calls = append(r.calls, call{s.Name, readOnly, strings.Join(keys, " "), args.All()})
	return r.reply, r.err
}

func (r *recorder) EvalStrings(_ context.Context, s *Script, keys []string, args []string) ([]string, error) {
	r.calls = append(r.calls, call{s.Name, false, strings.Join(keys, " "), args})
	return nil, r.err
}

func (r *recorder) Del(_ context.Context, keys []string) error {
	r.dels = append(r.dels, keys...)
	return r.err
}

func TestArguments(t *testing.T) {
	ctx := context.Background()
	run := &recorder{reply: []int64{4, 0, 700}}
	local := openTable[string](t, run, nil, clock.Local())
	if _, err := local.Take(ctx, "k", 1_700_000_000_123_456, 3, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Peek(ctx, "k", 1_700_000_000_123_457, nil); err != nil {
		t.Fatal(err)
	}
	server := openTable[string](t, run, nil, clock.Server())
	if _, err := server.Take(ctx, "k", 1_700_000_000_123_456, 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Peek(ctx, "k", 1_700_000_000_123_456, nil); err != nil {
		t.Fatal(err)
	}
	// The hash alone: the sorted set where a fixed window looks for a log
	// of its ID on a miss is not declared (a slot migration would answer
	// TRYAGAIN for as long as it lasts).
	keys := "rl:{k}#"
	want := []call{
		{"fixedwindow", false, keys, []string{"1700000000123456", "3", "0", id, "F5,1000000:", "5", "1000000"}},
		{"fixedwindow", true, keys, []string{"1700000000123457", "0", "0", id, "F5,1000000:", "5", "1000000"}},
		{"fixedwindow", false, keys, []string{"", "2", "0", id, "F5,1000000:", "5", "1000000"}},
		{"fixedwindow", true, keys, []string{"", "0", "0", id, "F5,1000000:", "5", "1000000"}},
	}
	if len(run.calls) != len(want) {
		t.Fatalf("got %d calls, want %d", len(run.calls), len(want))
	}
	for i, got := range run.calls {
		if got.script != want[i].script || got.readOnly != want[i].readOnly || got.key != want[i].key || !slices.Equal(got.args, want[i].args) {
			t.Errorf("call %d: got %+v, want %+v", i, got, want[i])
		}
	}
	// Reset deletes the ID's field of the hash, and its sorted set, in
	// one script.
	run.calls = nil
	err := local.Reset(ctx, "a}b")
	wantReset := call{"reset", false, `rl:{a\)b}# rl:{a\)b}#` + id, []string{"", "", id}}
	if err != nil || len(run.calls) != 1 || fmt.Sprint(run.calls[0]) != fmt.Sprint(wantReset) {
		t.Errorf("Reset(a}b): %v, calls %+v; want %+v", err, run.calls, wantReset)
	}
}

// TestDeclaredKeys checks the keys a decision's script declares: the hash
// when a limit keeps its state there, then each sliding log's sorted set,
// and no other; Key gives the first.
func TestDeclaredKeys(t *testing.T) {
	ctx := context.Background()
	log, err := slidinglog.New(slidinglog.Config{Limit: 5, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		limits []store.Limit
		want   string
	}{
		{"a fixed window", []store.Limit{{Algorithm: window(t), ID: "w"}}, "rl:{k}#"},
		{"a sliding log", []store.Limit{{Algorithm: log, ID: "l"}}, "rl:{k}#l"},
		{"a sliding log of the empty ID", []store.Limit{{Algorithm: log, ID: ""}}, "rl:{k}#{}"},
		{"two logs", []store.Limit{{Algorithm: log, ID: "a"}, {Algorithm: log, ID: "b"}}, "rl:{k}#a rl:{k}#b"},
		{"a log and a window", []store.Limit{{Algorithm: log, ID: "l"}, {Algorithm: window(t), ID: "w"}}, "rl:{k}# rl:{k}#l"},
	} {
		run := &recorder{reply: make([]int64, 3*len(c.limits))}
		table, err := open(run, config[string]{Prefix: prefix}, c.limits, clock.Local())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := table.Take(ctx, "k", 1_700_000_000_123_456, 1, make([]algorithm.Result, len(c.limits))); err != nil {
			t.Fatal(err)
		}
		if got := run.calls[0].key; got != c.want {
			t.Errorf("%s: the script declares %q, want %q", c.name, got, c.want)
		}
		if got, _ := table.Key("k"); got != strings.Fields(c.want)[0] {
			t.Errorf("%s: Key %q, want %q", c.name, got, strings.Fields(c.want)[0])
		}
	}
}

func TestReplies(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		reply []int64
		want  algorithm.Result
		ok    bool
	}{
		{[]int64{4, 0, 700}, algorithm.Result{Remaining: 4, ResetAfter: 700}, true},
		{[]int64{0, 300, 700}, algorithm.Result{RetryAfter: 300, ResetAfter: 700}, true},
		{[]int64{5, 0, 0}, algorithm.Fresh(5), true},
		{nil, algorithm.Result{}, false},
		{[]int64{4, 0}, algorithm.Result{}, false},
		{[]int64{1, 4, 0, 700}, algorithm.Result{}, false}, // an older layout, with allowed
		{[]int64{-1, 0, 700}, algorithm.Result{}, false},   // remaining below 0
		{[]int64{6, 0, 700}, algorithm.Result{}, false},    // remaining above the limit
		{[]int64{4, 0, -1}, algorithm.Result{}, false},     // reset below 0
		{[]int64{0, -5, 700}, algorithm.Result{}, false},   // retry below 0
		{[]int64{4, 0, -9223372036854775808}, algorithm.Result{}, false},
	} {
		table := openTable[string](t, &recorder{reply: c.reply}, nil, clock.Local())
		for _, peek := range []bool{false, true} {
			var got algorithm.Result
			var err error
			if peek {
				got, err = table.Peek(ctx, "k", 1, nil)
			} else {
				got, err = table.Take(ctx, "k", 1, 1, nil)
			}
			if c.ok && (err != nil || got != c.want) {
				t.Errorf("reply %v (peek %v): got %+v, %v; want %+v", c.reply, peek, got, err, c.want)
			}
			if !c.ok && (!errors.Is(err, store.ErrUnavailable) || got != (algorithm.Result{})) {
				t.Errorf("reply %v (peek %v): got %+v, %v; want ErrUnavailable", c.reply, peek, got, err)
			}
		}
	}
}

func TestRunnerErrorsWrapped(t *testing.T) {
	ctx := context.Background()
	cause := errors.New("connection refused")
	table := openTable[string](t, &recorder{err: cause}, nil, clock.Local())
	_, err := table.Take(ctx, "k", 1, 1, nil)
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, cause) {
		t.Errorf("Take: %v, want ErrUnavailable wrapping the cause", err)
	}
	_, err = table.Peek(ctx, "k", 1, nil)
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, cause) {
		t.Errorf("Peek: %v, want ErrUnavailable wrapping the cause", err)
	}
	err = table.Reset(ctx, "k")
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, cause) {
		t.Errorf("Reset: %v, want ErrUnavailable wrapping the cause", err)
	}
}

func TestConfigCheckTTLMargin(t *testing.T) {
	for _, margin := range []time.Duration{-time.Millisecond, 10 * 365 * 24 * time.Hour} {
		c := config[string]{Prefix: prefix, TTLMargin: margin}
		if err := c.check(); !errors.Is(err, algorithm.ErrInvalidConfig) {
			t.Errorf("TTLMargin %v: Check() = %v, want ErrInvalidConfig", margin, err)
		}
	}
	c := config[string]{Prefix: prefix, TTLMargin: time.Minute}
	if err := c.check(); err != nil || c.Encode == nil {
		t.Errorf("TTLMargin 1m: Check() = %v, Encode set %v; want nil, true", err, c.Encode != nil)
	}
}

// tryAgainRunner answers TRYAGAIN to its first n calls, then reply.
type tryAgainRunner struct {
	recorder
	n int
}

var errTryAgain = errors.New("TRYAGAIN Multiple keys request during rehashing of slot")

func (r *tryAgainRunner) Eval(ctx context.Context, s *Script, readOnly bool, keys []string, args Args, _ []int64) ([]int64, error) {
	reply, err := r.recorder.Eval(ctx, s, readOnly, keys, args, nil)
	if len(r.calls) <= r.n {
		return nil, errTryAgain
	}
	return reply, err
}

// TestTryAgain checks that a script answered TRYAGAIN, which did not run,
// is sent again after a short pause, up to len(TryAgainBackoff) times.
func TestTryAgain(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1, 3, len(tryAgainBackoff)} {
		run := &tryAgainRunner{recorder{reply: []int64{4, 0, 700}}, n}
		table := openTable[string](t, run, nil, clock.Local())
		start := time.Now()
		r, err := table.Take(ctx, "k", 1, 1, nil)
		took := time.Since(start)
		if err != nil || r.Remaining != 4 || len(run.calls) != n+1 {
			t.Errorf("Take after %d TRYAGAIN = %+v, %v after %d calls; want the reply after %d", n, r, err, len(run.calls), n+1)
		}
		var pauses time.Duration
		for _, d := range tryAgainBackoff[:n] {
			pauses += d
		}
		if took < pauses {
			t.Errorf("Take after %d TRYAGAIN took %v, less than the pauses (%v)", n, took, pauses)
		}
		if r, err := table.Peek(ctx, "k", 1, nil); err != nil || r.Remaining != 4 {
			t.Errorf("Peek = %+v, %v", r, err)
		}
	}
	// Past the last pause, the error.
	run := &tryAgainRunner{recorder{reply: []int64{4, 0, 700}}, len(tryAgainBackoff) + 1}
	table := openTable[string](t, run, nil, clock.Local())
	if _, err := table.Take(ctx, "k", 1, 1, nil); !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, errTryAgain) || len(run.calls) != len(tryAgainBackoff)+1 {
		t.Errorf("Take answered TRYAGAIN every time: %v after %d calls; want ErrUnavailable wrapping TRYAGAIN after %d", err, len(run.calls), len(tryAgainBackoff)+1)
	}
	// A context that ends stops the retries.
	run = &tryAgainRunner{recorder{reply: []int64{4, 0, 700}}, 100}
	table = openTable[string](t, run, nil, clock.Local())
	cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	if _, err := table.Take(cctx, "k", 1, 1, nil); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Take with a 5ms deadline answered TRYAGAIN every time: %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	// Other errors are not retried.
	plain := &recorder{err: errors.New("ERR something else")}
	if _, err := openTable[string](t, plain, nil, clock.Local()).Take(ctx, "k", 1, 1, nil); err == nil || len(plain.calls) != 1 {
		t.Errorf("Take on another error: %v after %d calls, want the error after 1", err, len(plain.calls))
	}
	for _, c := range []struct {
		err  error
		want bool
	}{{nil, false}, {errTryAgain, true}, {errors.New("TRYAGAIN"), true}, {errors.New("ERR TRYAGAIN"), false}, {errors.New("MOVED 1 127.0.0.1:1"), false}} {
		if got := isTryAgain(c.err); got != c.want {
			t.Errorf("IsTryAgain(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestOOM checks that Redis's OOM reply, a server out of memory under
// noeviction, is store.ErrFull and not an outage, with the server's text,
// and is not retried.
func TestOOM(t *testing.T) {
	ctx := context.Background()
	oom := errors.New("OOM command not allowed when used memory > 'maxmemory'. script: 5849fad0707709da5733f013e31b917a7e7d3e87, on @user_script:1.")
	run := &recorder{err: oom}
	table := openTable[string](t, run, nil, clock.Local())
	_, err := table.Take(ctx, "k", 1, 1, nil)
	if !errors.Is(err, store.ErrFull) || errors.Is(err, store.ErrUnavailable) || !errors.Is(err, oom) || len(run.calls) != 1 {
		t.Errorf("Take answered OOM: %v after %d calls; want ErrFull (not ErrUnavailable) wrapping the reply, after 1 call", err, len(run.calls))
	}
	for _, c := range []struct {
		err  error
		want bool
	}{{nil, false}, {oom, true}, {errors.New("OOM"), true}, {errors.New("ERR OOM"), false}, {errors.New("oom"), false}} {
		if got := isOOM(c.err); got != c.want {
			t.Errorf("IsOOM(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestMismatch checks that a script's RLMISMATCH refusal and Redis's
// WRONGTYPE reply are store.ErrStateMismatch, not an outage, with the
// server's text, for takes and peeks, and are not retried.
func TestMismatch(t *testing.T) {
	ctx := context.Background()
	for _, reply := range []error{
		errors.New("RLMISMATCH rl:{k} holds 16 bytes that are not a fixed window"),
		errors.New("WRONGTYPE Operation against a key holding the wrong kind of value script: 5849fad0707709da5733f013e31b917a7e7d3e87, on @user_script:1."),
	} {
		run := &recorder{err: reply}
		table := openTable[string](t, run, nil, clock.Local())
		_, err := table.Take(ctx, "k", 1, 1, nil)
		_, perr := table.Peek(ctx, "k", 1, nil)
		for _, err := range []error{err, perr} {
			if !errors.Is(err, store.ErrStateMismatch) || errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrFull) || !errors.Is(err, reply) {
				t.Errorf("script answered %q: %v; want ErrStateMismatch (not ErrUnavailable) wrapping the reply", reply, err)
			}
		}
		if len(run.calls) != 2 {
			t.Errorf("script answered %q: %d calls, want 2 (one per Take and Peek)", reply, len(run.calls))
		}
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false}, {errors.New("RLMISMATCH k"), true}, {errors.New("WRONGTYPE"), true},
		{errors.New("RLMISMATCHk"), false}, {errors.New("ERR RLMISMATCH k"), false}, {errors.New("ratelimit: k does not hold a GCRA state"), false},
	} {
		if got := isMismatch(c.err); got != c.want {
			t.Errorf("IsMismatch(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestKeyTooLong checks that a key whose encoding is longer than
// MaxKeyBytes fails Take, Peek and Reset with ErrKeyTooLong before any
// call reaches the runner, that the limit counts the encoding's bytes,
// not the escaped ones, and that a key of exactly the limit is fine.
func TestKeyTooLong(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		max  int // MaxKeyBytes; 0 for the default
		want int // the longest key accepted
	}{{"default", 0, store.DefaultMaxKeyBytes}, {"10", 10, 10}, {"1", 1, 1}} {
		t.Run(c.name, func(t *testing.T) {
			run := &recorder{reply: []int64{4, 0, 700}}
			table, err := open(run, config[string]{Prefix: prefix, MaxKeyBytes: c.max}, store.LimitsOf(window(t)), clock.Local())
			if err != nil {
				t.Fatal(err)
			}
			// Every byte escaped: the Redis key's braces hold twice as many.
			for _, k := range []string{strings.Repeat("x", c.want), strings.Repeat("}", c.want)} {
				if _, err := table.Take(ctx, k, 1, 1, nil); err != nil {
					t.Errorf("Take(%d bytes): %v, want no error", len(k), err)
				}
				if _, err := table.Peek(ctx, k, 1, nil); err != nil {
					t.Errorf("Peek(%d bytes): %v, want no error", len(k), err)
				}
				if err := table.Reset(ctx, k); err != nil {
					t.Errorf("Reset(%d bytes): %v, want no error", len(k), err)
				}
			}
			calls, dels := len(run.calls), len(run.dels)
			for _, k := range []string{strings.Repeat("x", c.want+1), strings.Repeat("}", 1<<20)} {
				if r, err := table.Take(ctx, k, 1, 1, nil); !errors.Is(err, store.ErrKeyTooLong) || errors.Is(err, store.ErrUnavailable) || r != (algorithm.Result{}) {
					t.Errorf("Take(%d bytes) = %+v, %v; want ErrKeyTooLong", len(k), r, err)
				}
				if r, err := table.Peek(ctx, k, 1, nil); !errors.Is(err, store.ErrKeyTooLong) || r != (algorithm.Result{}) {
					t.Errorf("Peek(%d bytes) = %+v, %v; want ErrKeyTooLong", len(k), r, err)
				}
				if err := table.Reset(ctx, k); !errors.Is(err, store.ErrKeyTooLong) {
					t.Errorf("Reset(%d bytes): %v, want ErrKeyTooLong", len(k), err)
				}
				if _, err := table.Key(k); !errors.Is(err, store.ErrKeyTooLong) {
					t.Errorf("Key(%d bytes): %v, want ErrKeyTooLong", len(k), err)
				}
			}
			if len(run.calls) != calls || len(run.dels) != dels {
				t.Errorf("keys too long made %d script calls and %d deletions, want none", len(run.calls)-calls, len(run.dels)-dels)
			}
		})
	}
	c := config[string]{Prefix: prefix, MaxKeyBytes: -1}
	if err := c.check(); !errors.Is(err, algorithm.ErrInvalidConfig) {
		t.Errorf("MaxKeyBytes -1: Check() = %v, want ErrInvalidConfig", err)
	}
}

// TestTakeAllocs checks the allocations of a take on an existing key, the
// hot path, through a runner that allocates nothing: the Redis keys, cut
// from one string, are the only one; the length check adds none.
func TestTakeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	ctx := context.Background()
	table := openTable[string](t, nopRunner{}, nil, clock.Local())
	if n := testing.AllocsPerRun(1000, func() { table.Take(ctx, "user:1234", 1, 1, nil) }); n != 1 {
		t.Errorf("Take: %v allocations, want 1 (the keys)", n)
	}
}

// nopRunner answers every script with a fixed reply, allocating nothing.
type nopRunner struct{}

var nopReply = []int64{4, 0, 700}

func (nopRunner) Eval(context.Context, *Script, bool, []string, Args, []int64) ([]int64, error) {
	return nopReply, nil
}
func (nopRunner) Del(context.Context, []string) error { return nil }

func (nopRunner) EvalStrings(context.Context, *Script, []string, []string) ([]string, error) {
	return nil, nil
}
