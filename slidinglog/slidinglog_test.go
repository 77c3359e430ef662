package slidinglog_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
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

// TestLogLoweredLimit checks a log holding more than the limit (kept
// across a lower limit): nothing remains, never a negative count.
func TestLogLoweredLimit(t *testing.T) {
	hundred := mustNew(t, slidinglog.Config{Limit: 100, Window: time.Second})
	s := hundred.Init(algorithm.State{}, t0)
	for i := range int64(19) {
		s, _ = hundred.Take(s, t0+i, 5)
	}
	ten := mustNew(t, slidinglog.Config{Limit: 10, Window: time.Second})
	got := ten.Peek(s, t1, 1)
	// 95 used, 86 must leave: the 18th entry, at t0+17, takes 90 out.
	want := algorithm.Result{Remaining: 0, RetryAfter: t0 + 17 + sec - t1, ResetAfter: t0 + 18 + sec - t1}
	if got != want {
		t.Errorf("Peek of 95 logged under a limit of 10: got %+v, want %+v", got, want)
	}
}

func TestLogClockStepsBack(t *testing.T) {
	l := mustNew(t, slidinglog.Config{Limit: 4, Window: time.Second})
	run(t, l, []step{
		{t2, 1, ok(3, 4*d)},
		{t5, 1, ok(2, 4*d)},
		// Back to t4: decided at t5, the newest admission, and logged
		// there, so the log only grows at its end.
		{t4, 1, ok(1, 5*d)},
		{t4, 1, ok(0, 5*d)},
		{t4, 1, no(0, 2*d, 5*d)}, // the oldest, t2, leaves at t6
		{t6, 1, ok(0, 4*d)},
		{t8, 2, no(0, d, 2*d)}, // the 3 of t5 leave at t9
		{t9, 2, ok(1, 4*d)},
		// Far back: still decided at t9, so no freer than then.
		{t2, peek, ok(1, 11*d)},
		{t0, 2, no(1, 10*d, 13*d)}, // the 1 of t6 leaves at t6+4d = t0+10d
	})
}

func TestLogOneEntryPerInstant(t *testing.T) {
	l := mustNew(t, slidinglog.Config{Limit: slidinglog.MaxLimit, Window: time.Minute})
	s := l.Init(algorithm.State{}, t0)
	for i, c := range []struct{ at, cost int64 }{
		{t0, slidinglog.MaxLimit / 2}, {t0, 1}, {t0, 7}, {t1, slidinglog.MaxLimit/2 - 9}, {t1, 1},
	} {
		var r algorithm.Result
		if s, r = l.Take(s, c.at, c.cost); !r.Allowed() {
			t.Fatalf("charge %d: cost %d at t0%+dµs denied", i, c.cost, c.at-t0)
		}
	}
	want := []algorithm.Entry{{At: t0, Cost: slidinglog.MaxLimit/2 + 8}, {At: t1, Cost: slidinglog.MaxLimit}}
	if got := s.Log.Entries[s.Log.Head:]; !slices.Equal(got, want) {
		t.Errorf("entries after 5 admissions at 2 instants: got %+v, want %+v (one per instant, cumulative costs)", got, want)
	}
}

// TestLogForgetsExpired checks that an admission forgets the entries
// that left the window, however many, and that what they admitted no
// longer counts.
func TestLogForgetsExpired(t *testing.T) {
	const n = 30_000
	l := mustNew(t, slidinglog.Config{Limit: slidinglog.MaxLimit, Window: time.Second})
	s := l.Init(algorithm.State{}, t0)
	for i := range int64(n) {
		var r algorithm.Result
		if s, r = l.Take(s, t0+i, 1); !r.Allowed() {
			t.Fatalf("admission %d denied", i)
		}
	}
	if got := l.Peek(s, t0+n, 1); got.Remaining != slidinglog.MaxLimit-n {
		t.Fatalf("Peek after %d admissions: got %+v, want Remaining %d", n, got, slidinglog.MaxLimit-n)
	}
	// At t0+1s+10, the entries of t0 … t0+10 have left.
	s, got := l.Take(s, t0+sec+10, 5)
	if got != ok(slidinglog.MaxLimit-(n-11)-5, sec) {
		t.Fatalf("Take(5) once 11 entries left: got %+v", got)
	}
	if kept := len(s.Log.Entries) - s.Log.Head; kept != n-11+1 {
		t.Errorf("entries kept: got %d, want %d", kept, n-11+1)
	}
	// Every entry has left 1s after the last.
	if s, got = l.Take(s, t0+2*sec+10, slidinglog.MaxLimit); got != ok(0, sec) {
		t.Fatalf("Take(MaxLimit) once every entry left: got %+v", got)
	}
	if kept := len(s.Log.Entries) - s.Log.Head; kept != 1 {
		t.Errorf("entries kept: got %d, want 1", kept)
	}
}

// reference is a sliding log kept the obvious way: every admission, with
// the instant it was decided at.
type reference struct {
	limit, window int64
	log           []algorithm.Entry
}

func (r *reference) at(now int64) int64 {
	if n := len(r.log); n > 0 && r.log[n-1].At > now {
		return r.log[n-1].At
	}
	return now
}

// used sums the cost admitted in the window ending at t.
func (r *reference) used(t int64) int64 {
	sum := int64(0)
	for _, e := range r.log {
		if e.At > t-r.window {
			sum += e.Cost
		}
	}
	return sum
}

// decide returns the result for cost at now, as a peek reports it.
func (r *reference) decide(now, cost int64) algorithm.Result {
	t := r.at(now)
	used := r.used(t)
	res := algorithm.Result{Remaining: r.limit - used}
	if used > 0 {
		res.ResetAfter = r.log[len(r.log)-1].At + r.window - now
	}
	if used+cost > r.limit {
		// Try each instant an entry leaves the window, earliest first.
		for _, e := range r.log {
			if leave := e.At + r.window; leave > t && r.used(leave)+cost <= r.limit {
				res.RetryAfter = leave - now
				break
			}
		}
	}
	return res
}

func (r *reference) admit(now, cost int64) {
	r.log = append(r.log, algorithm.Entry{At: r.at(now), Cost: cost})
}

// TestLogAgainstReference replays random sequences, with large limits
// and costs, clocks that step back and long idle spells, on the log and
// on the reference, which must agree on every result.
func TestLogAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for seq := range 200 {
		limit := []int64{1, 3, 100, slidinglog.MaxLimit}[seq%4]
		window := []int64{1, 7, 1000, sec}[seq/4%4]
		l := mustNew(t, slidinglog.Config{Limit: limit, Window: time.Duration(window) * time.Microsecond})
		ref := &reference{limit: limit, window: window}
		s := l.Init(algorithm.State{}, t0)
		now := int64(t0)
		for i := range 300 {
			switch rng.IntN(10) {
			case 0:
				now -= rng.Int64N(2 * window) // steps back
			case 1:
				now += rng.Int64N(3 * window)
			default:
				now += rng.Int64N(window/10 + 2)
			}
			cost := 1 + rng.Int64N(limit)
			if rng.IntN(3) == 0 {
				cost = 1 + rng.Int64N(min(limit, 3))
			}
			var got, want algorithm.Result
			if rng.IntN(4) == 0 {
				got, want = l.Peek(s, now, cost), ref.decide(now, cost)
			} else {
				s, got = l.Take(s, now, cost)
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
