package fixedwindow_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/internal/steptest"
)

// Named instants, in Unix µs, d apart. t0 is a whole second, so windows of
// one second start at t0, t4, t8...
const (
	d   = 250_000 // µs
	sec = 1_000_000

	t0 = 1_700_000_000 * sec
	t1 = t0 + 1*d
	t2 = t0 + 2*d
	t4 = t0 + 4*d
	t6 = t0 + 6*d
	t8 = t0 + 8*d
	t9 = t0 + 9*d
)

// The step tables' vocabulary, from steptest.
const peek = steptest.Peek

// step is a steptest.Step of this package, so that tables stay unkeyed.
type step struct {
	At   int64
	Cost int64
	Want algorithm.Result
}

var ok, no = steptest.OK, steptest.No

// run replays steps on a state of alg created at the first step's instant.
func run(t *testing.T, alg algorithm.Algorithm, steps []step) {
	t.Helper()
	steptest.Run(t, alg, steps[0].At, steps)
}

func mustNew(t *testing.T, cfg fixedwindow.Config) *fixedwindow.Window {
	t.Helper()
	w, err := fixedwindow.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return w
}

func TestWindow(t *testing.T) {
	// 3 per window of one second (4d).
	w := mustNew(t, fixedwindow.Config{Limit: 3, Window: time.Second})
	run(t, w, []step{
		{t0, peek, ok(3, 0)}, // nothing counted yet
		{t0, 1, ok(2, 4*d)},  // exactly at a window start: a whole window to go
		{t1, 2, ok(0, 3*d)},
		{t1, 1, no(0, 3*d, 3*d)},
		{t2, peek, no(0, 2*d, 2*d)},
		{t4 - 1, 1, no(0, 1, 1)},
		{t4, 3, ok(0, 4*d)},  // the next window starts exactly at t4
		{t9, peek, ok(3, 0)}, // [t8, t12) has nothing counted
		{t9, 2, ok(1, 3*d)},
		{t9, 2, no(1, 3*d, 3*d)}, // a denied request does not count
		{t9, 1, ok(0, 3*d)},
	})
}

func TestWindowPeek(t *testing.T) {
	w := mustNew(t, fixedwindow.Config{Limit: 3, Window: time.Second})
	run(t, w, []step{
		{t0, 2, ok(1, 4*d)},
		// Remaining is what is left before the peek's cost of 1, and the
		// peek consumes nothing: asking twice gives the same answer.
		{t1, peek, ok(1, 3*d)},
		{t1, peek, ok(1, 3*d)},
		{t1, 1, ok(0, 3*d)},
		{t2, peek, no(0, 2*d, 2*d)},
		{t2, peek, no(0, 2*d, 2*d)},
	})
}

func TestWindowNegativeInstants(t *testing.T) {
	// Windows of 10µs: [-20, -10), [-10, 0), [0, 10). Instants before the
	// epoch use floor division, not truncation toward zero.
	w := mustNew(t, fixedwindow.Config{Limit: 2, Window: 10 * time.Microsecond})
	run(t, w, []step{
		{-15, 1, ok(1, 5)},
		{-11, 1, ok(0, 1)},
		{-11, 1, no(0, 1, 1)},
		{-10, 2, ok(0, 10)},
		{-1, peek, no(0, 1, 1)},
		{0, peek, ok(2, 0)},
		{5, 1, ok(1, 5)},
	})
	run(t, w, []step{
		{-20, 2, ok(0, 10)},
		{-20, peek, no(0, 10, 10)},
		{-11, peek, no(0, 1, 1)},
		{-10, peek, ok(2, 0)},
	})
}

func TestWindowClockStepsBack(t *testing.T) {
	w := mustNew(t, fixedwindow.Config{Limit: 3, Window: time.Second})
	run(t, w, []step{
		{t6, 2, ok(1, 2*d)}, // window [t4, t8)
		// Back into the window before: the count of [t4, t8) still holds.
		{t2, 1, ok(0, 6*d)},
		{t2, 1, no(0, 6*d, 6*d)},
		{t8 - 1, peek, no(0, 1, 1)},
		{t8, peek, ok(3, 0)},
	})
}

func TestNewValidates(t *testing.T) {
	const maxWindow = time.Duration(algorithm.MaxDuration) * time.Microsecond
	for _, cfg := range []fixedwindow.Config{
		{Limit: 0, Window: time.Second},
		{Limit: -1, Window: time.Second},
		{Limit: math.MinInt64, Window: time.Second},
		{Limit: algorithm.MaxLimit + 1, Window: time.Second},
		{Limit: math.MaxInt64, Window: time.Second},
		{Limit: 1, Window: 0},
		{Limit: 1, Window: -time.Second},
		{Limit: 1, Window: time.Microsecond - 1}, // truncates to 0µs
		{Limit: 1, Window: math.MinInt64},
		{Limit: 1, Window: maxWindow + time.Microsecond},
		{Limit: 1, Window: math.MaxInt64},
	} {
		w, err := fixedwindow.New(cfg)
		if !errors.Is(err, algorithm.ErrInvalidConfig) || w != nil {
			t.Errorf("New(%+v): got (%v, %v), want (nil, ErrInvalidConfig)", cfg, w, err)
		}
	}
	for _, cfg := range []fixedwindow.Config{
		{Limit: 1, Window: time.Microsecond},
		{Limit: 1, Window: 2*time.Microsecond - 1}, // truncates to 1µs
		{Limit: algorithm.MaxLimit, Window: maxWindow},
		{Limit: 1000, Window: time.Minute},
	} {
		w, err := fixedwindow.New(cfg)
		if err != nil || w.Limit() != cfg.Limit {
			t.Errorf("New(%+v): got (%v, %v), want a window of limit %d", cfg, w, err, cfg.Limit)
		}
	}
}

func TestSpec(t *testing.T) {
	w := mustNew(t, fixedwindow.Config{Limit: 7, Window: time.Minute})
	got := w.Spec()
	if got.Name != "fixedwindow" || len(got.Params) != 2 || got.Params[0] != 7 || got.Params[1] != 60_000_000 {
		t.Errorf("Spec(): got %+v, want {fixedwindow [7 6e+07]}", got)
	}
}
