package redistest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	catalog "github.com/go-ratelimit/ratelimit/algorithms"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
	"github.com/go-ratelimit/ratelimit/store/storetest"
)

// NewStore returns a store on target whose keys all start with prefix,
// on a client of its own that is closed when t ends (GoRedis and Rueidis
// make such clients).
type NewStore func(t *testing.T, target Target, prefix string) store.Store[string]

// RunSuite runs the tests every Redis store passes, each in a subtest, on
// stores made by newStore:
//
//   - Conformance: storetest.Run on every target;
//   - Differential: storetest.Differential against the memory store on
//     every target, so the Lua scripts decide exactly as the Go transitions
//     (on real Redis both run with a Target.TTLMargin, as their clocks are fake);
//   - Names: storetest.Names on every target, its two stores made by
//     newStore under one prefix, each on a client of its own;
//   - TTL: every key written has a time to live of its last ResetAfter,
//     rounded up to the millisecond; denials and peeks write nothing;
//   - PeekReadOnly: Peek works for an ACL user allowed only EVALSHA_RO and
//     EVAL_RO, for which Take fails;
//   - ScriptFlush: calls succeed after SCRIPT FLUSH (EVAL fallback);
//   - ServerClock, ServerClockShared: with clock.Server() decisions follow
//     the server's TIME, whatever the instant the Limiter passes;
//   - DeadlineStorm: calls with 1µs deadlines neither open the breaker
//     nor get admitted uncharged, under every failure policy;
//   - ShortDeadlines: calls whose deadlines end while they are in flight,
//     beside honest callers, neither open the breaker nor reach the
//     failure policy nor cost the honest callers an error, with
//     coalescing on and off;
//   - Timeout, Restart, Eviction, OutOfMemory: private servers that are
//     slow, killed, evicting or full;
//   - LostReply: a take whose reply is lost is charged once, not resent;
//   - ClusterSlots: keys with braces land in the slot of their whole
//     encoded key;
//   - UnsupportedAlgorithm: an algorithm without a script is refused;
//   - StateIDs: limiters of two names under one prefix never share state;
//     one name shares it from any store value, carrying it across a change
//     of limit; the name is a field of the key's hash;
//   - PolicyOneCall: a policy's decision is one script call, on one slot;
//   - EvictionPolicy, EvictionCheckOnce: a server whose maxmemory-policy
//     may evict (allkeys-*) makes Open warn, or fail with EvictionRefuse;
//     other policies, a server refusing CONFIG and one that is down do
//     not; a store reads the policy once for all its tables at Open;
//   - EvictionRecheck: a server switched to allkeys-lru after Open is
//     reported to the error handler, or refuses decisions with
//     ErrEvicting, within EvictionInterval of decisions;
//   - KeyTooLong: keys longer than MaxKeyBytes fail with ErrKeyTooLong;
//   - TooManyStates: a key's hash holds at most store.MaxStatesPerKey
//     fields; a limit new to a full key fails with ErrTooManyStates.
//
// The store constructors must honour Target.TTLMargin, MaxKeyBytes,
// Eviction and NoCoalescing.
//
// Real targets skip unless $RATELIMIT_REDIS_ADDR (and, for the cluster,
// $RATELIMIT_REDIS_CLUSTER_ADDRS) are set.
func RunSuite(t *testing.T, newStore NewStore, opts ...SuiteOption) {
	var o suiteOptions
	for _, opt := range opts {
		opt(&o)
	}
	t.Run("Conformance", func(t *testing.T) { testConformance(t, newStore, o) })
	t.Run("Differential", func(t *testing.T) { testDifferential(t, newStore, o) })
	t.Run("Names", func(t *testing.T) { testNames(t, newStore) })
	t.Run("TTL", func(t *testing.T) { testTTL(t, newStore) })
	t.Run("PeekReadOnly", func(t *testing.T) { testPeekReadOnly(t, newStore) })
	t.Run("ScriptFlush", func(t *testing.T) { testScriptFlush(t, newStore) })
	t.Run("ServerClock", func(t *testing.T) { testServerClock(t, newStore) })
	t.Run("ServerClockShared", func(t *testing.T) { testServerClockShared(t, newStore) })
	t.Run("Timeout", func(t *testing.T) { testTimeout(t, newStore) })
	t.Run("DeadlineStorm", func(t *testing.T) { testDeadlineStorm(t, newStore) })
	t.Run("ShortDeadlines", func(t *testing.T) { testShortDeadlines(t, newStore) })
	t.Run("LostReply", func(t *testing.T) { testLostReply(t, newStore) })
	t.Run("Restart", func(t *testing.T) { testRestart(t, newStore) })
	t.Run("Refused", func(t *testing.T) { testRefused(t, newStore) })
	t.Run("Eviction", func(t *testing.T) { testEviction(t, newStore) })
	t.Run("OutOfMemory", func(t *testing.T) { testOutOfMemory(t, newStore) })
	t.Run("ClusterSlots", func(t *testing.T) { testClusterSlots(t, newStore) })
	t.Run("UnsupportedAlgorithm", func(t *testing.T) { testUnsupportedAlgorithm(t, newStore) })
	t.Run("StateIDs", func(t *testing.T) { testStateIDs(t, newStore) })
	t.Run("PolicyOneCall", func(t *testing.T) { testPolicyOneCall(t, newStore) })
	t.Run("EvictionPolicy", func(t *testing.T) { testEvictionPolicy(t, newStore) })
	t.Run("EvictionCheckOnce", func(t *testing.T) { testEvictionCheckOnce(t, newStore) })
	t.Run("EvictionRecheck", func(t *testing.T) { testEvictionRecheck(t, newStore) })
	t.Run("KeyTooLong", func(t *testing.T) { testKeyTooLong(t, newStore) })
	t.Run("TooManyStates", func(t *testing.T) { testTooManyStates(t, newStore) })
}

