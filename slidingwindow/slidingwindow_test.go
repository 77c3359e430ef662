package slidingwindow_test

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/steptest"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
)

// Named instants, in Unix µs, d apart. t0 is a whole second, so windows of
// one second start at t0, t4, t8...
const (
	d   = 250_000 // µs
	sec = 1_000_000

	t0  = 1_700_000_000 * sec
	t1  = t0 + 1*d
	t3  = t0 + 3*d
	t4  = t0 + 4*d
	t5  = t0 + 5*d
	t6  = t0 + 6*d
	t8  = t0 + 8*d
	t12 = t0 + 12*d
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

func mustNew(t *testing.T, cfg slidingwindow.Config) *slidingwindow.Window {
	t.Helper()
	w, err := slidingwindow.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return w
}

func TestWindow(t *testing.T) {
	// 4 per window of one second (4d).
	w := mustNew(t, slidingwindow.Config{Limit: 4, Window: time.Second})
	run(t, w, []step{
		{t0, peek, ok(4, 0)},
		{t0, 3, ok(1, 8*d)}, // the 3 weigh something until t8
		// 2 more never fit in [t0, t4); from t4 the 3 weigh
		// ⌈3·(1s − e)/1s⌉, which is 2 from e = 333,334µs on.
		{t1, 2, no(1, 3*d+333_334, 7*d)},
		{t1, 1, ok(0, 7*d)},
		{t4, peek, no(0, d, 4*d)}, // 4 weigh 3 from e = d on
		{t4 + d - 1, 1, no(0, 1, 3*d+1)},
		{t5, 1, ok(0, 7*d)},
		{t6, peek, ok(1, 6*d)}, // 1 + ⌈4·2d/4d⌉ = 3
		{t8, peek, ok(3, 4*d)}, // only the 1 of t5, weighing 1
		{t12 - 1, peek, ok(3, 1)},
		{t12, peek, ok(4, 0)},
	})
}

func TestWindowClockStepsBack(t *testing.T) {
	w := mustNew(t, slidingwindow.Config{Limit: 4, Window: time.Second})
	run(t, w, []step{
		{t5, 2, ok(2, 7*d)}, // in the window [t4, t8)
		// Back to t3, in the window before: counted in [t4, t8), at its start.
		{t3, peek, ok(2, 9*d)},
		{t3, 3, no(2, 7*d, 9*d)}, // the 2 weigh at most 1 from t8+2d on
		{t3, 2, ok(0, 9*d)},
		{t8 + 2*d, 1, ok(1, 6*d)}, // 1 + ⌈4·2d/4d⌉ = 3
	})
}

// TestWindowEdgeBurst shows what the counter admits across a window edge,
// where a fixed window admits twice its limit: the previous window's
// count weighs almost all of it just after the edge.
func TestWindowEdgeBurst(t *testing.T) {
	w := mustNew(t, slidingwindow.Config{Limit: 100, Window: time.Second})
	run(t, w, []step{
		{t4 - 1, 100, ok(0, 4*d+1)},
		{t4, 1, no(0, 10_000, 4*d)}, // 100 weigh 99 from e = 10ms on
		{t4 + 10_000, 1, ok(0, 8*d-10_000)},
		{t6, 49, ok(0, 6*d)}, // half a window on, 1 + half of the 100
	})
}

func TestNewValidates(t *testing.T) {
	const maxWindow = time.Duration(algorithm.MaxDuration) * time.Microsecond
	for _, cfg := range []slidingwindow.Config{
		{Limit: 0, Window: time.Second},
		{Limit: -1, Window: time.Second},
		{Limit: algorithm.MaxLimit + 1, Window: time.Second},
		{Limit: math.MaxInt64, Window: time.Second},
		{Limit: 1, Window: 0},
		{Limit: 1, Window: -time.Second},
		{Limit: 1, Window: time.Microsecond - 1},
		{Limit: 1, Window: maxWindow + time.Microsecond},
		{Limit: 1, Window: math.MaxInt64},
	} {
		w, err := slidingwindow.New(cfg)
		if !errors.Is(err, algorithm.ErrInvalidConfig) || w != nil {
			t.Errorf("New(%+v): got (%v, %v), want (nil, ErrInvalidConfig)", cfg, w, err)
		}
	}
	for _, cfg := range []slidingwindow.Config{
		{Limit: 1, Window: time.Microsecond},
		{Limit: algorithm.MaxLimit, Window: maxWindow},
		{Limit: 100, Window: time.Minute},
	} {
		w, err := slidingwindow.New(cfg)
		if err != nil || w.Limit() != cfg.Limit || w.Window() != cfg.Window {
			t.Errorf("New(%+v): got (%v, %v), want a counter of limit %d", cfg, w, err, cfg.Limit)
		}
	}
}

func TestSpec(t *testing.T) {
	w := mustNew(t, slidingwindow.Config{Limit: 7, Window: 1500 * time.Millisecond})
	got := w.Spec()
	if got.Name != "slidingwindow" || len(got.Params) != 2 || got.Params[0] != 7 || got.Params[1] != 1_500_000 {
		t.Errorf("Spec(): got %+v, want {slidingwindow [7 1.5e+06]}", got)
	}
	if s := w.String(); s != "slidingwindow(limit=7, window=1.5s)" {
		t.Errorf("String(): got %q", s)
	}
}

// reference is the counter's rule kept the obvious way: every window's
// count, and the estimate in exact big-integer arithmetic.
type reference struct {
	limit, window int64
	counts        map[int64]int64
	last          int64 // the latest window counted in, MinInt64 before any
}

func (r *reference) index(now int64) int64 {
	return max(algorithm.FloorDiv(now, r.window), r.last)
}

// forgets reports whether the latest window counted in starts more than
// algorithm.MaxDuration after now's, so far that the counter takes it for
// another window length's and starts afresh.
func (r *reference) forgets(now int64) bool {
	i := algorithm.FloorDiv(now, r.window)
	return r.last != math.MinInt64 && r.last-i > algorithm.MaxDuration/r.window
}

// used is count + ⌈prev·(window − elapsed)/window⌉ at now.
func (r *reference) used(now int64) int64 {
	i := r.index(now)
	elapsed := max(now-i*r.window, 0)
	share := new(big.Int).Mul(big.NewInt(r.counts[i-1]), big.NewInt(r.window-elapsed))
	share.Add(share, big.NewInt(r.window-1))
	share.Quo(share, big.NewInt(r.window))
	return r.counts[i] + share.Int64()
}

// first returns the first instant from now on at which ok holds, which
// holds from some instant on, by bisection.
func (r *reference) first(now int64, ok func(t int64) bool) int64 {
	lo, hi := now, (r.index(now)+2)*r.window
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

func (r *reference) decide(now, cost int64) algorithm.Result {
	if r.forgets(now) {
		return algorithm.Fresh(r.limit)
	}
	used := r.used(now)
	return algorithm.Result{
		Remaining:  max(r.limit-used, 0),
		RetryAfter: r.first(now, func(t int64) bool { return r.used(t)+cost <= r.limit }) - now,
		ResetAfter: r.first(now, func(t int64) bool { return r.used(t) == 0 }) - now,
	}
}

func (r *reference) admit(now, cost int64) {
	if r.forgets(now) {
		r.counts, r.last = map[int64]int64{}, math.MinInt64
	}
	i := r.index(now)
	r.counts[i] += cost
	r.last = i
}

// TestWindowAgainstReference replays random sequences, with limits and
// windows up to the largest allowed (where the estimate's products reach
// 2^88), costs up to the limit, and clocks that step back, on the counter
// and on the reference, which must agree on every result.
func TestWindowAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for seq := range 400 {
		limit := []int64{1, 3, 100, 1 << 30, algorithm.MaxLimit}[seq%5]
		window := []int64{1, 7, 1000, sec, algorithm.MaxDuration - 1, algorithm.MaxDuration}[seq/5%6]
		w := mustNew(t, slidingwindow.Config{Limit: limit, Window: time.Duration(window) * time.Microsecond})
		ref := &reference{limit: limit, window: window, counts: map[int64]int64{}}
		now := int64(t0) + rng.Int64N(window)
		s := w.Init(algorithm.State{}, now)
		ref.last = math.MinInt64
		for i := range 100 {
			switch rng.IntN(10) {
			case 0:
				now -= rng.Int64N(window + 1) // steps back
			case 1:
				now += rng.Int64N(3 * window)
			default:
				now += rng.Int64N(window/3 + 2)
			}
			cost := 1 + rng.Int64N(limit)
			if rng.IntN(3) == 0 {
				cost = 1 + rng.Int64N(min(limit, 3))
			}
			var got, want algorithm.Result
			if rng.IntN(4) == 0 {
				got, want = w.Peek(s, now, cost), ref.decide(now, cost)
			} else {
				s, got = w.Take(s, now, cost)
				want = ref.decide(now, cost)
				if want.Allowed() {
					ref.admit(now, cost)
					want = ref.decide(now, cost)
					want.RetryAfter = 0
				}
			}
			if got != want {
				t.Fatalf("sequence %d (limit %d, window %dµs), step %d: cost %d at t0%+dµs: got %+v, want %+v",
					seq, limit, window, i, cost, now-t0, got, want)
			}
		}
	}
}
