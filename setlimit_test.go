package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// kindsOf returns one algorithm of each of the six kinds admitting n per
// period (a bucket or GCRA of burst n refilled over the period).
func kindsOf(t testing.TB, n int64, period time.Duration) map[string]algorithm.Algorithm {
	t.Helper()
	must := func(alg algorithm.Algorithm, err error) algorithm.Algorithm {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return alg
	}
	every := period / time.Duration(n)
	return map[string]algorithm.Algorithm{
		"tokenbucket":          must(tokenbucket.Per(n, period)),
		"tokenbucket-interval": must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: n, Tokens: n, Interval: period})),
		"gcra":                 must(gcra.New(gcra.Config{Burst: n, Every: every})),
		"slidinglog":           must(slidinglog.Per(n, period)),
		"slidingwindow":        must(slidingwindow.Per(n, period)),
		"fixedwindow":          must(fixedwindow.Per(n, period)),
	}
}

func TestSetAlgorithmRefusals(t *testing.T) {
	ctx := context.Background()
	bucket := kindsOf(t, 10, time.Minute)["tokenbucket"]
	log := kindsOf(t, 10, time.Minute)["slidinglog"]
	lim, err := ratelimit.New[string](bucket, memorystore.New[string]())
	if err != nil {
		t.Fatal(err)
	}
	if err := lim.SetAlgorithm(nil); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("nil: %v, want ErrInvalidConfig", err)
	}
	if lim.Limits()[0].Algorithm != bucket {
		t.Errorf("a refused change replaced the algorithm by %v", lim.Limits()[0].Algorithm)
	}
	// Another kind carries what each key had used (algorithm.Carry).
	if _, err := lim.AllowN(ctx, "k", 3); err != nil {
		t.Fatal(err)
	}
	if err := lim.SetAlgorithm(log); err != nil {
		t.Errorf("another kind: %v", err)
	}
	if d, err := lim.Peek(ctx, "k"); err != nil || d.Remaining() != 7 {
		t.Errorf("the log after the bucket's 3: %v, %v; want 7 remaining (what was used carries)", d, err)
	}

	// A proportional sliding log is no rule.
	prop, err := ratelimit.New[string](bucket, memorystore.New[string](), ratelimit.WithInheritance(algorithm.Proportional), ratelimit.WithResetOnMismatch())
	if err != nil {
		t.Fatal(err)
	}
	if err := prop.SetAlgorithm(log); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("a proportional sliding log: %v, want ErrInvalidConfig", err)
	}

	p, err := ratelimit.NewPolicy[string](memorystore.New[string](), []ratelimit.Limit{{Algorithm: bucket}})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{-1, 1} {
		if err := p.SetLimit(i, bucket); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("SetLimit(%d): %v, want ErrInvalidConfig", i, err)
		}
	}
}

// What a limiter reports follows the change.
func TestSetAlgorithmReports(t *testing.T) {
	algs10 := kindsOf(t, 10, time.Minute)
	algs20 := kindsOf(t, 20, time.Hour)
	for name, alg := range algs10 {
		t.Run(name, func(t *testing.T) {
			lim, _ := newLimiter[string](t, alg)
			if err := lim.SetAlgorithm(algs20[name]); err != nil {
				t.Fatal(err)
			}
			fresh, _ := newLimiter[string](t, algs20[name])
			if lim.Limit() != 20 || lim.Limits()[0].Algorithm != algs20[name] || algorithm.QuotaOf(lim.Limits()[0].Algorithm) != algorithm.QuotaOf(fresh.Limits()[0].Algorithm) {
				t.Errorf("after the change: limit %d, algorithm %v, quota %v", lim.Limit(), lim.Limits()[0].Algorithm, algorithm.QuotaOf(lim.Limits()[0].Algorithm))
			}
			d, err := lim.AllowN(context.Background(), "k", 20)
			if err != nil || !d.Allowed() || d.Limit() != 20 {
				t.Errorf("a cost of the new limit: %v, %v", d, err)
			}
		})
	}
}