// suiteTTL is the Target.TTLMargin of real targets under storetest, whose
// clocks are fake: real Redis would expire keys by real time, early in
// the suite's time (miniredis's TTLs do not move on their own). The TTLs
// the scripts set are checked by the TTL test.
const suiteTTL = 10 * time.Minute

// SuiteOption changes what RunSuite runs.
type SuiteOption func(*suiteOptions)

type suiteOptions struct {
	miniredisStandIn bool
}

// MiniredisStandIn runs the Conformance and Differential suites, the
// longest by far (rapid's sequences through scripts that gopher-lua
// interprets, under -race: 490 s of 550 for one store), on miniredis only
// while no real Redis is configured: for a store whose scripts another
// store's suite runs on miniredis already, and which the real Redis and
// cluster check in full.
func MiniredisStandIn() SuiteOption {
	return func(o *suiteOptions) { o.miniredisStandIn = true }
}

// standIn skips t, of target, when o keeps miniredis for when no real
// Redis is configured and one is.
func (o suiteOptions) standIn(t *testing.T, target Target) {
	if o.miniredisStandIn && target.Mini != nil && os.Getenv(EnvAddr) != "" {
		t.Skipf("a real Redis is configured (%s): miniredis stands in only without one (MiniredisStandIn)", EnvAddr)
	}
}

func testConformance(t *testing.T, newStore NewStore, o suiteOptions) {
	Each(t, func(t *testing.T, target Target) {
		o.standIn(t, target)
		t.Parallel() // the targets share nothing
		if target.Mini == nil {
			target.TTLMargin = suiteTTL
		}
		storetest.Run(t, func(t *testing.T) store.Store[string] {
			return newStore(t, target, Prefix(t))
		})
	})
}

func testDifferential(t *testing.T, newStore NewStore, o suiteOptions) {
	Each(t, func(t *testing.T, target Target) {
		o.standIn(t, target)
		t.Parallel()
		if target.Mini == nil {
			target.TTLMargin = suiteTTL
		}
		storetest.Differential(t,
			func(t *testing.T) store.Store[string] { return memorystore.New[string]() },
			func(t *testing.T) store.Store[string] { return newStore(t, target, Prefix(t)) })
	})
}

func testNames(t *testing.T, newStore NewStore) {
	Each(t, func(t *testing.T, target Target) {
		t.Parallel()
		if target.Mini == nil {
			target.TTLMargin = suiteTTL
		}
		storetest.Names(t, func(t *testing.T) (a, b store.Store[string]) {
			prefix := Prefix(t)
			return newStore(t, target, prefix), newStore(t, target, prefix)
		})
	})
}

// algo is an algorithm with a name for subtests.
type algo struct {
	name string
	alg  algorithm.Algorithm
}

// algorithms returns one configuration of every algorithm of package
// algorithms, in its order, each admitting about limit per period
// (Entry.Spread).
func algorithms(t testing.TB, limit int64, period time.Duration) []algo {
	t.Helper()
	var algs []algo
	for _, e := range catalog.All() {
		alg, err := e.Spread(limit, period)
		if err != nil {
			t.Fatalf("algorithms(%d, %v): %s: %v", limit, period, e.Name, err)
		}
		algs = append(algs, algo{e.Name, alg})
	}
	return algs
}

// bucketPer returns a token bucket of n per period, the whole of n at
// once: package algorithms lists the token bucket first.
func bucketPer(n int64, period time.Duration) (algorithm.Algorithm, error) {
	return catalog.All()[0].Per(n, period)
}

// newLimiter returns a Limiter of alg on st, named by its configuration
// (shared) unless opts name it, so that limiters configured alike under
// one prefix share each key's quota and redisKey finds their keys.
func newLimiter(t testing.TB, alg algorithm.Algorithm, st store.Store[string], opts ...ratelimit.Option) *ratelimit.Limiter[string] {
	t.Helper()
	lim, err := ratelimit.New(alg, st, append([]ratelimit.Option{shared(alg)}, opts...)...)
	if err != nil {
		t.Fatalf("ratelimit.New(%v): %v", alg, err)
	}
	return lim
}

// shared names alg's quota by its configuration (store.DefaultID, the
// state ID redisKey lays keys out by), for the tests' limiters configured
// alike that share it.
func shared(alg algorithm.Algorithm) ratelimit.Option {
	return ratelimit.WithName(store.DefaultID(alg.Spec()))
}

// epoch is where the tests' fake clocks start, with a fraction of a second.
var epoch = time.UnixMicro(1_700_000_000_654_321)

