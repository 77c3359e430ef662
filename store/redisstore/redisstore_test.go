package redisstore_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// fakeRunner records the calls it gets and answers each Eval with reply.
type fakeRunner struct {
	mu    sync.Mutex
	calls []string // "EVALSHA <sha> <keys…> | <argv…>"
	reply []int64
}

func (f *fakeRunner) Eval(_ context.Context, s *redisstore.Script, readOnly bool, keys []string, args redisstore.Args, reply []int64) ([]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cmd := "EVALSHA"
	if readOnly {
		cmd = "EVALSHA_RO"
	}
	f.calls = append(f.calls, fmt.Sprintf("%s %s %s | %s", cmd, s.SHA1, strings.Join(keys, " "), strings.Join(args.All(), " ")))
	return append(reply[:0], f.reply...), nil
}

func (f *fakeRunner) EvalStrings(context.Context, *redisstore.Script, []string, []string) ([]string, error) {
	return nil, errors.New("fakeRunner: no EvalStrings")
}

func (f *fakeRunner) Del(context.Context, []string) error { return errors.New("fakeRunner: no Del") }

// policyRunner is a fakeRunner whose servers have policy.
type policyRunner struct {
	fakeRunner
	policy string
	reads  int
}

func (p *policyRunner) ReadPolicies(context.Context) ([]redisstore.NodePolicy, error) {
	p.reads++
	return []redisstore.NodePolicy{{Node: "10.0.0.1:6379", Policy: p.policy}}, nil
}

func limits(t *testing.T) []store.Limit {
	t.Helper()
	alg, err := gcra.New(gcra.Config{Burst: 10, Every: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return []store.Limit{{Algorithm: alg}}
}

func TestNewRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		name string
		run  redisstore.Runner
		opts []redisstore.Option[string]
	}{
		{"nil runner", nil, nil},
		{"refuse without PolicyReader", &fakeRunner{}, []redisstore.Option[string]{redisstore.WithEvictionCheck[string](redisstore.EvictionRefuse)}},
		{"unknown eviction check", &policyRunner{}, []redisstore.Option[string]{redisstore.WithEvictionCheck[string](7)}},
		{"brace in prefix", &fakeRunner{}, []redisstore.Option[string]{redisstore.WithPrefix[string]("a{b")}},
		{"zero timeout", &fakeRunner{}, []redisstore.Option[string]{redisstore.WithTimeout[string](0)}},
		{"negative coalescing", &fakeRunner{}, []redisstore.Option[string]{redisstore.WithCoalescing[string](-1)}},
		{"zero key bytes", &fakeRunner{}, []redisstore.Option[string]{redisstore.WithMaxKeyBytes[string](0)}},
	} {
		st, err := redisstore.New(c.run, c.opts...)
		if !errors.Is(err, algorithm.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, %v; want an error wrapping algorithm.ErrInvalidConfig", c.name, st, err)
		}
	}
}

