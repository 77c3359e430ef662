package redistest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// testTooManyStates gives one key limits of names of their own, twice as
// many as a key keeps: the key's hash
// never holds more than store.MaxStatesPerKey fields, and a Take (alone,
// coalesced, or in a Policy), a Reserve and a FailOpen Limiter's Take of a
// limit new to the full key fail with ErrTooManyStates, charging nothing,
// which the breaker does not count and no failure policy decides; its
// Peek reads a fresh state, the limits the key holds decide as ever, and
// other keys take the new limit.
func testTooManyStates(t *testing.T, newStore NewStore) {
	Each(t, func(t *testing.T, target Target) {
		t.Parallel()
		ctx := t.Context()
		prefix := Prefix(t)
		st := newStore(t, target, prefix)
		clk := clock.NewFake(epoch)
		limit := func(i int) algorithm.Algorithm { return tooManyLimit(t, i) }
		// Limiter i is the quota tm/i: limiter 3 is the limit "3" of
		// the Policy "tm".
		limiter := func(i int) *ratelimit.Limiter[string] {
			return newLimiter(t, limit(i), st, ratelimit.WithClock(clk), ratelimit.WithFailurePolicy(ratelimit.FailOpen),
				ratelimit.WithName(fmt.Sprint("tm/", i)))
		}
		admin := GoRedis(t, target)
		hkey := RedisKey(t, prefix, "k", limit(0))
		const limits = 2*store.MaxStatesPerKey + 50
		fillKey(t, limiter, limits)
		if n, err := admin.HLen(ctx, hkey).Result(); err != nil || n != store.MaxStatesPerKey {
			t.Errorf("HLEN %s = %d, %v after %d limits; want %d", hkey, n, err, limits, store.MaxStatesPerKey)
		}
		extra := limiter(limits)
		checkNewOnFull(t, extra, limits)
		held := limiter(3)
		if d, err := held.AllowN(ctx, "k", 2); err != nil || d.Remaining() != 10 {
			t.Errorf("a limit the full key holds: %+v, %v; want admitted, 10 left (13, 1 taken before)", d, err)
		}
		if d, err := extra.Allow(ctx, "other"); err != nil || !d.Allowed() {
			t.Errorf("the new limit on another key: %+v, %v; want admitted", d, err)
		}
		p, err := ratelimit.NewPolicy(st, []ratelimit.Limit{
			{Name: "3", Algorithm: limit(3)},
			{Name: "new", Algorithm: limit(limits + 1)},
		}, ratelimit.WithName("tm"), ratelimit.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := p.Allow(ctx, "k"); !errors.Is(err, ratelimit.ErrTooManyStates) {
			t.Errorf("a Policy of a held limit and a new one on the full key: %+v, %v; want ErrTooManyStates", d, err)
		}
		if d, err := held.Peek(ctx, "k"); err != nil || d.Remaining() != 10 {
			t.Errorf("the held limit after the refused Policy: %+v, %v; want 10 left: nothing charged", d, err)
		}
		if n, err := admin.HLen(ctx, hkey).Result(); err != nil || n != store.MaxStatesPerKey {
			t.Errorf("HLEN %s = %d, %v at the end; want %d", hkey, n, err, store.MaxStatesPerKey)
		}
	})
}

// tooManyLimit is testTooManyStates' limit i: a token bucket of capacity
// 10 + i.
func tooManyLimit(t *testing.T, i int) algorithm.Algorithm {
	alg, err := bucketPer(int64(10+i), time.Duration(10+i)*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return alg
}

// fillKey takes a request on key "k" through limiters limiters, each of a
// name of its own (FailOpen): the first store.MaxStatesPerKey are
// admitted, the others refused with ErrTooManyStates alone.
func fillKey(t *testing.T, limiter func(i int) *ratelimit.Limiter[string], limits int) {
	refused := 0
	for i := range limits {
		d, err := limiter(i).Allow(t.Context(), "k")
		switch {
		case i < store.MaxStatesPerKey && (err != nil || !d.Allowed()):
			t.Fatalf("limit %d on a key holding %d states: %+v, %v; want admitted", i, i, d, err)
		case i >= store.MaxStatesPerKey && (!errors.Is(err, ratelimit.ErrTooManyStates) ||
			errors.Is(err, ratelimit.ErrStoreUnavailable) || errors.Is(err, ratelimit.ErrStoreFull)):
			t.Fatalf("limit %d on a key holding %d states (FailOpen): %+v, %v; want ErrTooManyStates alone", i, store.MaxStatesPerKey, d, err)
		case err != nil:
			refused++
		}
	}
	if want := limits - store.MaxStatesPerKey; refused != want {
		t.Errorf("%d limits refused, want %d", refused, want)
	}
}

// checkNewOnFull checks a limit new to the full key "k", limit number
// limits: its Peek reads a fresh state, its ReserveN and concurrent
// Allows fail with ErrTooManyStates.
func checkNewOnFull(t *testing.T, extra *ratelimit.Limiter[string], limits int) {
	ctx := t.Context()
	if d, err := extra.Peek(ctx, "k"); err != nil || d.Remaining() != int64(10+limits) {
		t.Errorf("Peek of a new limit on the full key: %+v, %v; want fresh", d, err)
	}
	if r, err := extra.ReserveN(ctx, "k", 1, time.Hour); !errors.Is(err, ratelimit.ErrTooManyStates) {
		t.Errorf("ReserveN of a new limit on the full key: %+v, %v; want ErrTooManyStates", r, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = extra.Allow(ctx, "k")
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ratelimit.ErrTooManyStates) {
			t.Errorf("concurrent Allow %d of a new limit on the full key: %v; want ErrTooManyStates", i, err)
		}
	}
}
