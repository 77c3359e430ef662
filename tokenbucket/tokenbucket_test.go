package tokenbucket_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/steptest"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// Named instants, in Unix µs, d apart. t0 is a whole second.
const (
	d   = 250_000 // µs
	sec = 1_000_000

	t0  = 1_700_000_000 * sec
	t1  = t0 + 1*d
	t2  = t0 + 2*d
	t3  = t0 + 3*d
	t4  = t0 + 4*d
	t6  = t0 + 6*d
	t8  = t0 + 8*d
	t10 = t0 + 10*d
	t12 = t0 + 12*d
	t14 = t0 + 14*d
	t16 = t0 + 16*d
	t20 = t0 + 20*d
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

func mustNew(t *testing.T, cfg tokenbucket.Config) *tokenbucket.Bucket {
	t.Helper()
	b, err := tokenbucket.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return b
}

func mustNewInterval(t *testing.T, cfg tokenbucket.IntervalConfig) *tokenbucket.IntervalBucket {
	t.Helper()
	b, err := tokenbucket.NewInterval(cfg)
	if err != nil {
		t.Fatalf("NewInterval(%+v): %v", cfg, err)
	}
	return b
}

func TestBucket(t *testing.T) {
	// 3 tokens, one more every 2d (500ms).
	b := mustNew(t, tokenbucket.Config{Capacity: 3, Rate: 2})
	run(t, b, []step{
		{t0, peek, ok(3, 0)}, // a fresh bucket is full
		{t0, 1, ok(2, 2*d)},
		{t0, 2, ok(0, 6*d)},
		{t0, 1, no(0, 2*d, 6*d)},
		{t0, peek, no(0, 2*d, 6*d)},
		{t2 - 1, 1, no(0, 1, 4*d+1)}, // 1µs before the retry: 0.999998 tokens
		{t2, 1, ok(0, 6*d)},          // exactly at the retry
		{t3, 2, no(0, 3*d, 5*d)},     // half a token: 1.5 more in 3d
		{t3, peek, no(0, d, 5*d)},    // a peek asks for 1: half a token more
		{t6 - 1, 2, no(1, 1, 2*d+1)}, // 1.999998 tokens: Remaining rounds down
		{t6, 2, ok(0, 6*d)},
		{t6 + 10*sec, peek, ok(3, 0)}, // 10s refill 20 tokens, capped at 3
		{t6 + 10*sec, 3, ok(0, 6*d)},
		{t6 + 10*sec, 1, no(0, 2*d, 6*d)},
	})
}

func TestBucketPeek(t *testing.T) {
	b := mustNew(t, tokenbucket.Config{Capacity: 5, Rate: 2})
	run(t, b, []step{
		{t0, 3, ok(2, 6*d)},
		// Remaining is what is left before the peek's cost of 1, and the
		// peek consumes nothing: asking twice gives the same answer.
		{t1, peek, ok(2, 5*d)},
		{t1, peek, ok(2, 5*d)},
		{t1, 2, ok(0, 9*d)},
		{t1, peek, no(0, d, 9*d)}, // half a token left
		{t1, peek, no(0, d, 9*d)},
		{t3, 1, ok(0, 9*d)},
	})
}

func TestBucketRetryExact(t *testing.T) {
	// At 3 tokens per second a token takes 333333.3µs: the first instant
	// holding a whole token is 333334µs after the bucket was emptied.
	b := mustNew(t, tokenbucket.Config{Capacity: 1, Rate: 3})
	run(t, b, []step{
		{t0, 1, ok(0, 333_334)},
		{t0, 1, no(0, 333_334, 333_334)},
		{t0 + 333_333, 1, no(0, 1, 1)},
		{t0 + 333_334, 1, ok(0, 333_334)},
	})
}

func TestBucketHighRate(t *testing.T) {
	for _, tc := range []struct {
		capacity int64
		rate     float64
		cost     int64 // taken every µs
	}{
		{1, 1e6, 1},
		{10, 1e6, 1},
		{2, 2e6, 2},
		{1000, 1e9, 1000},
		{3, 2.5e6, 2},
	} {
		b := mustNew(t, tokenbucket.Config{Capacity: tc.capacity, Rate: tc.rate})
		s := b.Init(algorithm.State{}, t0)
		// One second of traffic at the full rate: never a denial.
		for now := int64(t0); now < t0+sec; now++ {
			var r algorithm.Result
			if s, r = b.Take(s, now, tc.cost); !r.Allowed() {
				t.Fatalf("capacity %d, rate %v/s: Take(t0%+dµs, %d): got %+v, want allowed",
					tc.capacity, tc.rate, now-t0, tc.cost, r)
			}
		}
	}

	// A million tokens per second is one per µs: an emptied bucket of one
	// refills in exactly 1µs.
	run(t, mustNew(t, tokenbucket.Config{Capacity: 1, Rate: 1e6}), []step{
		{t0, 1, ok(0, 1)},
		{t0, 1, no(0, 1, 1)},
		{t0 + 1, 1, ok(0, 1)},
		{t0 + 2, peek, ok(1, 0)},
	})
	// A billion per second is a thousand per µs.
	run(t, mustNew(t, tokenbucket.Config{Capacity: 1000, Rate: 1e9}), []step{
		{t0, 1000, ok(0, 1)},
		{t0, 1, no(0, 1, 1)},
		{t0 + 1, 1000, ok(0, 1)},
	})
}

func TestBucketClockStepsBack(t *testing.T) {
	b := mustNew(t, tokenbucket.Config{Capacity: 3, Rate: 2})
	run(t, b, []step{
		{t4, 3, ok(0, 6*d)},
		{t8, 1, ok(1, 4*d)},
		// The clock steps back 1s: nothing refills and nothing is lost;
		// refilling resumes from t8.
		{t4, peek, ok(1, 8*d)},
		{t4, 1, ok(0, 10*d)},
		{t6, peek, no(0, 4*d, 8*d)},
		{t10 - 1, 1, no(0, 1, 4*d+1)},
		{t10, peek, ok(1, 4*d)},
	})
}

func TestIntervalBucket(t *testing.T) {
	// Capacity 10, one token per second (4d), as in the redis.io guide.
	guide := tokenbucket.IntervalConfig{Capacity: 10, Tokens: 1, Interval: time.Second}

	t.Run("partial progress is kept", func(t *testing.T) {
		run(t, mustNewInterval(t, guide), []step{
			{t0, peek, ok(10, 0)},
			{t0, 3, ok(7, 12*d)},
			{t6, peek, ok(8, 6*d)}, // the token of t4; the next at t8
			{t6, 1, ok(7, 10*d)},   // three to go: t8, t12, t16
			{t8 - 1, peek, ok(7, 8*d+1)},
			{t8, peek, ok(8, 8*d)}, // 2d after the take, not 4d
		})
	})

	t.Run("denial and retry", func(t *testing.T) {
		run(t, mustNewInterval(t, guide), []step{
			{t0, 10, ok(0, 40*d)},
			{t0, 1, no(0, 4*d, 40*d)},
			{t4 - 1, 1, no(0, 1, 36*d+1)},
			{t4, 1, ok(0, 40*d)},
			{t10, 3, no(1, 6*d, 34*d)}, // the token of t8; two more at t12, t16
			{t16 - 1, 3, no(2, 1, 28*d+1)},
			{t16, 3, ok(0, 40*d)},
		})
	})

	t.Run("a refill that fills restarts the interval", func(t *testing.T) {
		run(t, mustNewInterval(t, guide), []step{
			{t0, 1, ok(9, 4*d)},
			{t6, peek, ok(10, 0)}, // full since t4: the same as a new bucket
			{t6, 1, ok(9, 4*d)},   // so the next token comes at t10, not t8
			{t8, peek, ok(9, 2*d)},
			{t10 - 1, peek, ok(9, 1)},
			{t10, peek, ok(10, 0)},
		})
	})

	t.Run("several tokens per interval", func(t *testing.T) {
		b := mustNewInterval(t, tokenbucket.IntervalConfig{Capacity: 10, Tokens: 4, Interval: time.Second})
		run(t, b, []step{
			{t0, 10, ok(0, 12*d)}, // 4+4+2: three intervals
			{t0, 1, no(0, 4*d, 12*d)},
			{t4, peek, ok(4, 8*d)},
			{t4, 5, no(4, 4*d, 8*d)},
			{t8, 5, ok(3, 8*d)},
			{t14, peek, ok(7, 2*d)},
			{t16, peek, ok(10, 0)}, // 7+4, capped at 10
		})
	})

	t.Run("more tokens per interval than capacity", func(t *testing.T) {
		b := mustNewInterval(t, tokenbucket.IntervalConfig{Capacity: 3, Tokens: 5, Interval: time.Second})
		run(t, b, []step{
			{t0, 2, ok(1, 4*d)},
			{t0, 2, no(1, 4*d, 4*d)},
			{t4, 2, ok(1, 4*d)}, // one refill fills it, capped at 3
			{t4, 1, ok(0, 4*d)},
			{t8 - 1, peek, no(0, 1, 1)},
			{t8, peek, ok(3, 0)},
		})
	})

	t.Run("clock steps back", func(t *testing.T) {
		run(t, mustNewInterval(t, guide), []step{
			{t8, 5, ok(5, 20*d)},
			{t16, 1, ok(6, 16*d)},
			// Back 1s: nothing refills, and the schedule from t16 holds.
			{t12, peek, ok(6, 20*d)},
			{t12, 6, ok(0, 44*d)},
			{t12, 1, no(0, 8*d, 44*d)},
			{t20, peek, ok(1, 36*d)},
		})
	})
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []tokenbucket.Config{
		{Capacity: 0, Rate: 1},
		{Capacity: -1, Rate: 1},
		{Capacity: math.MinInt64, Rate: 1},
		{Capacity: algorithm.MaxLimit + 1, Rate: 1e12},
		{Capacity: math.MaxInt64, Rate: 1e12},
		{Capacity: 1, Rate: 0},
		{Capacity: 1, Rate: math.Copysign(0, -1)},
		{Capacity: 1, Rate: -1},
		{Capacity: 1, Rate: math.NaN()},
		{Capacity: 1, Rate: math.Inf(1)},
		{Capacity: 1, Rate: math.Inf(-1)},
		{Capacity: 1, Rate: math.SmallestNonzeroFloat64},
		// Refilling takes just over algorithm.MaxDuration.
		{Capacity: 1, Rate: math.Nextafter(1e6/(1<<48), 0)},
		{Capacity: algorithm.MaxLimit, Rate: math.Nextafter(3906.25, 0)},
		{Capacity: 2, Rate: 1e6 / (1 << 48)},
	} {
		b, err := tokenbucket.New(cfg)
		if !errors.Is(err, algorithm.ErrInvalidConfig) || b != nil {
			t.Errorf("New(%+v): got (%v, %v), want (nil, ErrInvalidConfig)", cfg, b, err)
		}
	}
	for _, cfg := range []tokenbucket.Config{
		{Capacity: 1, Rate: 1},
		{Capacity: 1, Rate: 1e6 / (1 << 48)},          // fills in exactly MaxDuration
		{Capacity: algorithm.MaxLimit, Rate: 3906.25}, // fills in exactly MaxDuration
		{Capacity: algorithm.MaxLimit, Rate: math.MaxFloat64},
		{Capacity: 1, Rate: 0.001},
	} {
		b, err := tokenbucket.New(cfg)
		if err != nil || b.Limit() != cfg.Capacity {
			t.Errorf("New(%+v): got (%v, %v), want a bucket of limit %d", cfg, b, err, cfg.Capacity)
		}
	}
}

func TestNewIntervalValidates(t *testing.T) {
	const maxInterval = time.Duration(algorithm.MaxDuration) * time.Microsecond
	for _, cfg := range []tokenbucket.IntervalConfig{
		{Capacity: 0, Tokens: 1, Interval: time.Second},
		{Capacity: -1, Tokens: 1, Interval: time.Second},
		{Capacity: algorithm.MaxLimit + 1, Tokens: 1, Interval: time.Microsecond},
		{Capacity: 1, Tokens: 0, Interval: time.Second},
		{Capacity: 1, Tokens: -5, Interval: time.Second},
		{Capacity: 1, Tokens: algorithm.MaxLimit + 1, Interval: time.Second},
		{Capacity: 1, Tokens: 1, Interval: 0},
		{Capacity: 1, Tokens: 1, Interval: -time.Second},
		{Capacity: 1, Tokens: 1, Interval: time.Microsecond - 1}, // truncates to 0µs
		{Capacity: 1, Tokens: 1, Interval: math.MinInt64},
		{Capacity: 1, Tokens: 1, Interval: maxInterval + time.Microsecond},
		{Capacity: 1, Tokens: 1, Interval: math.MaxInt64},
		// Refilling takes longer than MaxDuration.
		{Capacity: 4, Tokens: 1, Interval: maxInterval/4 + time.Microsecond},
		{Capacity: 5, Tokens: 2, Interval: maxInterval/3 + time.Microsecond},
		{Capacity: algorithm.MaxLimit, Tokens: 1, Interval: time.Second},
	} {
		b, err := tokenbucket.NewInterval(cfg)
		if !errors.Is(err, algorithm.ErrInvalidConfig) || b != nil {
			t.Errorf("NewInterval(%+v): got (%v, %v), want (nil, ErrInvalidConfig)", cfg, b, err)
		}
	}
	for _, cfg := range []tokenbucket.IntervalConfig{
		{Capacity: 1, Tokens: 1, Interval: time.Microsecond},
		{Capacity: 1, Tokens: 1, Interval: 2*time.Microsecond - 1}, // truncates to 1µs
		{Capacity: 1, Tokens: 1, Interval: maxInterval},
		{Capacity: 4, Tokens: 1, Interval: maxInterval / 4},
		{Capacity: 5, Tokens: 2, Interval: maxInterval / 3},
		{Capacity: 1, Tokens: algorithm.MaxLimit, Interval: time.Second},
		{Capacity: algorithm.MaxLimit, Tokens: algorithm.MaxLimit, Interval: maxInterval},
		{Capacity: algorithm.MaxLimit, Tokens: 1, Interval: time.Duration(algorithm.MaxDuration/algorithm.MaxLimit) * time.Microsecond},
	} {
		b, err := tokenbucket.NewInterval(cfg)
		if err != nil || b.Limit() != cfg.Capacity {
			t.Errorf("NewInterval(%+v): got (%v, %v), want a bucket of limit %d", cfg, b, err, cfg.Capacity)
		}
	}
}

func TestSpec(t *testing.T) {
	b := mustNew(t, tokenbucket.Config{Capacity: 10, Rate: 2.5})
	if got, want := b.Spec(), (algorithm.Spec{Name: "tokenbucket", Params: []float64{10, 2.5}}); !specEqual(got, want) {
		t.Errorf("Bucket.Spec(): got %+v, want %+v", got, want)
	}
	ib := mustNewInterval(t, tokenbucket.IntervalConfig{Capacity: 10, Tokens: 2, Interval: 1500 * time.Millisecond})
	if got, want := ib.Spec(), (algorithm.Spec{Name: "tokenbucket-interval", Params: []float64{10, 2, 1_500_000}}); !specEqual(got, want) {
		t.Errorf("IntervalBucket.Spec(): got %+v, want %+v", got, want)
	}
}

func specEqual(a, b algorithm.Spec) bool {
	if a.Name != b.Name || len(a.Params) != len(b.Params) {
		return false
	}
	for i := range a.Params {
		if a.Params[i] != b.Params[i] {
			return false
		}
	}
	return true
}