// A decision reaches the Runner as one EVALSHA of the table's script,
// with the prefixed, hash-tagged key and ARGV = now, cost, then the
// table's own; its reply becomes the Decision.
func TestDecisionThroughRunner(t *testing.T) {
	run := &fakeRunner{reply: []int64{7, 0, 300_000}}
	st, err := redisstore.New(run, redisstore.WithPrefix[string]("p:"), redisstore.WithCoalescing[string](0))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := st.Open(limits(t), clock.Local())
	if err != nil {
		t.Fatal(err)
	}
	r, err := tbl.Take(context.Background(), "k}1", 1_000_000, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Remaining != 7 || r.RetryAfter != 0 || r.ResetAfter != 300_000 {
		t.Errorf("Take = %+v, want the reply {7 0 300000}", r)
	}
	if len(run.calls) != 1 {
		t.Fatalf("the Runner got %d calls, want 1: %q", len(run.calls), run.calls)
	}
	f := strings.Fields(run.calls[0])
	if f[0] != "EVALSHA" || len(f[1]) != 40 || f[2] != `p:{k\)1}#` || f[3] != "|" || f[4] != "1000000" || f[5] != "2" {
		t.Errorf("the Runner got %q, want EVALSHA <sha1> p:{k\\)1}# | 1000000 2 …", run.calls[0])
	}
	if _, err := tbl.Peek(context.Background(), "k", 1_000_000, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(run.calls[1], "EVALSHA_RO ") {
		t.Errorf("Peek sent %q, want EVALSHA_RO", run.calls[1])
	}
}

// The eviction check reads the policies through a Runner that is a
// PolicyReader, once for the store; without one, the default check is off.
func TestEvictionCheckThroughRunner(t *testing.T) {
	run := &policyRunner{policy: "allkeys-lru"}
	st, err := redisstore.New[string](run)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		tbl, err := st.Open(limits(t), clock.Local())
		if err != nil {
			t.Fatal(err)
		}
		w := tbl.(store.Warner).Warnings()
		if len(w) != 1 || !errors.Is(w[0], store.ErrEvicting) || !strings.Contains(w[0].Error(), "10.0.0.1:6379") {
			t.Errorf("Warnings = %v, want one wrapping store.ErrEvicting naming 10.0.0.1:6379", w)
		}
	}
	if run.reads != 1 {
		t.Errorf("the policies were read %d times by two Opens, want 1", run.reads)
	}

	refuse, err := redisstore.New(&policyRunner{policy: "volatile-lru"}, redisstore.WithEvictionCheck[string](redisstore.EvictionRefuse))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refuse.Open(limits(t), clock.Local()); !errors.Is(err, store.ErrEvicting) {
		t.Errorf("Open with EvictionRefuse on volatile-lru = %v, want store.ErrEvicting", err)
	}

	plain, err := redisstore.New[string](&fakeRunner{})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := plain.Open(limits(t), clock.Local())
	if err != nil {
		t.Fatal(err)
	}
	if w := tbl.(store.Warner).Warnings(); len(w) != 0 {
		t.Errorf("Warnings without a PolicyReader = %v, want none", w)
	}
}

// connRunnerTo dials the Redis at $RATELIMIT_REDIS_ADDR, or skips.
func connRunnerTo(t *testing.T) *connRunner {
	addr := os.Getenv("RATELIMIT_REDIS_ADDR")
	if addr == "" {
		t.Skip("RATELIMIT_REDIS_ADDR is not set")
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &connRunner{conn: conn, r: bufio.NewReader(conn)}
}

// The example's Runner makes a working store: Example_runner's decisions,
// a Peek, a reservation (a booking script, EvalStrings) and a Reset.
func TestConnRunner(t *testing.T) {
	run := connRunnerTo(t)
	prefix := fmt.Sprintf("s7test:connrunner:%d:", time.Now().UnixNano())
	st, err := redisstore.New(run, redisstore.WithPrefix[string](prefix))
	if err != nil {
		t.Fatal(err)
	}
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1.0 / 60})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st, ratelimit.WithName("api"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got []bool
	for range 3 {
		d, err := lim.Allow(ctx, "user:123")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Allowed())
	}
	if want := []bool{true, true, false}; !slices.Equal(got, want) {
		t.Errorf("three Allows of a bucket of 2: %v, want %v", got, want)
	}
	if d, err := lim.Peek(ctx, "user:123"); err != nil || d.Remaining() != 0 {
		t.Errorf("Peek = %v, %v; want 0 remaining", d, err)
	}
	r, err := lim.Reserve(ctx, "user:456")
	if err != nil || !r.OK() {
		t.Fatalf("Reserve = %v, %v; want a reservation", r, err)
	}
	if err := lim.Reset(ctx, "user:123"); err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(ctx, "user:123"); err != nil || !d.Allowed() {
		t.Errorf("Allow after Reset = %v, %v; want allowed", d, err)
	}
	if err := run.Del(ctx, []string{prefix + "{user:123}#", prefix + "{user:456}#"}); err != nil {
		t.Fatal(err)
	}
}

// A script the server has not seen goes by EVAL after NOSCRIPT.
func TestConnRunnerNoScript(t *testing.T) {
	run := connRunnerTo(t)
	src := fmt.Sprintf("return {tonumber(ARGV[3]), %d}", time.Now().UnixNano()) // ARGV: now, cost, Rest; a script no server has cached
	sum := sha1.Sum([]byte(src))
	s := &redisstore.Script{Name: "test", Source: src, SHA1: hex.EncodeToString(sum[:])}
	got, err := run.Eval(context.Background(), s, false, nil, redisstore.Args{Rest: []string{"42"}}, nil)
	if err != nil || len(got) != 2 || got[0] != 42 {
		t.Errorf("Eval of a new script = %v, %v; want [42 …]", got, err)
	}
}
