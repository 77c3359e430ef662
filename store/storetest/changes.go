package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// per returns the algorithm of kind k admitting n per period.
func per(k kind, n int64, period time.Duration) (algorithm.Algorithm, error) {
	return k.per(n, period)
}

// change is a way a key's limit changes: in place (SetAlgorithm), or by a
// Limiter built anew with the same state ID (another process, or one
// restarted with a new configuration).
type change struct {
	name string
	to   func(t *testing.T, lim *ratelimit.Limiter[string], alg algorithm.Algorithm) *ratelimit.Limiter[string]
}

func changes(st store.Store[string], clk clock.Clock, id string, rule algorithm.Rule) []change {
	return []change{
		{"SetAlgorithm", func(t *testing.T, lim *ratelimit.Limiter[string], alg algorithm.Algorithm) *ratelimit.Limiter[string] {
			if err := lim.SetAlgorithm(alg); err != nil {
				t.Fatalf("SetAlgorithm(%v): %v", alg, err)
			}
			return lim
		}},
		{"New", func(t *testing.T, _ *ratelimit.Limiter[string], alg algorithm.Algorithm) *ratelimit.Limiter[string] {
			lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clk), ratelimit.WithName(id), ratelimit.WithInheritance(rule))
			if err != nil {
				t.Fatalf("New(%v): %v", alg, err)
			}
			return lim
		}},
	}
}

// testTighten spends 95 of 100 on a key, tightens its limit to 10, and
// counts what the key is admitted until the old window would have ended:
// never a fresh quota, at most the 5 the old limit had left.
func testTighten(t *testing.T, k kind, st store.Store[string]) {
	for _, rule := range []algorithm.Rule{algorithm.AsIs, algorithm.Proportional} {
		if rule == algorithm.Proportional && !k.proportional {
			continue
		}
		clk := clock.NewFake(time.UnixMicro(epoch))
		id := fmt.Sprintf("tighten:%s:%v", k.name, rule)
		for _, c := range changes(st, clk, id, rule) {
			t.Run(fmt.Sprintf("%v/%s", rule, c.name), func(t *testing.T) {
				ctx := t.Context()
				hundred, err1 := per(k, 100, time.Minute)
				ten, err2 := per(k, 10, time.Minute)
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				lim, err := ratelimit.New(hundred, st, ratelimit.WithClock(clk), ratelimit.WithName(id), ratelimit.WithInheritance(rule))
				if err != nil {
					t.Fatal(err)
				}
				key := "tighten:" + c.name
				if d, err := lim.AllowN(ctx, key, 95); err != nil || !d.Allowed() {
					t.Fatalf("AllowN(95) of 100: %s, %v", show(d), err)
				}
				clk.Advance(time.Second)
				lim = c.to(t, lim, ten)
				admitted := 0
				// The old window: a minute from the 95 (the buckets and GCRA
				// refill 100 a minute; what refills at the new rate in the
				// meantime is the new limit's to give).
				for step := 0; step < 59; step++ {
					for {
						d, err := lim.Allow(ctx, key)
						if err != nil {
							t.Fatalf("Allow after tightening: %v", err)
						}
						if err := sanity(d, 10, 1); err != nil {
							t.Fatalf("Allow after tightening: %s: %v", show(d), err)
						}
						if !d.Allowed() {
							break
						}
						admitted++
					}
					if step == 0 && admitted > 5 {
						t.Fatalf("tightening 100 → 10 after 95 used admitted %d at once, want at most 5", admitted)
					}
					clk.Advance(time.Second)
				}
				// Within the old minute the new limit refills at most 10 (the
				// buckets, GCRA) or opens at most one new window of 10.
				if admitted > 5+10 {
					t.Errorf("tightening 100 → 10 after 95 used admitted %d within the old minute, want at most %d", admitted, 5+10)
				}
			})
		}
	}
}

// testWindowChange moves a used key's limit from a minute to an hour and
// back: no decision may have a negative duration or one longer than its
// period, and what was used stays used.
func testWindowChange(t *testing.T, k kind, st store.Store[string]) {
	clk := clock.NewFake(time.UnixMicro(epoch))
	id := "window:" + k.name
	for _, c := range changes(st, clk, id, algorithm.AsIs) {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			minute, err1 := per(k, 100, time.Minute)
			hour, err2 := per(k, 100, time.Hour)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			lim, err := ratelimit.New(minute, st, ratelimit.WithClock(clk), ratelimit.WithName(id))
			if err != nil {
				t.Fatal(err)
			}
			key := "window:" + c.name
			if _, err := lim.AllowN(ctx, key, 95); err != nil {
				t.Fatal(err)
			}
			for i, to := range []struct {
				alg    algorithm.Algorithm
				period time.Duration
			}{{hour, time.Hour}, {minute, time.Minute}, {hour, time.Hour}} {
				clk.Advance(20 * time.Second)
				lim = c.to(t, lim, to.alg)
				p, err := lim.Peek(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				// A sliding window's count fades over the window after its
				// own: it is fresh two windows on at most.
				longest := k.freshIn * to.period
				if err := sanity(p, 100, 0); err != nil || p.ResetAfter() > longest {
					t.Fatalf("Peek after the change to %v: %s: %v (reset at most %v)", to.alg, show(p), err, longest)
				}
				// 20 s after the 95, the minute's limit had refilled at most
				// 34: whatever the algorithm, the hour's has no more left.
				if i == 0 && p.Remaining() > 5+34 {
					t.Errorf("Peek after the change to %v: %d remaining: what was used is no longer", to.alg, p.Remaining())
				}
				d, err := lim.AllowN(ctx, key, 100)
				if err != nil {
					t.Fatal(err)
				}
				if err := sanity(d, 100, 100); err != nil || d.RetryAfter() > longest {
					t.Fatalf("AllowN(100) after the change to %v: %s: %v (retry at most %v)", to.alg, show(d), err, longest)
				}
			}
		})
	}
}
