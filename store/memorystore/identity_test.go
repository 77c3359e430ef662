package memorystore_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// A limit's state for a key is named by (state ID, key), in memory as on
// Redis: these tests check the sharing rule on the memory store.

func openID[K comparable](t testing.TB, s *memorystore.Store[K], alg algorithm.Algorithm, id string, reset bool) store.Table[K] {
	t.Helper()
	tab, err := s.Open([]store.Limit{{Algorithm: alg, ID: id, ResetOnMismatch: reset}}, clock.Local())
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// TestOpensAlikeShareState checks that two tables opened for limits
// configured alike (the same default state ID), from distinct algorithm
// values, share every key's state, Take, Peek and Reset alike.
func TestOpensAlikeShareState(t *testing.T) {
	s := memorystore.New[string]()
	a, b := open(t, s, mustBucket(t, 3, 1.0/3600)), open(t, s, mustBucket(t, 3, 1.0/3600))
	take(t, a, "k", t0, 2)
	if r := peek(t, b, "k", t0); r.Remaining != 1 {
		t.Errorf("b: Peek(k) = %+v, want 1 left: a took 2 of 3", r)
	}
	take(t, b, "k", t0, 1)
	if r := take(t, a, "k", t0, 1); r.Allowed() {
		t.Errorf("a: Take(k) = %+v, want denied: a and b spent the 3 together", r)
	}
	if got := s.Stats().Keys; got != 1 {
		t.Errorf("Stats().Keys = %d, want 1: one state for both", got)
	}
	if err := b.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if r := peek(t, a, "k", t0); r != algorithm.Fresh(3) {
		t.Errorf("a: Peek(k) after b's Reset = %+v, want fresh", r)
	}
}

// TestLimiterAndPolicyShareALimit checks that a Limiter and a Policy
// sharing a limit (the Limiter named as the Policy's limit: "api/hourly")
// on one store count the same requests, while the Policy's other limit is
// its own.
func TestLimiterAndPolicyShareALimit(t *testing.T) {
	fake := clock.NewFake(time.UnixMicro(t0))
	s := memorystore.New[string]()
	perHour := mustBucket(t, 5, 5.0/3600)
	lim, err := ratelimit.New(perHour, s, ratelimit.WithClock(fake), ratelimit.WithName("api/hourly"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := ratelimit.NewPolicy(s, []ratelimit.Limit{
		{Name: "burst", Algorithm: mustBucket(t, 100, 100)},
		{Name: "hourly", Algorithm: perHour},
	}, ratelimit.WithName("api"), ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if d, err := lim.Allow(ctx, "k"); err != nil || !d.Allowed() {
			t.Fatalf("Limiter request %d: %+v, %v; want allowed", i, d, err)
		}
	}
	d, err := pol.AllowN(ctx, "k", 2)
	if err != nil || !d.Allowed() || d.Limits()[1].Remaining() != 0 || d.Limits()[0].Remaining() != 98 {
		t.Fatalf("Policy.AllowN(k, 2) = %+v, %v; want allowed, 98 and 0 left", d, err)
	}
	if d, err := lim.Allow(ctx, "k"); err != nil || d.Allowed() {
		t.Errorf("Limiter after the Policy: %+v, %v; want denied: the 5 are spent", d, err)
	}
	if d, err := pol.Allow(ctx, "k"); err != nil || d.Allowed() || d.Binding() != 1 {
		t.Errorf("Policy after the Limiter: %+v, %v; want denied by its hourly limit", d, err)
	}
}

// TestLimiterPerRequestDecidesAsACachedOne is the case of issue 24: a
// Limiter built anew for each request, on one store, must enforce the
// limit as one built once does: 8 of 2,000 requests admitted, not 2,000.
// Limiters built apart share a quota only under one name: these name
// theirs (WithName).
func TestLimiterPerRequestDecidesAsACachedOne(t *testing.T) {
	fake := clock.NewFake(time.UnixMicro(t0))
	const requests = 2000
	newAlg := func() algorithm.Algorithm { return mustBucket(t, 8, 8.0/3600) }
	run := func(limiter func() *ratelimit.Limiter[string]) (admitted int, decisions []ratelimit.Decision) {
		for i := range requests {
			d, err := limiter().Allow(ctx, fmt.Sprint("user-", i%3))
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed() {
				admitted++
			}
			decisions = append(decisions, d)
		}
		return admitted, decisions
	}
	newLimiter := func(s *memorystore.Store[string]) *ratelimit.Limiter[string] {
		lim, err := ratelimit.New(newAlg(), s, ratelimit.WithClock(fake), ratelimit.WithName("per-request"))
		if err != nil {
			t.Fatal(err)
		}
		return lim
	}
	perRequestStore := memorystore.New[string]()
	got, gotDs := run(func() *ratelimit.Limiter[string] { return newLimiter(perRequestStore) })
	cached := newLimiter(memorystore.New[string]())
	want, wantDs := run(func() *ratelimit.Limiter[string] { return cached })
	if got != 3*8 || want != 3*8 {
		t.Errorf("admitted %d of %d with a Limiter per request and %d with one Limiter, want %d both", got, requests, want, 3*8)
	}
	for i := range gotDs {
		if gotDs[i] != wantDs[i] {
			t.Fatalf("request %d: a Limiter per request decided %+v, a cached one %+v", i, gotDs[i], wantDs[i])
		}
	}
}

// TestOtherAlgorithmUnderOneID plays every ordered pair of the six
// algorithms under one state ID: a key written by one is read by the
// other as its own fresh state charged with what that state had used (2
// of the writer's 5: 3 remain), whether it resets on mismatch or not, by
// Take and Peek; nothing stored changes until it admits, and its
// admission replaces the state, which the writer then reads carried in
// turn. Two algorithms configured alike share it.
func TestOtherAlgorithmUnderOneID(t *testing.T) {
	algs := hourly(t, 5)
	for wname, writer := range algs {
		for rname, reader := range algs {
			t.Run(wname+"/"+rname, func(t *testing.T) {
				s := memorystore.New[string]()
				w := openID(t, s, writer, "shared", false)
				take(t, w, "k", t0, 2)
				before := peek(t, w, "k", t0+1)
				r := openID(t, s, reader, "shared", false)
				if wname == rname {
					if got := take(t, r, "k", t0+1, 1); !got.Allowed() || got.Remaining != 2 {
						t.Errorf("the same algorithm: Take = %+v, want admitted with 2 left", got)
					}
					return
				}
				if got := take(t, r, "k", t0+1, 4); got.Allowed() {
					t.Errorf("Take 4 by %s of %s's state (2 used) = %+v, want denied", rname, wname, got)
				}
				for _, reset := range []bool{false, true} {
					if got := peek(t, openID(t, s, reader, "shared", reset), "k", t0+1); !got.Allowed() || got.Remaining != 3 {
						t.Errorf("Peek by %s (reset on mismatch %v) = %+v, want 3 left: the 2 used carry over", rname, reset, got)
					}
				}
				if after := peek(t, w, "k", t0+1); after != before {
					t.Errorf("%s's state after a denial and peeks by %s: %+v, want %+v", wname, rname, after, before)
				}
				if got := s.Stats().Keys; got != 1 {
					t.Errorf("Stats().Keys = %d, want 1", got)
				}
				if got := take(t, r, "k", t0+1, 1); !got.Allowed() || got.Remaining != 2 {
					t.Errorf("%s: Take = %+v, want admitted with 2 left, the 2 used carried", rname, got)
				}
				if got := take(t, r, "k", t0+1, 1); !got.Allowed() || got.Remaining != 1 {
					t.Errorf("%s after its admission carried: Take = %+v, want admitted with 1 left", rname, got)
				}
				if got := peek(t, w, "k", t0+1); got.Remaining != 1 {
					t.Errorf("%s on the state %s replaced: %+v, want the 4 used carried back, 1 left", wname, rname, got)
				}
			})
		}
	}
}

// TestOtherAlgorithmInAPolicy checks that a Policy whose second limit
// finds another algorithm's state under its ID reads it for what it had
// used, and that a Policy denied by it charges neither limit.
func TestOtherAlgorithmInAPolicy(t *testing.T) {
	algs := hourly(t, 5)
	s := memorystore.New[string]()
	w := openID(t, s, algs["fixedwindow"], "b", false)
	take(t, w, "k", t0, 4)
	pol, err := s.Open([]store.Limit{{Algorithm: algs["gcra"], ID: "a"}, {Algorithm: algs["tokenbucket"], ID: "b"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := pol.Take(ctx, "k", t0, 2, nil); err != nil || r.Allowed() {
		t.Fatalf("Policy Take of 2 with 4 of 5 used under b = %+v, %v; want denied", r, err)
	}
	if r, err := pol.Peek(ctx, "k", t0, nil); err != nil || r.Remaining != 1 {
		t.Errorf("Policy Peek = %+v, %v; want 1 left (the 4 used carried)", r, err)
	}
	if r := peek(t, openID(t, s, algs["gcra"], "a", false), "k", t0); r != algorithm.Fresh(5) {
		t.Errorf("the policy's first limit after the denial: %+v, want fresh", r)
	}
	if r := peek(t, w, "k", t0); r.Remaining != 1 {
		t.Errorf("the fixed window after the denial: %+v, want 1 left", r)
	}
}

// TestStandingDenialIsPerConfig checks that a denial recorded by one
// config is not the answer of another that reads the same state
// otherwise: a bucket of the same capacity (the same Tag), refilled
// faster, is admitted where the slow one stands denied.
func TestStandingDenialIsPerConfig(t *testing.T) {
	s := memorystore.New[string]()
	slow := openID(t, s, mustBucket(t, 1, 1.0/3600), "api", false)
	fast := openID(t, s, mustBucket(t, 1, 1000), "api", false)
	take(t, slow, "k", t0, 1)
	for range 3 { // denied, and the denial recorded for the next ones
		if r := take(t, slow, "k", t0+10, 1); r.Allowed() {
			t.Fatalf("slow: Take = %+v, want denied", r)
		}
	}
	if r := take(t, fast, "k", t0+2000, 1); !r.Allowed() {
		t.Errorf("fast, 2ms later: Take = %+v, want admitted: it refills a token per ms", r)
	}
	if r := take(t, slow, "k", t0+2000, 1); r.Allowed() {
		t.Errorf("slow after fast's admission: Take = %+v, want denied", r)
	}
}

// TestPoliciesInEveryOrderRace decides on a few hot keys from Limiters
// and Policies whose limits overlap in every order, at a cap small
// enough that new keys evict, so that entries are locked together in
// every combination while shards sweep and evict: nothing deadlocks, and
// (under -race) nothing races.
func TestPoliciesInEveryOrderRace(t *testing.T) {
	s := memorystore.New[int](memorystore.WithShards(2), memorystore.WithMaxKeys(64), memorystore.WithGrace(0))
	a, b, c := mustBucket(t, 50, 1000), mustBucket(t, 40, 2000), mustBucket(t, 30, 3000)
	var tabs []store.Table[int]
	for _, ids := range [][]string{{"a"}, {"b"}, {"a", "b"}, {"b", "a"}, {"c", "b", "a"}, {"a", "c"}} {
		var limits []store.Limit
		for _, id := range ids {
			alg := map[string]algorithm.Algorithm{"a": a, "b": b, "c": c}[id]
			limits = append(limits, store.Limit{Algorithm: alg, ID: id})
		}
		tab, err := s.Open(limits, nil)
		if err != nil {
			t.Fatal(err)
		}
		tabs = append(tabs, tab)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				tab := tabs[(g+i)%len(tabs)]
				key := i % 5
				if i%7 == 0 {
					key = 1000*g + i // new keys, at the cap
				}
				now := t0 + int64(i)
				switch i % 11 {
				case 0:
					tab.Peek(ctx, key, now, nil)
				case 1:
					tab.Reset(ctx, key)
				default:
					if _, err := tab.Take(ctx, key, now, 1, nil); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if st := s.Stats(); st.Keys > 64 {
		t.Errorf("Stats() = %+v: more than the cap", st)
	}
}

// TestManyLimitsCostLittle opens 10,000 limits configured differently on
// one store, each deciding for one key, and checks that each costs under
// 1 KB of heap beyond its key's entry: a handle and the numbers of its ID
// and config, not a table of its own. The limits' algorithms, which the
// caller holds anyway, are made before the first reading.
func TestManyLimitsCostLittle(t *testing.T) {
	if testing.Short() {
		t.Skip("heap measurements are slow")
	}
	const limits = 10_000
	algs := make([]algorithm.Algorithm, limits)
	for i := range algs {
		alg, err := tokenbucket.New(tokenbucket.Config{Capacity: int64(10 + i), Rate: 1})
		if err != nil {
			t.Fatal(err)
		}
		algs[i] = alg
	}
	tabs := make([]store.Table[int], limits)
	s := memorystore.New[int]()
	open(t, s, mustBucket(t, 1, 1)) // the store's table, made by the first Open
	before := heapInUse()
	for i, alg := range algs {
		tabs[i] = open(t, s, alg)
		take(t, tabs[i], i, t0, 1)
	}
	after := heapInUse()
	runtime.KeepAlive(tabs)
	runtime.KeepAlive(algs)
	// Each key's entry: 48 bytes in the arena, 4 in its shard's index
	// (kept at most 3/4 full, grown by doubling: under 11 bytes a key).
	const entry = 48 + 11
	perLimit := (float64(after) - float64(before)) / limits
	t.Logf("%d limits, one key each: %.0f bytes per limit, its key's entry (≤ %d) included", limits, perLimit, entry)
	if perLimit-entry > 1024 {
		t.Errorf("%.0f bytes per limit beyond its key's entry, want under 1 KB", perLimit-entry)
	}
}

// heapInUse returns the bytes of live heap objects after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// inheriting is a token bucket that converts states of its Kind, counting
// the conversions, and carries the tokens as they are.
type inheriting struct {
	*tokenbucket.Bucket
	calls *int
}

func (b inheriting) Inherit(from algorithm.Tag, s algorithm.State, now int64, rule algorithm.Rule) algorithm.State {
	*b.calls++
	return s
}

var _ algorithm.Inheritor = inheriting{}

// tagOnly is a token bucket that has a Tag but converts nothing.
type tagOnly struct{ b *tokenbucket.Bucket }

func (a tagOnly) Limit() int64                                        { return a.b.Limit() }
func (a tagOnly) Init(old algorithm.State, now int64) algorithm.State { return a.b.Init(old, now) }
func (a tagOnly) Take(s algorithm.State, now, cost int64) (algorithm.State, algorithm.Result) {
	return a.b.Take(s, now, cost)
}
func (a tagOnly) Peek(s algorithm.State, now, cost int64) algorithm.Result {
	return a.b.Peek(s, now, cost)
}
func (a tagOnly) Spec() algorithm.Spec { return a.b.Spec() }
func (a tagOnly) Tag() algorithm.Tag   { return a.b.Tag() }
func (a tagOnly) NarrowState()         {}

// TestSameKindIsInherited checks that a state of the same Kind under
// another Tag is converted by an algorithm.Inheritor on every read until
// an admission writes it back under the reader's config: a denial and a
// Peek leave it as it was. Without an Inheritor it is a mismatch.
func TestSameKindIsInherited(t *testing.T) {
	s := memorystore.New[string]()
	w := openID(t, s, mustBucket(t, 10, 1.0/3600), "api", false)
	take(t, w, "k", t0, 9) // 1 left
	if _, err := openID(t, s, tagOnly{mustBucket(t, 20, 1.0/3600)}, "api", false).Take(ctx, "k", t0, 1, nil); !errors.Is(err, store.ErrStateMismatch) {
		t.Errorf("a bucket of another capacity, no Inheritor: %v, want ErrStateMismatch", err)
	}
	calls := 0
	r := openID(t, s, inheriting{mustBucket(t, 30, 1.0/3600), &calls}, "api", false)
	if got := peek(t, r, "k", t0); got.Remaining != 1 || calls != 1 {
		t.Errorf("Peek = %+v after %d conversions, want 1 left after 1", got, calls)
	}
	if got := take(t, r, "k", t0, 2); got.Allowed() || calls != 2 {
		t.Errorf("Take(2) = %+v after %d conversions, want denied after 2", got, calls)
	}
	if got := peek(t, w, "k", t0); got.Remaining != 1 {
		t.Errorf("the writer after a Peek and a denial: %+v, want its state as it was (1 left)", got)
	}
	if got := take(t, r, "k", t0, 1); !got.Allowed() || calls != 3 {
		t.Errorf("Take(1) = %+v after %d conversions, want admitted after 3", got, calls)
	}
	if got := take(t, r, "k", t0, 1); got.Allowed() || calls != 3 {
		t.Errorf("Take(1) again = %+v after %d conversions, want denied on the state it wrote, no conversion", got, calls)
	}
}

// TestLimitChangedUnderOneID is issue 24's case on the memory store, for
// each algorithm: a limit of 100 an hour, 95 used, reopened as 10 an hour
// under the same state ID (a new process, a changed configuration), admits
// at most 5 more in the old window (none under the proportional rule
// would be granted fresh either), and a Limiter of the old limit still
// reads what it wrote until the new one admits.
func TestLimitChangedUnderOneID(t *testing.T) {
	old, tightened := hourly(t, 100), hourly(t, 10)
	for name := range old {
		t.Run(name, func(t *testing.T) {
			s := memorystore.New[string]()
			w := openID(t, s, old[name], "api", false)
			for i := range 95 {
				take(t, w, "k", t0+int64(i), 1)
			}
			r := openID(t, s, tightened[name], "api", false)
			if got := peek(t, r, "k", t0+100); got.Remaining > 5 {
				t.Errorf("Peek under the tightened limit = %+v, want at most 5 left", got)
			}
			if got := peek(t, w, "k", t0+100); got.Remaining != 5 {
				t.Errorf("the old limit after a Peek by the new one: %+v, want its 5 left", got)
			}
			admitted := 0
			for range 20 {
				if take(t, r, "k", t0+100, 1).Allowed() {
					admitted++
				}
			}
			if admitted > 5 {
				t.Errorf("the tightened limit admitted %d more in the old window, want at most 5", admitted)
			}
			if admitted > 0 {
				if _, err := w.Take(ctx, "k", t0+100, 1, nil); err != nil {
					t.Errorf("the old limit on the state the new one wrote: %v, want it read by inheritance", err)
				}
			}
		})
	}
}

// TestSweepUsesTheWritersConfig checks that a sweep drops a state when the
// config that wrote it says it has expired, not when a handle that only
// read it would: a bucket refilled in an hour keeps its spent key while a
// bucket of the same capacity refilled in a millisecond, which shares the
// state, has peeked at it.
func TestSweepUsesTheWritersConfig(t *testing.T) {
	s := memorystore.New[int](memorystore.WithShards(1), memorystore.WithGrace(0))
	slow := openID(t, s, mustBucket(t, 1, 1.0/3600), "api", false)
	fast := openID(t, s, mustBucket(t, 1, 1000), "api", false)
	take(t, slow, 0, t0, 1)
	if r := peek(t, fast, 0, t0+1_000_000); r != algorithm.Fresh(1) {
		t.Fatalf("fast: Peek a second later = %+v, want fresh: it refills a token per ms", r)
	}
	for k := 1; k <= 4*sweepMin; k++ { // new keys: the shard sweeps
		take(t, fast, k, t0+1_000_000, 1)
	}
	if r := peek(t, slow, 0, t0+1_000_000); r.Allowed() {
		t.Errorf("slow: Peek after the sweeps = %+v, want denied: its key was spent for an hour", r)
	}
}
