package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// testTooManyStates checks the bound on one key's states: a key holds at
// most store.MaxStatesPerKey, one per state ID; a Take, a Policy's Take
// and a booking that would add one more fail with ErrTooManyStates, and
// charge nothing, whatever the failure policy, while the key's states
// decide as ever, a Peek of another ID reads it fresh, other keys take
// any ID, and a Reset of one of the key's states makes room for another.
func testTooManyStates(t *testing.T, st store.Store[string]) {
	ctx := context.Background()
	clk := clock.NewFake(time.UnixMicro(epoch))
	bucket, err := bucketOf(3, 1.0/3600)
	if err != nil {
		t.Fatal(err)
	}
	limiter := func(i int) *ratelimit.Limiter[string] {
		l, err := ratelimit.New(bucket, st, ratelimit.WithClock(clk), ratelimit.WithName(fmt.Sprintf("tm/%d", i)),
			ratelimit.WithFailurePolicy(ratelimit.FailOpen))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for i := range store.MaxStatesPerKey {
		if d, err := limiter(i).Allow(ctx, "tm"); err != nil || d.Remaining() != 2 {
			t.Fatalf("state %d of the key: %v, %v; want admitted, 2 left", i, d, err)
		}
	}
	extra := limiter(store.MaxStatesPerKey)
	if d, err := extra.Allow(ctx, "tm"); !errors.Is(err, ratelimit.ErrTooManyStates) ||
		errors.Is(err, ratelimit.ErrStoreUnavailable) || errors.Is(err, ratelimit.ErrStoreFull) {
		t.Fatalf("a state ID new to a key holding %d (FailOpen): %v, %v; want ErrTooManyStates alone", store.MaxStatesPerKey, d, err)
	}
	if r, err := extra.ReserveN(ctx, "tm", 1, time.Hour); !errors.Is(err, ratelimit.ErrTooManyStates) {
		t.Errorf("ReserveN under a new ID on the full key: %+v, %v; want ErrTooManyStates", r, err)
	}
	if d, err := extra.Peek(ctx, "tm"); err != nil || d.Remaining() != 3 {
		t.Errorf("Peek under a new ID on the full key: %v, %v; want fresh", d, err)
	}
	p, err := ratelimit.NewPolicy(st, []ratelimit.Limit{
		{Name: "0", Algorithm: bucket},
		{Name: "new", Algorithm: bucket},
	}, ratelimit.WithName("tm"), ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := p.Allow(ctx, "tm"); !errors.Is(err, ratelimit.ErrTooManyStates) {
		t.Errorf("a Policy of a held ID and a new one on the full key: %v, %v; want ErrTooManyStates", d, err)
	}
	held := limiter(0)
	if d, err := held.Allow(ctx, "tm"); err != nil || d.Remaining() != 1 {
		t.Errorf("a state the full key holds, after the refused Policy: %v, %v; want admitted, 1 left", d, err)
	}
	if d, err := extra.Allow(ctx, "other"); err != nil || !d.Allowed() {
		t.Errorf("the new ID on another key: %v, %v; want admitted", d, err)
	}
	if err := limiter(7).Reset(ctx, "tm"); err != nil {
		t.Fatal(err)
	}
	if d, err := extra.Allow(ctx, "tm"); err != nil || d.Remaining() != 2 {
		t.Errorf("the new ID after a Reset of another: %v, %v; want admitted, 2 left", d, err)
	}
	if d, err := limiter(7).Allow(ctx, "tm"); !errors.Is(err, ratelimit.ErrTooManyStates) {
		t.Errorf("the ID reset, once the key is full again: %v, %v; want ErrTooManyStates", d, err)
	}
}
