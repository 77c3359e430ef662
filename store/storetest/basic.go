package storetest

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

const (
	// basicLimit is the limit of the algorithms in the fixed scenarios.
	basicLimit = 5
	// readsBeforeReset is how many times ResetAfterExact peeks at a key a
	// microsecond before it is fresh.
	readsBeforeReset = 100
)

// fixture is a limiter on a fake clock over the store under test, with
// helpers that fail the test on any error.
type fixture struct {
	t     *testing.T
	kind  kind
	lim   *ratelimit.Limiter[string]
	clk   *clock.Fake
	limit int64
}

func newFixture(t *testing.T, k kind, limit int64, st store.Store[string]) *fixture {
	t.Helper()
	alg, err := k.withLimit(limit)
	if err != nil {
		t.Fatalf("%s config with limit %d: %v", k.name, limit, err)
	}
	clk := clock.NewFake(time.UnixMicro(epoch))
	lim, err := ratelimit.New(alg, st, ratelimit.WithName(k.name), ratelimit.WithClock(clk))
	if err != nil {
		t.Fatalf("ratelimit.New(%v, store, fake clock): %v", alg, err)
	}
	return &fixture{t: t, kind: k, lim: lim, clk: clk, limit: limit}
}

// at is the fake clock's time since the start, for messages.
func (f *fixture) at() time.Duration { return f.clk.Now().Sub(time.UnixMicro(epoch)) }

func (f *fixture) advance(d time.Duration) { f.clk.Advance(d) }

// allow calls AllowN and checks the decision's sanity.
func (f *fixture) allow(key string, n int64) ratelimit.Decision {
	f.t.Helper()
	d, err := f.lim.AllowN(f.t.Context(), key, int(n))
	if err != nil {
		f.t.Fatalf("AllowN(%q, %d) at +%v: %v", short(key), n, f.at(), err)
	}
	if err := sanity(d, f.limit, n); err != nil {
		f.t.Fatalf("AllowN(%q, %d) at +%v = %s: %v", short(key), n, f.at(), show(d), err)
	}
	return d
}

// peek calls Peek and checks the decision's sanity.
func (f *fixture) peek(key string) ratelimit.Decision {
	f.t.Helper()
	d, err := f.lim.Peek(f.t.Context(), key)
	if err != nil {
		f.t.Fatalf("Peek(%q) at +%v: %v", short(key), f.at(), err)
	}
	if err := sanity(d, f.limit, 0); err != nil {
		f.t.Fatalf("Peek(%q) at +%v = %s: %v", short(key), f.at(), show(d), err)
	}
	return d
}

func (f *fixture) reset(key string) {
	f.t.Helper()
	if err := f.lim.Reset(f.t.Context(), key); err != nil {
		f.t.Fatalf("Reset(%q): %v", short(key), err)
	}
}

// expect fails the test unless got equals want.
func (f *fixture) expect(what string, got, want ratelimit.Decision) {
	f.t.Helper()
	if got != want {
		f.t.Fatalf("%s at +%v: got %s, want %s", what, f.at(), show(got), show(want))
	}
}

// short abbreviates long keys in messages.
func short(key string) string {
	if len(key) > 40 {
		return key[:16] + "…(" + strconv.Itoa(len(key)) + " bytes)…" + key[len(key)-8:]
	}
	return key
}

// basicCases are the fixed scenarios each algorithm runs, on a limit of
// basicLimit.
var basicCases = []struct {
	name string
	run  func(f *fixture)
}{
	{"NewKeyAllowed", testNewKeyAllowed},
	{"PeekUnseenKey", testPeekUnseenKey},
	{"DeniedChangesNothing", testDeniedChangesNothing},
	{"ResetAfterExact", testResetAfterExact},
	{"Reset", testReset},
	{"KeysIndependent", testKeysIndependent},
	{"HostileKeys", testHostileKeys},
	{"KeyTooLong", testKeyTooLong},
	{"InvalidCost", testInvalidCost},
}

func testNewKeyAllowed(f *fixture) {
	d := f.allow("k", 2)
	if !d.Allowed() || d.Remaining() != f.limit-2 || d.RetryAfter() != 0 || d.ResetAfter() <= 0 {
		f.t.Fatalf("AllowN(k, 2) on a new key: got %s, want {allowed remaining=%d/%d retry=0µs reset>0}",
			show(d), f.limit-2, f.limit)
	}
	d = f.allow("other", 1)
	if !d.Allowed() || d.Remaining() != f.limit-1 {
		f.t.Fatalf("Allow(other) on a new key: got %s, want allowed with remaining=%d", show(d), f.limit-1)
	}
}

