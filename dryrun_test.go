package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
)

// TestDryRunChargesAsUsualAndNeverDenies runs a dry-run limiter beside a
// plain one on the same requests: they charge alike, and the dry-run one
// admits what the other denies, marked DryRunDenied, with the denial's
// numbers.
func TestDryRunChargesAsUsualAndNeverDenies(t *testing.T) {
	ctx := context.Background()
	for name, alg := range allAlgorithms(t) {
		t.Run(name, func(t *testing.T) {
			plain, plainClock := newLimiter[string](t, alg)
			dry, st, rec := newObservedAlg(t, alg, ratelimit.WithDryRun())
			st.delay = 0
			for i, step := range []struct {
				advance time.Duration
				cost    int
			}{{0, 3}, {0, 2}, {0, 1}, {0, 5}, {300 * time.Millisecond, 1}, {time.Second, 1}, {0, 4}, {10 * time.Second, 5}} {
				plainClock.Advance(step.advance)
				st.fake.Advance(step.advance)
				want, err := plain.AllowN(ctx, "k", step.cost)
				if err != nil {
					t.Fatal(err)
				}
				got, err := dry.AllowN(ctx, "k", step.cost)
				if err != nil {
					t.Fatal(err)
				}
				if !got.Allowed() {
					t.Fatalf("step %d: dry run denied: %+v", i, got)
				}
				if got.DryRunDenied() != !want.Allowed() {
					t.Errorf("step %d: DryRunDenied = %v, want %v", i, got.DryRunDenied(), !want.Allowed())
				}
				if got != want.DryRun() {
					t.Errorf("step %d: dry run decided\n %+v\nwant the plain limiter's\n %+v", i, got, want)
				}
				es := rec.take()
				if len(es) != 1 || es[0].Allowed != want.Allowed() || !es[0].DryRun || es[0].Decision.DryRunDenied() != !want.Allowed() {
					t.Errorf("step %d: events %+v, want one with Allowed %v, DryRun", i, es, want.Allowed())
				}
			}
			// Peek too admits in dry run, and says what the limit thinks.
			if _, err := plain.AllowN(ctx, "k", 5); err != nil {
				t.Fatal(err)
			}
			if _, err := dry.AllowN(ctx, "k", 5); err != nil {
				t.Fatal(err)
			}
			want, _ := plain.Peek(ctx, "k")
			got, err := dry.Peek(ctx, "k")
			if err != nil || want.Allowed() || !got.Allowed() || !got.DryRunDenied() || got.RetryAfter() != want.RetryAfter() {
				t.Errorf("Peek = %+v, %v; the plain limiter's %+v", got, err, want)
			}
		})
	}
}

func TestDryRunWaitReturnsAtOnce(t *testing.T) {
	ctx := context.Background()
	lim, st, _ := newObserved(t, ratelimit.WithDryRun())
	st.delay = 0
	if _, err := lim.AllowN(ctx, "alice", 2); err != nil {
		t.Fatal(err)
	}
	d, err := lim.Wait(ctx, "alice") // on a fake clock nobody advances
	if err != nil || !d.Allowed() || !d.DryRunDenied() || d.RetryAfter() != time.Second {
		t.Fatalf("Wait = %+v, %v, want an admitted denial with RetryAfter 1s", d, err)
	}
}

func TestDryRunFailurePolicies(t *testing.T) {
	ctx := context.Background()
	lim, st, _ := newObserved(t, ratelimit.WithDryRun(), ratelimit.WithFailurePolicy(ratelimit.FailClosed))
	st.setDown(true)
	d, err := lim.Allow(ctx, "alice")
	if err != nil || !d.Allowed() || !d.DryRunDenied() || d.Source() != ratelimit.FromFailClosed {
		t.Errorf("FailClosed in dry run: %+v, %v, want an admitted denial from fail-closed", d, err)
	}
	// With no failure policy there is no decision to admit.
	lim, st, _ = newObserved(t, ratelimit.WithDryRun())
	st.setDown(true)
	if d, err := lim.Allow(ctx, "alice"); !errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Errorf("FailWithError in dry run: %+v, %v, want ErrStoreUnavailable", d, err)
	}
	if _, err := lim.AllowN(ctx, "alice", 3); !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
		t.Errorf("a cost above the limit in dry run: %v, want ErrCostExceedsLimit", err)
	}
}