// Decisions made while the limit changes use one configuration or the
// other, never a mix: every decision's Limit is one of the two, and its
// Remaining within it. Run with -race.
func TestSetAlgorithmWhileDeciding(t *testing.T) {
	ctx := context.Background()
	a := kindsOf(t, 10, time.Minute)["gcra"]
	b := kindsOf(t, 1000, time.Minute)["gcra"]
	for _, newer := range []func() (func(algorithm.Algorithm) error, func() (ratelimit.Decision, error)){
		func() (func(algorithm.Algorithm) error, func() (ratelimit.Decision, error)) {
			lim, err := ratelimit.New[string](a, memorystore.New[string](), ratelimit.WithFailurePolicy(ratelimit.FailLocal))
			if err != nil {
				t.Fatal(err)
			}
			return lim.SetAlgorithm, func() (ratelimit.Decision, error) { return lim.Allow(ctx, "k") }
		},
		func() (func(algorithm.Algorithm) error, func() (ratelimit.Decision, error)) {
			p, err := ratelimit.NewPolicy[string](memorystore.New[string](), []ratelimit.Limit{{Algorithm: a}, {Algorithm: kindsOf(t, 5000, time.Hour)["fixedwindow"]}})
			if err != nil {
				t.Fatal(err)
			}
			set := func(alg algorithm.Algorithm) error { return p.SetLimit(0, alg) }
			return set, func() (ratelimit.Decision, error) {
				d, err := p.Allow(ctx, "k")
				if err == nil && len(d.Limits()) != 2 {
					t.Errorf("%d limits decided", len(d.Limits()))
				}
				return d.Limits()[0], err
			}
		},
	} {
		set, allow := newer()
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					d, err := allow()
					if err != nil {
						t.Error(err)
						return
					}
					if (d.Limit() != 10 && d.Limit() != 1000) || d.Remaining() < 0 || d.Remaining() > d.Limit() {
						t.Errorf("a decision of neither configuration: %v", d)
						return
					}
				}
			}()
		}
		for i := range 200 {
			alg := a
			if i%2 == 0 {
				alg = b
			}
			if err := set(alg); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
	}
}

func TestWith(t *testing.T) {
	ctx := context.Background()
	fake := clock.NewFake(t0)
	algs10 := kindsOf(t, 10, time.Minute)
	for _, opts := range [][]ratelimit.Option{nil, {ratelimit.WithName("api")}} {
		lim, err := ratelimit.New[string](algs10["gcra"], memorystore.New[string](), append(opts, ratelimit.WithClock(fake))...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lim.With(nil); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("With(nil): %v, want ErrInvalidConfig", err)
		}
		if _, err := lim.With(kindsOf(t, 3, time.Minute)["fixedwindow"]); err != nil {
			t.Errorf("a fixed window under the quota of a GCRA: %v, want it to carry what was used", err)
		}
		gold := kindsOf(t, 3, time.Minute)["gcra"]
		w, err := lim.With(gold)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := lim.With(gold); again != w {
			t.Error("With of the same algorithm opened another Limiter")
		}
		if allocs := testing.AllocsPerRun(100, func() { _, _ = lim.With(gold) }); allocs != 0 {
			t.Errorf("With of a kept algorithm allocates %v times", allocs)
		}
		if w.Limit() != 3 || w.Name() != lim.Name() {
			t.Errorf("With: limit %d, name %q (the limiter's %q)", w.Limit(), w.Name(), lim.Name())
		}
		for i := range 5 {
			d, err := w.Allow(ctx, "customer")
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed() != (i < 3) {
				t.Errorf("request %d of a limit of 3: %v", i+1, d)
			}
		}
		// The limiter's own limit is the same quota: what was used stays used.
		if d, err := lim.Peek(ctx, "customer"); err != nil || d.Remaining() != 7 {
			t.Errorf("the limiter's own limit after 3 used through With: %v, %v; want 7 left", d, err)
		}
	}
}

// At most MaxWithLimiters are kept; past it limiters are opened anew and
// decide as the kept ones did.
func TestWithKeepsAtMost(t *testing.T) {
	if testing.Short() {
		t.Skip("opens MaxWithLimiters+100 limiters")
	}
	lim, err := ratelimit.New[string](kindsOf(t, 10, time.Minute)["gcra"], memorystore.New[string]())
	if err != nil {
		t.Fatal(err)
	}
	algs := make([]algorithm.Algorithm, ratelimit.MaxWithLimiters+100)
	first := make([]*ratelimit.Limiter[string], len(algs))
	for i := range algs {
		algs[i], err = gcra.New(gcra.Config{Burst: int64(i + 1), Every: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if first[i], err = lim.With(algs[i]); err != nil {
			t.Fatal(err)
		}
	}
	kept := 0
	for i, alg := range algs {
		w, err := lim.With(alg)
		if err != nil {
			t.Fatal(err)
		}
		if w == first[i] {
			kept++
		}
		if w.Limit() != int64(i+1) {
			t.Fatalf("With of a burst of %d: limit %d", i+1, w.Limit())
		}
	}
	// Each one opened again drops one at random, which may be opened again
	// in turn: far fewer than half are.
	if kept > ratelimit.MaxWithLimiters || kept < ratelimit.MaxWithLimiters/2 {
		t.Errorf("%d limiters kept, want at most %d and at least half", kept, ratelimit.MaxWithLimiters)
	}
}