func testPeekUnseenKey(f *fixture) {
	f.expect("Peek(k) on an unseen key", f.peek("k"), fresh(f.limit))
	f.expect("Peek(k) again", f.peek("k"), fresh(f.limit))
	f.advance(time.Hour)
	f.expect("Peek(k) an hour later", f.peek("k"), fresh(f.limit))
	// Peek consumed nothing: the whole limit is still there.
	d := f.allow("k", f.limit)
	if !d.Allowed() || d.Remaining() != 0 {
		f.t.Fatalf("AllowN(k, %d) after Peeks: got %s, want allowed with remaining=0", f.limit, show(d))
	}
}

func testDeniedChangesNothing(f *fixture) {
	f.allow("k", f.limit-1)
	before := f.peek("k")
	if before.Remaining() != 1 {
		f.t.Fatalf("Peek(k) after AllowN(k, %d): got %s, want remaining=1", f.limit-1, show(before))
	}
	d := f.allow("k", 2)
	if d.Allowed() || d.Remaining() != 1 || d.RetryAfter() <= 0 {
		f.t.Fatalf("AllowN(k, 2) with 1 remaining: got %s, want denied with remaining=1 and retry>0", show(d))
	}
	f.expect("Peek(k) after a denied AllowN", f.peek("k"), before)
	retry := d.RetryAfter()

	f.advance(retry - time.Microsecond)
	early := f.allow("k", 2)
	if early.Allowed() || early.RetryAfter() != time.Microsecond {
		f.t.Fatalf("AllowN(k, 2) 1µs before the RetryAfter %v of the denial: got %s, want denied with retry=1µs",
			retry, show(early))
	}
	f.advance(time.Microsecond)
	if d := f.allow("k", 2); !d.Allowed() {
		f.t.Fatalf("AllowN(k, 2) exactly RetryAfter %v after the denial: got %s, want allowed", retry, show(d))
	}
}

func testResetAfterExact(f *fixture) {
	check := func(key string, reset time.Duration) {
		f.t.Helper()
		if reset <= 0 {
			f.t.Fatalf("ResetAfter of %s: got %v, want > 0", key, reset)
		}
		f.advance(reset - time.Microsecond)
		// Many times: a store that sweeps or expires keys as it goes may
		// act on any of the calls.
		for i := range readsBeforeReset {
			d := f.peek(key)
			if d.Remaining() == f.limit || d.ResetAfter() != time.Microsecond {
				f.t.Fatalf("Peek(%s) #%d 1µs before its ResetAfter %v: got %s, want remaining<%d and reset=1µs",
					key, i+1, reset, show(d), f.limit)
			}
		}
		f.advance(time.Microsecond)
		f.expect("Peek("+key+") exactly ResetAfter "+reset.String()+" later", f.peek(key), fresh(f.limit))
		if d := f.allow(key, f.limit); !d.Allowed() {
			f.t.Fatalf("AllowN(%s, %d) once fresh: got %s, want allowed", key, f.limit, show(d))
		}
	}
	// After an admitted request.
	check("a", f.allow("a", 2).ResetAfter())
	// After a denied one, which reports the same instant.
	f.allow("b", f.limit)
	d := f.allow("b", 1)
	if d.Allowed() {
		f.t.Fatalf("Allow(b) with nothing left: got %s, want denied", show(d))
	}
	check("b", d.ResetAfter())
}

func testReset(f *fixture) {
	f.allow("k", f.limit)
	if d := f.allow("k", 1); d.Allowed() {
		f.t.Fatalf("Allow(k) with nothing left: got %s, want denied", show(d))
	}
	f.reset("k")
	f.expect("Peek(k) after Reset(k)", f.peek("k"), fresh(f.limit))
	if d := f.allow("k", f.limit); !d.Allowed() || d.Remaining() != 0 {
		f.t.Fatalf("AllowN(k, %d) after Reset(k): got %s, want allowed with remaining=0", f.limit, show(d))
	}
	f.reset("never-seen") // not an error
	f.expect("Peek(never-seen) after Reset(never-seen)", f.peek("never-seen"), fresh(f.limit))
}

func testKeysIndependent(f *fixture) {
	f.allow("alice", f.limit)
	f.expect("Peek(bob) after alice used everything", f.peek("bob"), fresh(f.limit))
	if d := f.allow("bob", 1); !d.Allowed() || d.Remaining() != f.limit-1 {
		f.t.Fatalf("Allow(bob) after alice used everything: got %s, want allowed with remaining=%d", show(d), f.limit-1)
	}
	if d := f.allow("alice", 1); d.Allowed() {
		f.t.Fatalf("Allow(alice) after bob's request: got %s, want denied", show(d))
	}
	f.reset("bob")
	if d := f.peek("alice"); d.Remaining() != 0 {
		f.t.Fatalf("Peek(alice) after Reset(bob): got %s, want remaining=0", show(d))
	}
}