// RedisKey returns the Redis key a store with prefix keeps key's state in
// for a Limiter of alg.
func RedisKey(t testing.TB, prefix, key string, alg algorithm.Algorithm) string {
	t.Helper()
	st, err := redisstore.New[string](noRunner{}, redisstore.WithPrefix[string](prefix))
	if err != nil {
		t.Fatalf("redisstore.New(prefix %q): %v", prefix, err)
	}
	opened, err := st.Open(store.LimitsOf(alg), clock.Local())
	if err != nil {
		t.Fatalf("Open(prefix %q): %v", prefix, err)
	}
	table := opened.(*redisstore.Table[string])
	names, err := table.Keys(nil, key)
	if err != nil {
		t.Fatalf("Keys(%q): %v", key, err)
	}
	if tag, _ := algorithm.TagOf(alg); keepsLog(tag) {
		return names[1] // its sorted set
	}
	return names[0] // the key's hash
}

// keepsLog reports whether a state of tag's Kind keeps a Log, in a sorted
// set of its own.
func keepsLog(tag algorithm.Tag) bool {
	k, ok := algorithm.KindOf(tag.Kind)
	return ok && k.Log
}

// noRunner runs nothing: a store over it names keys (Table.Keys).
type noRunner struct{}

func (noRunner) Eval(context.Context, *redisstore.Script, bool, []string, redisstore.Args, []int64) ([]int64, error) {
	return nil, nil
}

func (noRunner) EvalStrings(context.Context, *redisstore.Script, []string, []string) ([]string, error) {
	return nil, nil
}

func (noRunner) Del(context.Context, []string) error { return nil }

// forEachMaster calls f with a client of every master of target (the one
// server when it is not a cluster), one at a time.
func forEachMaster(ctx context.Context, t testing.TB, admin redis.UniversalClient, f func(c redis.Cmdable) error) {
	t.Helper()
	cc, ok := admin.(*redis.ClusterClient)
	if !ok {
		if err := f(admin); err != nil {
			t.Fatal(err)
		}
		return
	}
	var mu sync.Mutex
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		return f(c)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// keysUnder returns every key starting with prefix, sorted.
func keysUnder(ctx context.Context, t testing.TB, admin redis.UniversalClient, prefix string) []string {
	t.Helper()
	var keys []string
	forEachMaster(ctx, t, admin, func(c redis.Cmdable) error {
		it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		return it.Err()
	})
	slices.Sort(keys)
	return keys
}

// pttl returns PTTL key in milliseconds (-2: no key, -1: no TTL).
func pttl(ctx context.Context, t testing.TB, admin redis.UniversalClient, key string) int64 {
	t.Helper()
	ms, err := admin.Do(ctx, "pttl", key).Int64()
	if err != nil {
		t.Fatalf("PTTL %q: %v", key, err)
	}
	return ms
}

// value returns a printable copy of key's value, "none" when it is
// missing; a hash's fields Folded.
func value(ctx context.Context, t testing.TB, admin redis.UniversalClient, key string) string {
	t.Helper()
	typ, err := admin.Type(ctx, key).Result()
	if err != nil {
		t.Fatalf("TYPE %q: %v", key, err)
	}
	switch typ {
	case "none":
		return "none"
	case "string":
		v, err := admin.Get(ctx, key).Result()
		if err != nil {
			t.Fatalf("GET %q: %v", key, err)
		}
		return "string " + v
	case "zset":
		zs, err := admin.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatalf("ZRANGE %q: %v", key, err)
		}
		return fmt.Sprint("zset ", zs)
	case "hash":
		h, err := FoldedHash(ctx, admin, key)
		if err != nil {
			t.Fatalf("HGETALL %q: %v", key, err)
		}
		return fmt.Sprintf("hash %q", h)
	}
	t.Fatalf("key %q has type %s, which no script writes", key, typ)
	return ""
}

// pass lets d pass for the target's TTLs: real time, or miniredis's
// FastForward, since miniredis TTLs do not move on their own.
func pass(target Target, d time.Duration) {
	if target.Mini != nil {
		target.Mini.FastForward(d)
		return
	}
	time.Sleep(d)
}

// ceilMillis returns d in milliseconds, rounded up.
func ceilMillis(d time.Duration) int64 {
	return int64(math.Ceil(float64(d) / float64(time.Millisecond)))
}

// testTTL checks that every key written has a TTL of its last ResetAfter,
// rounded up to the millisecond, and that denials and peeks write nothing.
func testTTL(t *testing.T, newStore NewStore) {
	Each(t, func(t *testing.T, target Target) {
		admin := GoRedis(t, target)
		for _, a := range algorithms(t, 5, 61234567*time.Microsecond) {
			t.Run(a.name, func(t *testing.T) {
				prefix := Prefix(t)
				clk := clock.NewFake(epoch)
				tag, _ := algorithm.TagOf(a.alg)
				c := &ttlCase{t: t, target: target, admin: admin, a: a, tag: tag, prefix: prefix, written: map[string]ttlWrite{},
					lim: newLimiter(t, a.alg, newStore(t, target, prefix), ratelimit.WithClock(clk))}
				c.take("a", 1)
				clk.Advance(100 * time.Millisecond)
				c.take("a", 2)
				c.take("b", 4)
				clk.Advance(333*time.Millisecond + 7*time.Microsecond)
				c.take("c", 1)
				c.take("b", 1)
				c.take("full", 5)
				if d := c.take("full", 1); d.Allowed() {
					t.Fatalf("AllowN(full, 1) after 5 of 5 at the same instant: allowed, want denied")
				}
				c.peek("a")
				if d := c.peek("unseen"); d.Remaining() != 5 || !d.Allowed() {
					t.Fatalf("Peek(unseen) = %+v, want a fresh key", d)
				}
				c.checkWritten()
				c.checkUnchanged()
				c.checkMargin(newStore, clk)
			})
		}
	})
}

