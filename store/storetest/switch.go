package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// testSwitchTakingTurns has two limiters of different kinds share a key's
// state under one state ID, both resetting on mismatch, and take turns at
// one instant, 40 requests each: each starts the key from what the
// other's state had used (algorithm.Carry), so together they admit no
// more than the larger limit, for every ordered pair of kinds, with equal
// and unequal limits. Before, each read the other's state as fresh, and
// all 80 were admitted. through says how the two limiters are built: by
// New, by With on one limiter (limits given per call), or, for a, as a
// limit of a Policy beside one that never binds.
func testSwitchTakingTurns(t *testing.T, st store.Store[string], through string) {
	for _, limits := range [][2]int64{{10, 10}, {10, 25}, {25, 10}} {
		for _, a := range kinds {
			for _, b := range kinds {
				if a.name == b.name {
					continue
				}
				name := fmt.Sprintf("%s%d→%s%d", a.name, limits[0], b.name, limits[1])
				t.Run(name, func(t *testing.T) {
					algA, errA := a.withLimit(limits[0])
					algB, errB := b.withLimit(limits[1])
					if errA != nil || errB != nil {
						t.Fatal(errA, errB)
					}
					turns := newTurns(t, st, through, "sw:"+through+":"+name, algA, algB)
					admitted := turns.take(t, 80)
					if most := max(limits[0], limits[1]); int64(admitted) > most {
						t.Errorf("%v and %v taking turns at one instant: %d of 80 admitted, want at most %d", algA, algB, admitted, most)
					}
				})
			}
		}
	}
}

// turns are testSwitchTakingTurns' two limiters of one state ID: a's,
// a Limiter (la) or a Policy (pa), and b's.
type turns struct {
	la, lb *ratelimit.Limiter[string]
	pa     *ratelimit.Policy[string]
}

// newTurns builds the limiters of algA and algB under the state ID id,
// on a fake clock, through New, With or a Policy.
func newTurns(t *testing.T, st store.Store[string], through, id string, algA, algB algorithm.Algorithm) turns {
	t.Helper()
	clk := clock.NewFake(time.UnixMicro(epoch))
	opts := []ratelimit.Option{ratelimit.WithClock(clk), ratelimit.WithName(id), ratelimit.WithResetOnMismatch()}
	var tt turns
	var err error
	switch through {
	case "With":
		var base *ratelimit.Limiter[string]
		if base, err = ratelimit.New(algA, st, opts...); err != nil {
			t.Fatal(err)
		}
		if tt.la, err = base.With(algA); err != nil {
			t.Fatal(err)
		}
		tt.lb, err = base.With(algB)
	case "Policy":
		// a's limit in a Policy, beside a limit that never binds: the
		// Policy's scripts carry as one limit's.
		var roomy algorithm.Algorithm
		if roomy, err = kinds[3].withLimit(1000); err != nil {
			t.Fatal(err)
		}
		tt.pa, err = ratelimit.NewPolicy(st, []ratelimit.Limit{
			{Name: "roomy", Algorithm: roomy},
			{Name: "a", Algorithm: algA, ResetOnMismatch: true},
		}, ratelimit.WithName(id), ratelimit.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		// b under the name of the Policy's limit a.
		tt.lb, err = ratelimit.New(algB, st, ratelimit.WithClock(clk), ratelimit.WithName(id+"/a"), ratelimit.WithResetOnMismatch())
	default:
		if tt.la, err = ratelimit.New(algA, st, opts...); err != nil {
			t.Fatal(err)
		}
		tt.lb, err = ratelimit.New(algB, st, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

// take makes n requests at one instant, a's and b's in turn, a's first,
// and returns how many were admitted.
func (tt turns) take(t *testing.T, n int) int {
	t.Helper()
	ctx := context.Background()
	admitted := 0
	for i := range n {
		var ok bool
		var err error
		switch {
		case i%2 == 1:
			var d ratelimit.Decision
			d, err = tt.lb.Allow(ctx, "turns")
			ok = d.Allowed()
		case tt.pa != nil:
			var d ratelimit.Decision
			d, err = tt.pa.Allow(ctx, "turns")
			ok = d.Allowed()
		default:
			var d ratelimit.Decision
			d, err = tt.la.Allow(ctx, "turns")
			ok = d.Allowed()
		}
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if ok {
			admitted++
		}
	}
	return admitted
}
