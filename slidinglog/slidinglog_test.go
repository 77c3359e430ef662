package slidinglog_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/steptest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
)

// Named instants, in Unix µs, d apart. t0 is a whole second.
const (
	d   = 250_000 // µs
	sec = 1_000_000

	t0 = 1_700_000_000 * sec
	t1 = t0 + 1*d
	t2 = t0 + 2*d
	t4 = t0 + 4*d
	t5 = t0 + 5*d
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

// run replays steps on a state of alg created at t0.
func run(t *testing.T, alg algorithm.Algorithm, steps []step) {
	t.Helper()
	steptest.Run(t, alg, t0, steps)
}

func mustNew(t *testing.T, cfg slidinglog.Config) *slidinglog.Log {
	t.Helper()
	l, err := slidinglog.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return l
}

func TestLog(t *testing.T) {
	// 5 per rolling second (4d).
	l := mustNew(t, slidinglog.Config{Limit: 5, Window: time.Second})
	run(t, l, []step{
		{t0, peek, ok(5, 0)}, // a fresh log is empty
		{t0, 2, ok(3, 4*d)},
		{t1, 2, ok(1, 4*d)},
		{t2, 2, no(1, 2*d, 3*d)}, // fits once the 2 of t0 leave, at t4
		{t2, 1, ok(0, 4*d)},
		{t2, peek, no(0, 2*d, 4*d)},
		{t4 - 1, 1, no(0, 1, 2*d+1)}, // the entry of t0 still counts
		{t4, 1, ok(1, 4*d)},          // at t0+W it no longer does
		{t4, 3, no(1, d, 4*d)},       // the 2 of t1 are enough
		{t4, 4, no(1, 2*d, 4*d)},     // the 2 of t1 and the 1 of t2 must leave
		{t5 - 1, 3, no(1, 1, 3*d+1)},
		{t5, 3, ok(0, 4*d)},
		{t9 - 1, peek, ok(2, 1)}, // only the 3 of t5 are left
		{t9, peek, ok(5, 0)},
	})
}

func TestLogPeek(t *testing.T) {
	l := mustNew(t, slidinglog.Config{Limit: 3, Window: time.Second})
	run(t, l, []step{
		{t0, 2, ok(1, 4*d)},
		// Remaining is what is left before the peek's cost of 1, and the
		// peek consumes nothing: asking twice gives the same answer.
		{t1, peek, ok(1, 3*d)},
		{t1, peek, ok(1, 3*d)},
		{t1, 1, ok(0, 4*d)},
		{t2, peek, no(0, 2*d, 3*d)},
		{t2, peek, no(0, 2*d, 3*d)},
		{t4, 2, ok(0, 4*d)},
	})
}

func TestLogClockStepsBack(t *testing.T) {
	l := mustNew(t, slidinglog.Config{Limit: 4, Window: time.Second})
	run(t, l, []step{
		{t2, 1, ok(3, 4*d)},
		{t5, 1, ok(2, 4*d)},
		// Back to t4: logged between the entries of t2 and t5, and the
		// log stays ordered by instant.
		{t4, 1, ok(1, 5*d)},
		{t4, 1, ok(0, 5*d)},
		{t4, 1, no(0, 2*d, 5*d)}, // the oldest, t2, leaves at t6
		{t6, 1, ok(0, 4*d)},
		{t8, 2, ok(0, 4*d)},    // the 2 of t4 leave at t8
		{t8, 1, no(0, d, 4*d)}, // the 1 of t5 leaves at t9
	})
}

func TestLogMicrosecondWindow(t *testing.T) {
	l := mustNew(t, slidinglog.Config{Limit: 2, Window: time.Microsecond})
	run(t, l, []step{
		{t0, 2, ok(0, 1)},
		{t0, 1, no(0, 1, 1)},
		{t0 + 1, 1, ok(1, 1)},
		{t0 + 1, 1, ok(0, 1)},
		{t0 + 2, peek, ok(2, 0)},
	})
}

func TestNewValidates(t *testing.T) {
	const maxWindow = time.Duration(algorithm.MaxDuration) * time.Microsecond
	for _, cfg := range []slidinglog.Config{
		{Limit: 0, Window: time.Second},
		{Limit: -1, Window: time.Second},
		{Limit: math.MinInt64, Window: time.Second},
		{Limit: slidinglog.MaxLimit + 1, Window: time.Second},
		{Limit: math.MaxInt64, Window: time.Second},
		{Limit: 1, Window: 0},
		{Limit: 1, Window: -time.Second},
		{Limit: 1, Window: time.Microsecond - 1}, // truncates to 0µs
		{Limit: 1, Window: math.MinInt64},
		{Limit: 1, Window: maxWindow + time.Microsecond},
		{Limit: 1, Window: math.MaxInt64},
	} {
		l, err := slidinglog.New(cfg)
		if !errors.Is(err, algorithm.ErrInvalidConfig) || l != nil {
			t.Errorf("New(%+v): got (%v, %v), want (nil, ErrInvalidConfig)", cfg, l, err)
		}
	}
	for _, cfg := range []slidinglog.Config{
		{Limit: 1, Window: time.Microsecond},
		{Limit: 1, Window: 2*time.Microsecond - 1}, // truncates to 1µs
		{Limit: slidinglog.MaxLimit, Window: maxWindow},
		{Limit: 100, Window: time.Hour},
	} {
		l, err := slidinglog.New(cfg)
		if err != nil || l.Limit() != cfg.Limit {
			t.Errorf("New(%+v): got (%v, %v), want a log of limit %d", cfg, l, err, cfg.Limit)
		}
	}
}

func TestSpec(t *testing.T) {
	l := mustNew(t, slidinglog.Config{Limit: 7, Window: 1500 * time.Millisecond})
	got := l.Spec()
	if got.Name != "slidinglog" || len(got.Params) != 2 || got.Params[0] != 7 || got.Params[1] != 1_500_000 {
		t.Errorf("Spec(): got %+v, want {slidinglog [7 1.5e+06]}", got)
	}
}