// ttlWrite is testTTL's record of a key's last write.
type ttlWrite struct {
	reset time.Duration // the ResetAfter of the last admitted request
	sent  time.Time     // when it was sent: the server wrote the TTL after
}

// ttlCase is testTTL's limiter of one algorithm on one target, and the
// writes it made.
type ttlCase struct {
	t       *testing.T
	target  Target
	admin   redis.UniversalClient
	a       algo
	tag     algorithm.Tag
	prefix  string
	lim     *ratelimit.Limiter[string]
	written map[string]ttlWrite
}

// take takes n for key, and records the write when it is admitted.
func (c *ttlCase) take(key string, n int) ratelimit.Decision {
	t := c.t
	t.Helper()
	sent := time.Now()
	d, err := c.lim.AllowN(t.Context(), key, n)
	if err != nil {
		t.Fatalf("AllowN(%q, %d): %v", key, n, err)
	}
	if d.Allowed() {
		// A hash's TTL is the longest any write asked for (PEXPIRE GT): a
		// later, shorter one leaves it.
		k := RedisKey(t, c.prefix, key, c.a.alg)
		if w, ok := c.written[k]; !ok || keepsLog(c.tag) || sent.Add(d.ResetAfter()).After(w.sent.Add(w.reset)) {
			c.written[k] = ttlWrite{d.ResetAfter(), sent}
		}
	}
	return d
}

// peek peeks at key.
func (c *ttlCase) peek(key string) ratelimit.Decision {
	c.t.Helper()
	d, err := c.lim.Peek(c.t.Context(), key)
	if err != nil {
		c.t.Fatalf("Peek(%q): %v", key, err)
	}
	return d
}

// checkWritten checks that every key under the prefix is one written,
// with its TTL.
func (c *ttlCase) checkWritten() {
	t, ctx := c.t, c.t.Context()
	var want []string
	for k := range c.written {
		want = append(want, k)
	}
	slices.Sort(want)
	if got := keysUnder(ctx, t, c.admin, c.prefix); !slices.Equal(got, want) {
		t.Fatalf("keys under %q: got %q, want %q (a peek must create nothing)", c.prefix, got, want)
	}
	for _, k := range want {
		w := c.written[k]
		ms := pttl(ctx, t, c.admin, k)
		late := ceilMillis(time.Since(w.sent))
		if c.target.Mini != nil {
			late = 0 // miniredis TTLs stand still
		}
		ttl := ceilMillis(w.reset)
		if ms <= 0 || ms > ttl+1 || ms < ttl-late-1 {
			t.Errorf("PTTL %q = %dms, want the last ResetAfter %v rounded up, %dms, less the %dms since", k, ms, w.reset, ttl, late)
		}
	}
}

// checkUnchanged checks that a denial and a peek change neither the
// value nor the TTL.
func (c *ttlCase) checkUnchanged() {
	t, ctx := c.t, c.t.Context()
	for _, cc := range []struct {
		what string
		key  string
		call func() ratelimit.Decision
	}{
		{"denied AllowN(full, 1)", "full", func() ratelimit.Decision { return c.take("full", 1) }},
		{"Peek(full)", "full", func() ratelimit.Decision { return c.peek("full") }},
		{"Peek(a)", "a", func() ratelimit.Decision { return c.peek("a") }},
	} {
		k := RedisKey(t, c.prefix, cc.key, c.a.alg)
		start := time.Now()
		v0, ms0 := value(ctx, t, c.admin, k), pttl(ctx, t, c.admin, k)
		const gap = 30 * time.Millisecond
		pass(c.target, gap)
		if d := cc.call(); strings.HasPrefix(cc.what, "denied") && d.Allowed() {
			t.Fatalf("%s: allowed", cc.what)
		}
		v1, ms1 := value(ctx, t, c.admin, k), pttl(ctx, t, c.admin, k)
		late := ceilMillis(time.Since(start))
		if v1 != v0 {
			t.Errorf("%s changed the value of %q: was %s, now %s", cc.what, k, v0, v1)
		}
		if ms1 > ms0-gap.Milliseconds()+1 || ms1 < ms0-late-gap.Milliseconds()-1 {
			t.Errorf("%s changed the TTL of %q: %dms, then %dms after %v", cc.what, k, ms0, ms1, gap)
		}
	}
}

// checkMargin checks that a TTL margin, which Conformance and
// Differential use on real Redis, decides the same and only lengthens
// TTLs.
func (c *ttlCase) checkMargin(newStore NewStore, clk *clock.Fake) {
	t, ctx := c.t, c.t.Context()
	long := c.target
	long.TTLMargin = suiteTTL
	longPrefix := Prefix(t)
	longLim := newLimiter(t, c.a.alg, newStore(t, long, longPrefix), ratelimit.WithClock(clk))
	without := c.take("twin", 2) // on the first store, at the same instant
	with, err := longLim.AllowN(ctx, "twin", 2)
	if err != nil || with != without {
		t.Errorf("AllowN(twin, 2) with a TTL margin = %+v, %v; want %+v, as without", with, err, without)
	}
	if ms := pttl(ctx, t, c.admin, RedisKey(t, longPrefix, "twin", c.a.alg)); ms <= suiteTTL.Milliseconds() {
		t.Errorf("PTTL with a TTL margin of %v = %dms, want more than the margin", suiteTTL, ms)
	}
}