// hostileKeys are keys that a store building its own keys by concatenation,
// hash tags, globs or C strings could confuse with one another. Glob-like
// keys come first, so that a Reset deleting by pattern is caught.
var hostileKeys = func() []string {
	long := strings.Repeat("k", store.DefaultMaxKeyBytes) // the longest a store must keep
	return []string{
		"*", "?", "[a]", "a*",
		"", "a", "b", "}b", "a}b", "a}", "{a}", "{a}b", "a{b}", "{x}", "x", "{}", "{", "}",
		":", "a:b", "a:", ":b", "a:b:", "a b", " a", "a\n", "\r\n\t",
		"\x00", "\x00\x00", "a\x00", "a\x00b", "\x00a",
		"\xff", "\xff\xfe", "\xc3\x28", "\xed\xa0\x80", "日本", "%s%d", "\\", "'\"",
		long, long[:len(long)-1] + "l", "l" + long[1:],
	}
}()

func testHostileKeys(f *fixture) {
	// Use up each key: one that shares state with an earlier key is denied.
	for _, key := range hostileKeys {
		if d := f.allow(key, f.limit); !d.Allowed() || d.Remaining() != 0 {
			f.t.Fatalf("AllowN(%q, %d) on a new key after using up the keys before it: got %s, want allowed with remaining=0",
				short(key), f.limit, show(d))
		}
	}
	// Reset each in turn: the keys after it must still be used up.
	for i, key := range hostileKeys {
		if d := f.peek(key); d.Remaining() != 0 {
			f.t.Fatalf("Peek(%q) after resetting only the keys before it (%q last): got %s, want remaining=0",
				short(key), short(hostileKeys[max(i-1, 0)]), show(d))
		}
		f.reset(key)
		f.expect("Peek("+short(key)+") after its Reset", f.peek(key), fresh(f.limit))
	}
}

// testKeyTooLong: a key longer than store.DefaultMaxKeyBytes is either
// kept like any other or refused with ErrKeyTooLong by Allow, Peek and
// Reset alike; a refused key leaves no state, and the keys that share its
// first DefaultMaxKeyBytes bytes are not touched.
func testKeyTooLong(f *fixture) {
	long := strings.Repeat("k", store.DefaultMaxKeyBytes)
	longer := long + "k"
	f.allow(long, f.limit)
	_, err := f.lim.AllowN(f.t.Context(), longer, 1)
	if err != nil {
		if !errors.Is(err, ratelimit.ErrKeyTooLong) || errors.Is(err, ratelimit.ErrStoreUnavailable) {
			f.t.Fatalf("AllowN of a key of %d bytes: %v; want it kept, or ErrKeyTooLong (not ErrStoreUnavailable)", len(longer), err)
		}
		if _, err := f.lim.Peek(f.t.Context(), longer); !errors.Is(err, ratelimit.ErrKeyTooLong) {
			f.t.Fatalf("Peek of a key of %d bytes that AllowN refused: %v; want ErrKeyTooLong", len(longer), err)
		}
		if err := f.lim.Reset(f.t.Context(), longer); !errors.Is(err, ratelimit.ErrKeyTooLong) {
			f.t.Fatalf("Reset of a key of %d bytes that AllowN refused: %v; want ErrKeyTooLong", len(longer), err)
		}
	} else {
		if d := f.peek(longer); d.Remaining() != f.limit-1 {
			f.t.Fatalf("Peek of a kept key of %d bytes after one request: got %s, want remaining=%d", len(longer), show(d), f.limit-1)
		}
	}
	if d := f.peek(long); d.Remaining() != 0 {
		f.t.Fatalf("Peek(%q) after a longer key's request: got %s, want remaining=0 (untouched)", short(long), show(d))
	}
}

func testInvalidCost(f *fixture) {
	for _, c := range []struct {
		cost int64
		want error
	}{
		{0, ratelimit.ErrInvalidCost},
		{-1, ratelimit.ErrInvalidCost},
		{f.limit + 1, ratelimit.ErrCostExceedsLimit},
	} {
		if _, err := f.lim.AllowN(f.t.Context(), "k", int(c.cost)); !errors.Is(err, c.want) {
			f.t.Fatalf("AllowN(k, %d): got error %v, want %v", c.cost, err, c.want)
		}
	}
	f.expect("Peek(k) after invalid costs", f.peek("k"), fresh(f.limit))
}
