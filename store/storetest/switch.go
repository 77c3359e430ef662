package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
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
	ctx := context.Background()
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
					clk := clock.NewFake(time.UnixMicro(epoch))
					id := "sw:" + through + ":" + name
					opts := []ratelimit.Option{ratelimit.WithClock(clk), ratelimit.WithStateID(id), ratelimit.WithResetOnMismatch()}
					var la, lb *ratelimit.Limiter[string]
					var pa *ratelimit.Policy[string]
					var err error
					switch through {
					case "With":
						base, err := ratelimit.New(algA, st, opts...)
						if err != nil {
							t.Fatal(err)
						}
						if la, err = base.With(algA); err != nil {
							t.Fatal(err)
						}
						lb, err = base.With(algB)
					case "Policy":
						// a's limit in a Policy, beside a limit that never
						// binds: the Policy's scripts carry as one limit's.
						roomy, err := kinds[3].withLimit(1000)
						if err != nil {
							t.Fatal(err)
						}
						pa, err = ratelimit.NewPolicy(st, []ratelimit.Limit{
							{Algorithm: roomy, StateID: id + ":roomy"},
							{Algorithm: algA, StateID: id, ResetOnMismatch: true},
						}, ratelimit.WithClock(clk))
						if err != nil {
							t.Fatal(err)
						}
						lb, err = ratelimit.New(algB, st, opts...)
					default:
						if la, err = ratelimit.New(algA, st, opts...); err != nil {
							t.Fatal(err)
						}
						lb, err = ratelimit.New(algB, st, opts...)
					}
					if err != nil {
						t.Fatal(err)
					}
					admitted := 0
					for i := range 80 {
						var ok bool
						var err error
						switch {
						case i%2 == 1:
							var d ratelimit.Decision
							d, err = lb.Allow(ctx, "turns")
							ok = d.Allowed()
						case pa != nil:
							var d ratelimit.PolicyDecision
							d, err = pa.Allow(ctx, "turns")
							ok = d.Allowed()
						default:
							var d ratelimit.Decision
							d, err = la.Allow(ctx, "turns")
							ok = d.Allowed()
						}
						if err != nil {
							t.Fatalf("request %d: %v", i, err)
						}
						if ok {
							admitted++
						}
					}
					if most := max(limits[0], limits[1]); int64(admitted) > most {
						t.Errorf("%v and %v taking turns at one instant: %d of 80 admitted, want at most %d", algA, algB, admitted, most)
					}
				})
			}
		}
	}
}