// testPeekReadOnly checks that Peek runs only read-only commands: an ACL
// user allowed EVALSHA_RO and EVAL_RO but neither EVALSHA nor EVAL can
// peek, with the script cache full or empty, and cannot take.
func testPeekReadOnly(t *testing.T, newStore NewStore) {
	srv := StartServer(t)
	ctx := t.Context()
	admin := GoRedis(t, srv.Target())
	err := admin.Do(ctx, "acl", "setuser", "peeker", "on", ">peeker-password", "~*", "resetchannels",
		"-@all", "+@connection", "+@read", "+time", "+evalsha_ro", "+eval_ro").Err()
	if err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	ro := srv.Target()
	ro.Username, ro.Password = "peeker", "peeker-password"
	for _, a := range algorithms(t, 5, time.Hour) {
		t.Run(a.name, func(t *testing.T) {
			prefix := Prefix(t)
			clk := clock.NewFake(epoch)
			rw := newLimiter(t, a.alg, newStore(t, srv.Target(), prefix), ratelimit.WithClock(clk))
			peeker := newLimiter(t, a.alg, newStore(t, ro, prefix), ratelimit.WithClock(clk))
			if _, err := rw.AllowN(ctx, "k", 2); err != nil {
				t.Fatalf("AllowN(k, 2) as the default user: %v", err)
			}
			want, err := rw.Peek(ctx, "k")
			if err != nil {
				t.Fatalf("Peek(k) as the default user: %v", err)
			}
			for _, flush := range []bool{false, true} {
				if flush {
					if err := admin.ScriptFlush(ctx).Err(); err != nil {
						t.Fatal(err)
					}
				}
				if got, err := peeker.Peek(ctx, "k"); err != nil || got != want {
					t.Errorf("Peek(k) as a read-only user (script cache flushed: %v) = %+v, %v; want %+v, nil", flush, got, err, want)
				}
				if got, err := peeker.Peek(ctx, "unseen"); err != nil || got != (ratelimit.DecisionFields{Allowed: true, Limit: 5, Remaining: 5}.Decision()) {
					t.Errorf("Peek(unseen) as a read-only user (script cache flushed: %v) = %+v, %v; want a fresh key", flush, got, err)
				}
			}
			_, err = peeker.Allow(ctx, "k")
			if !errors.Is(err, ratelimit.ErrStoreUnavailable) || !strings.Contains(err.Error(), "NOPERM") {
				t.Errorf("Allow(k) as a read-only user: %v, want ErrStoreUnavailable with NOPERM", err)
			}
			if got := keysUnder(ctx, t, admin, prefix); !slices.Equal(got, []string{RedisKey(t, prefix, "k", a.alg)}) {
				t.Errorf("keys under %q: %q, want only k's", prefix, got)
			}
		})
	}
}

// testScriptFlush checks that takes and peeks succeed after the server
// lost its script cache, and that the state survives.
func testScriptFlush(t *testing.T, newStore NewStore) {
	Each(t, func(t *testing.T, target Target) {
		ctx := t.Context()
		admin := GoRedis(t, target)
		for _, a := range algorithms(t, 5, time.Hour) {
			t.Run(a.name, func(t *testing.T) {
				flush := func() {
					t.Helper()
					forEachMaster(ctx, t, admin, func(c redis.Cmdable) error {
						// Not followed by a SCRIPT EXISTS check: other test
						// processes share this server and may load the script
						// again at once. The private servers of Restart and
						// PeekReadOnly see an empty cache for sure.
						return c.ScriptFlush(ctx).Err()
					})
				}
				lim := newLimiter(t, a.alg, newStore(t, target, Prefix(t)), ratelimit.WithClock(clock.NewFake(epoch)))
				steps := []struct {
					what      string
					call      func() (ratelimit.Decision, error)
					remaining int64
				}{
					{"AllowN(k, 2)", func() (ratelimit.Decision, error) { return lim.AllowN(ctx, "k", 2) }, 3},
					{"Peek(k)", func() (ratelimit.Decision, error) { return lim.Peek(ctx, "k") }, 3},
					{"AllowN(k, 1)", func() (ratelimit.Decision, error) { return lim.AllowN(ctx, "k", 1) }, 2},
					{"Peek(other)", func() (ratelimit.Decision, error) { return lim.Peek(ctx, "other") }, 5},
					{"Peek(k)", func() (ratelimit.Decision, error) { return lim.Peek(ctx, "k") }, 2},
				}
				for _, s := range steps {
					flush()
					d, err := s.call()
					if err != nil || !d.Allowed() || d.Remaining() != s.remaining {
						t.Fatalf("%s after SCRIPT FLUSH = %+v, %v; want allowed with Remaining %d", s.what, d, err, s.remaining)
					}
				}
			})
		}
	})
}

