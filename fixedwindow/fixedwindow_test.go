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

// TestWindowLoweredLimit checks a count above a lowered limit, carried
// as-is as stores carry it (Inherit): nothing remains until the window
// ends, never a negative count. (A count above the limit in the window's
// own state is a fill pointer booked ahead.)
func TestWindowLoweredLimit(t *testing.T) {
	hundred := mustNew(t, fixedwindow.Config{Limit: 100, Window: time.Second})
	s, _ := hundred.Take(hundred.Init(algorithm.State{}, t0), t0, 95)
	ten := mustNew(t, fixedwindow.Config{Limit: 10, Window: time.Second})
	s = ten.Inherit(hundred.Tag(), s, t0+1, algorithm.AsIs)
	want := algorithm.Result{Remaining: 0, RetryAfter: 4*d - 1, ResetAfter: 4*d - 1}
	if got := ten.Peek(s, t0+1, 1); got != want {
		t.Errorf("Peek of 95 counted under a limit of 10: got %+v, want %+v", got, want)
	}
	if next, got := ten.Take(s, t0+1, 1); got != want || next != s {
		t.Errorf("Take of 95 counted under a limit of 10: got %+v and %+v, want %+v and the state unchanged", got, next, want)
	}
}

// TestWindowFarAhead checks a counted window that starts more than
// algorithm.MaxDuration after now's (a minute's index read as an hour's):
// the state counts as fresh, not as a wait of centuries; one that starts
// just within it still holds.
func TestWindowFarAhead(t *testing.T) {
	minute := mustNew(t, fixedwindow.Config{Limit: 10, Window: time.Minute})
	s, _ := minute.Take(minute.Init(algorithm.State{}, t0), t0, 10)
	hour := mustNew(t, fixedwindow.Config{Limit: 10, Window: time.Hour})
	if got := hour.Peek(s, t0, 1); got != algorithm.Fresh(10) {
		t.Errorf("a minute's index read as an hour's: got %+v, want fresh", got)
	}
	w := mustNew(t, fixedwindow.Config{Limit: 3, Window: time.Second})
	ahead := algorithm.MaxDuration / sec // windows
	for _, c := range []struct {
		index int64
		fresh bool
	}{{t0/sec + ahead, false}, {t0/sec + ahead + 1, true}} {
		s := algorithm.State{N0: c.index, N1: 3}
		got := w.Peek(s, t0, 1)
		if fresh := got == algorithm.Fresh(3); fresh != c.fresh || got.RetryAfter < 0 || got.ResetAfter < 0 {
			t.Errorf("a window %d ahead: got %+v, want fresh %v", c.index-t0/sec, got, c.fresh)
		}
	}
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