// testServerClock checks, on miniredis whose TIME the test sets, that
// with clock.Server() every algorithm decides at the server's time:
// exactly as the memory store does on a fake clock showing that time,
// while the Limiter's own clock reads today. Only takes: miniredis refuses
// TIME in EVALSHA_RO scripts (it does not mark TIME read-only), so a
// server-clock Peek fails there; ServerClockShared checks such peeks on
// real Redis.
func testServerClock(t *testing.T, newStore NewStore) {
	target := Miniredis(t)
	t0 := time.Date(2001, 2, 3, 4, 5, 6, 250_000_000, time.UTC)
	steps := []struct {
		at   time.Duration // server time, from t0
		key  string
		cost int
	}{
		{0, "k", 1}, {0, "k", 2}, {0, "k", 1},
		{400 * time.Millisecond, "k", 1}, {400 * time.Millisecond, "k", 1},
		{1300 * time.Millisecond, "k", 3}, {1300 * time.Millisecond, "j", 2},
		{200 * time.Millisecond, "k", 1}, {200 * time.Millisecond, "j", 1}, // the server's clock steps back
		{2750 * time.Millisecond, "k", 2}, {2750 * time.Millisecond, "k", 2}, {2750 * time.Millisecond, "j", 1},
		{time.Hour, "j", 3},
	}
	ctx := t.Context()
	for _, a := range algorithms(t, 3, time.Second) {
		t.Run(a.name, func(t *testing.T) {
			server := newLimiter(t, a.alg, newStore(t, target, Prefix(t)), ratelimit.WithClock(clock.Server()))
			fake := clock.NewFake(t0)
			model := newLimiter(t, a.alg, memorystore.New[string](), ratelimit.WithClock(fake))
			for _, s := range steps {
				target.Mini.SetTime(t0.Add(s.at))
				fake.Set(t0.Add(s.at))
				got, err := server.AllowN(ctx, s.key, s.cost)
				if err != nil {
					t.Fatalf("server time t0+%v, AllowN(%q, %d): %v", s.at, s.key, s.cost, err)
				}
				if want, _ := model.AllowN(ctx, s.key, s.cost); got != want {
					t.Fatalf("server time t0+%v, AllowN(%q, %d): got %+v, want %+v (the memory store at that time)", s.at, s.key, s.cost, got, want)
				}
			}
		})
		// The same steps as AllowAll of the key and "all:"+key, in one
		// multi script call: its instants come from TIME, not from offsets.
		t.Run(a.name+"/AllowAll", func(t *testing.T) {
			server := newLimiter(t, a.alg, newStore(t, target, Prefix(t)), ratelimit.WithClock(clock.Server()))
			fake := clock.NewFake(t0)
			model := newLimiter(t, a.alg, memorystore.New[string](), ratelimit.WithClock(fake))
			for _, s := range steps {
				target.Mini.SetTime(t0.Add(s.at))
				fake.Set(t0.Add(s.at))
				got := []ratelimit.Request[string]{{Limiter: server, Key: s.key, N: s.cost}, {Limiter: server, Key: "all:" + s.key, N: 1}}
				want := []ratelimit.Request[string]{{Limiter: model, Key: s.key, N: s.cost}, {Limiter: model, Key: "all:" + s.key, N: 1}}
				gotOK, err := ratelimit.AllowAll(ctx, got)
				if err != nil {
					t.Fatalf("server time t0+%v, AllowAll(%q, %d): %v", s.at, s.key, s.cost, err)
				}
				wantOK, _ := ratelimit.AllowAll(ctx, want)
				if gotOK != wantOK || got[0].Decision != want[0].Decision || got[1].Decision != want[1].Decision {
					t.Fatalf("server time t0+%v, AllowAll(%q, %d): got %v %+v %+v, want %v %+v %+v (the memory store at that time)",
						s.at, s.key, s.cost, gotOK, got[0].Decision, got[1].Decision, wantOK, want[0].Decision, want[1].Decision)
				}
			}
		})
	}
}

// testServerClockShared checks that two tables opened with clock.Server()
// share a key correctly while the instants they are handed disagree by
// hours: the server's TIME decides, not the caller's clock. Refill during
// the test is negligible (10 per 1000 hours).
func testServerClockShared(t *testing.T, newStore NewStore) {
	Each(t, func(t *testing.T, target Target) {
		ctx := t.Context()
		for _, a := range algorithms(t, 10, 1000*time.Hour) {
			t.Run(a.name, func(t *testing.T) {
				prefix := Prefix(t)
				open := func() store.Table[string] {
					table, err := newStore(t, target, prefix).Open(store.LimitsOf(a.alg), clock.Server())
					if err != nil {
						t.Fatalf("Open(%v, clock.Server()): %v", a.alg, err)
					}
					return table
				}
				ta, tb := open(), open()
				clkA := clock.NewFake(epoch)
				clkB := clock.NewFake(epoch.Add(-3 * time.Hour))
				var lastA, lastB algorithm.Result
				type step struct {
					who       string
					cost      int64 // 0 to peek
					allowed   bool
					remaining int64
				}
				for i, s := range []step{
					{"A", 4, true, 6}, {"B", 3, true, 3}, {"A", 0, true, 3}, {"B", 4, false, 3},
					{"A", 3, true, 0}, {"B", 0, false, 0}, {"A", 1, false, 0}, {"B", 1, false, 0},
				} {
					table, clk, last := ta, clkA, &lastA
					if s.who == "B" {
						table, clk, last = tb, clkB, &lastB
					}
					if s.cost == 0 && target.Mini != nil {
						continue // miniredis refuses TIME in read-only scripts
					}
					clk.Advance(time.Duration(i) * 17 * time.Minute)
					now := clk.Now().UnixMicro()
					var r algorithm.Result
					var err error
					if s.cost == 0 {
						r, err = table.Peek(ctx, "shared", now, nil)
					} else {
						r, err = table.Take(ctx, "shared", now, s.cost, nil)
					}
					if err != nil || r.Allowed() != s.allowed || r.Remaining != s.remaining {
						t.Fatalf("step %d: %s cost %d = %+v, %v; want allowed=%v remaining=%d", i, s.who, s.cost, r, err, s.allowed, s.remaining)
					}
					*last = r
				}
				// Both saw the same state at (nearly) the same server time.
				if diff := time.Duration(lastA.ResetAfter-lastB.ResetAfter) * time.Microsecond; diff.Abs() > 10*time.Second {
					t.Errorf("ResetAfter: A %dµs, B %dµs; want them within seconds of each other", lastA.ResetAfter, lastB.ResetAfter)
				}
			})
		}
	})
}

// testClusterSlots checks on the real cluster that keys with braces work
// and land in the slot of their whole encoded key.
func testClusterSlots(t *testing.T, newStore NewStore) {
	target := Cluster(t)
	ctx := t.Context()
	admin := GoRedis(t, target)
	prefix := Prefix(t)
	alg := algorithms(t, 3, time.Hour)[3].alg
	lim := newLimiter(t, alg, newStore(t, target, prefix), ratelimit.WithClock(clock.NewFake(epoch)))
	keys := []string{"a}b", "a", "}b", "{", "}", "{}", "}{", "{a}", "x{y}z", "{a}b", "a{b}", `\`, `\)`, `\}`, "\\\\)", "", "\x00", "a\x00}", "\xff{\xfe}", "{{}}"}
	seen := map[string]string{}
	for _, key := range keys {
		d, err := lim.Allow(ctx, key)
		if err != nil || d.Remaining() != 2 {
			t.Fatalf("Allow(%q) = %+v, %v; want allowed with Remaining 2 (every key is new)", key, d, err)
		}
		full := RedisKey(t, prefix, key, alg)
		if other, dup := seen[full]; dup {
			t.Fatalf("keys %q and %q share the Redis key %q", other, key, full)
		}
		seen[full] = key
		encoded := full[len(prefix)+1 : strings.LastIndexByte(full, '}')]
		slot, err := admin.ClusterKeySlot(ctx, full).Result()
		if err != nil {
			t.Fatal(err)
		}
		want := slot
		if encoded != "" {
			if want, err = admin.ClusterKeySlot(ctx, encoded).Result(); err != nil {
				t.Fatal(err)
			}
		}
		if slot != want {
			t.Errorf("key %q: %q is in slot %d, want %d, the slot of its whole encoded key %q", key, full, slot, want, encoded)
		}
		if n, err := admin.Exists(ctx, full).Result(); err != nil || n != 1 {
			t.Errorf("key %q: EXISTS %q (slot %d) = %d, %v; want 1", key, full, slot, n, err)
		}
	}
	if got := len(keysUnder(ctx, t, admin, prefix)); got != len(keys) {
		t.Errorf("%d keys under the prefix, want %d", got, len(keys))
	}
}

// unknownAlgorithm is an algorithm no store has a script for: it admits
// everything, in Go.
type unknownAlgorithm struct{}

func (unknownAlgorithm) Limit() int64                                { return 1 }
func (unknownAlgorithm) Init(algorithm.State, int64) algorithm.State { return algorithm.State{} }
func (unknownAlgorithm) Spec() algorithm.Spec                        { return algorithm.Spec{Name: "no-such-algorithm"} }
func (unknownAlgorithm) String() string                              { return "unknownAlgorithm" }
func (unknownAlgorithm) Take(s algorithm.State, _, _ int64) (algorithm.State, algorithm.Result) {
	return s, algorithm.Result{}
}
func (unknownAlgorithm) Peek(algorithm.State, int64, int64) algorithm.Result {
	return algorithm.Fresh(1)
}

func testUnsupportedAlgorithm(t *testing.T, newStore NewStore) {
	target := Miniredis(t)
	st := newStore(t, target, Prefix(t))
	if _, err := st.Open(store.LimitsOf(unknownAlgorithm{}), clock.Local()); !errors.Is(err, store.ErrAlgorithmUnsupported) {
		t.Errorf("Open(unknown algorithm): %v, want ErrAlgorithmUnsupported", err)
	}
	if _, err := ratelimit.New[string](unknownAlgorithm{}, st, ratelimit.WithName("unknown")); !errors.Is(err, store.ErrAlgorithmUnsupported) {
		t.Errorf("ratelimit.New(unknown algorithm): %v, want ErrAlgorithmUnsupported", err)
	}
}

// testStateIDs checks how names lay out state under one prefix: limiters
// of two names share nothing, limiters of one name share each key's state
// from any store value (as two processes have), across a change of
// configuration, which carries what was used (algorithm.AsIs, or
// Proportional); a name is a field of the key's hash; a name with a brace,
// and the empty name, are refused.
func testStateIDs(t *testing.T, newStore NewStore) {
	Each(t, func(t *testing.T, target Target) {
		ctx := t.Context()
		prefix := Prefix(t)
		st := newStore(t, target, prefix)
		clk := ratelimit.WithClock(clock.NewFake(epoch))
		big := algorithms(t, 100, time.Hour)[0].alg
		small := algorithms(t, 2, time.Hour)[0].alg
		drain := func(lim *ratelimit.Limiter[string], key string) {
			t.Helper()
			for {
				d, err := lim.Allow(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed() {
					return
				}
			}
		}
		// Two names: nothing shared.
		drain(newLimiter(t, small, st, clk, ratelimit.WithName("small")), "k")
		if d, err := newLimiter(t, big, st, clk, ratelimit.WithName("big")).Allow(ctx, "k"); err != nil || d.Remaining() != 99 {
			t.Errorf("a 100-token bucket of another name after a 2-token bucket drained the key: %+v, %v; want remaining 99 (a quota of its own)", d, err)
		}
		// One name, in another process: shared.
		if d, err := newLimiter(t, small, newStore(t, target, prefix), clk, ratelimit.WithName("small")).Allow(ctx, "k"); err != nil || d.Allowed() {
			t.Errorf("a 2-token bucket of the same name in another process on the drained key: %+v, %v; want denied (one quota)", d, err)
		}
		// One name across a change of configuration, which carries what
		// was used (algorithm.AsIs): the 2 tokens used stay used, 98 of
		// 100 remain.
		drain(newLimiter(t, small, st, clk, ratelimit.WithName("api")), "n")
		if d, err := newLimiter(t, big, st, clk, ratelimit.WithName("api")).Peek(ctx, "n"); err != nil || d.Remaining() != 98 {
			t.Errorf("a 100-token bucket named as a drained 2-token bucket: %+v, %v; want remaining 98 (2 used)", d, err)
		}
		if d, err := newLimiter(t, big, st, clk, ratelimit.WithName("api"), ratelimit.WithInheritance(algorithm.Proportional)).Peek(ctx, "n"); err != nil || d.Remaining() != 0 {
			t.Errorf("a 100-token bucket named as a drained 2-token bucket, proportional: %+v, %v; want remaining 0 (all used)", d, err)
		}
		// The name is a field of the key's hash, not a key of its own.
		if _, err := newLimiter(t, small, st, clk, ratelimit.WithName("field")).Allow(ctx, "old"); err != nil {
			t.Fatal(err)
		}
		admin := GoRedis(t, target)
		if n, err := admin.Exists(ctx, prefix+"{old}").Result(); err != nil || n != 0 {
			t.Errorf("EXISTS %s{old} = %d, %v; want no key of the layout before state IDs", prefix, n, err)
		}
		if n, err := admin.HExists(ctx, prefix+"{old}#", "field").Result(); err != nil || !n {
			t.Errorf("HEXISTS %s{old}# field = %v, %v; want the field", prefix, n, err)
		}
		for _, name := range []string{"a{b", ""} {
			if _, err := ratelimit.New(small, st, ratelimit.WithName(name)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("WithName(%q): %v, want ErrInvalidConfig", name, err)
			}
		}
	})
}

// testPolicyOneCall checks that a decision of a two-limit policy is one
// script call (INFO commandstats of a private server, which no other test
// uses) and that a key's limits share a cluster slot.
func testPolicyOneCall(t *testing.T, newStore NewStore) {
	// Periods of hours: no key expires while the test counts them.
	a, b := algorithms(t, 10, time.Hour)[0].alg, algorithms(t, 1000, 2*time.Hour)[2].alg
	limits := []ratelimit.Limit{{Name: "burst", Algorithm: a}, {Name: "hourly", Algorithm: b}}
	decide := func(t *testing.T, target Target, prefix string, n int) {
		p, err := ratelimit.NewPolicy(newStore(t, target, prefix), limits, ratelimit.WithName("one-call"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if _, err := p.Allow(t.Context(), fmt.Sprint("u", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("Calls", func(t *testing.T) {
		srv := StartServer(t)
		decide(t, srv.Target(), Prefix(t), 1) // loads the script
		admin := GoRedis(t, srv.Target())
		before := scriptCalls(t.Context(), t, admin)
		const n = 50
		decide(t, srv.Target(), Prefix(t), n)
		if got := scriptCalls(t.Context(), t, admin) - before; got != n {
			t.Errorf("%d decisions of a two-limit policy made %d script calls, want %d", n, got, n)
		}
	})
	Each(t, func(t *testing.T, target Target) {
		ctx := t.Context()
		prefix := Prefix(t)
		const n = 20
		decide(t, target, prefix, n)
		admin := GoRedis(t, target)
		keys := keysUnder(ctx, t, admin, prefix)
		if len(keys) != 2*n {
			t.Errorf("%d keys under the prefix, want %d (two limits × %d keys)", len(keys), 2*n, n)
		}
		if !target.Cluster {
			return
		}
		slots := map[string]int64{}
		for _, k := range keys {
			slot, err := admin.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			user := k[:strings.LastIndexByte(k, '}')]
			if prev, ok := slots[user]; ok && prev != slot {
				t.Errorf("the keys of %s are in slots %d and %d, want one", user, prev, slot)
			}
			slots[user] = slot
		}
	})
}

// scriptCalls returns how many EVALSHA and EVAL calls the target's
// servers have run, summed over every master.
func scriptCalls(ctx context.Context, t *testing.T, admin redis.UniversalClient) int64 {
	t.Helper()
	var total atomic.Int64
	count := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
					n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
					total.Add(n)
				}
			}
		}
		return nil
	}
	var err error
	if cc, ok := admin.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, count)
	} else {
		err = count(ctx, admin.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	return total.Load()
}
