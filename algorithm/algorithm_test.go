package algorithm_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func TestCheckCost(t *testing.T) {
	for _, tc := range []struct {
		cost, limit int64
		want        error
	}{
		{1, 1, nil},
		{1, 5, nil},
		{5, 5, nil},
		{algorithm.MaxLimit, algorithm.MaxLimit, nil},
		{0, 5, algorithm.ErrInvalidCost},
		{-1, 5, algorithm.ErrInvalidCost},
		{math.MinInt64, 5, algorithm.ErrInvalidCost},
		{0, 0, algorithm.ErrInvalidCost}, // a cost below 1 is reported first
		{6, 5, algorithm.ErrCostExceedsLimit},
		{2, 1, algorithm.ErrCostExceedsLimit},
		{math.MaxInt64, algorithm.MaxLimit, algorithm.ErrCostExceedsLimit},
	} {
		err := algorithm.CheckCost(tc.cost, tc.limit)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("CheckCost(%d, %d): got %v, want %v", tc.cost, tc.limit, err, tc.want)
		}
	}
}

func TestCheckLimit(t *testing.T) {
	for _, v := range []int64{1, 2, algorithm.MaxLimit} {
		if err := algorithm.CheckLimit("x", v); err != nil {
			t.Errorf("CheckLimit(%d): got %v, want nil", v, err)
		}
	}
	for _, v := range []int64{0, -1, math.MinInt64, algorithm.MaxLimit + 1, math.MaxInt64} {
		if err := algorithm.CheckLimit("x", v); !errors.Is(err, algorithm.ErrInvalidConfig) {
			t.Errorf("CheckLimit(%d): got %v, want ErrInvalidConfig", v, err)
		}
	}
}

func TestCheckDuration(t *testing.T) {
	for _, v := range []int64{1, 1_000_000, algorithm.MaxDuration} {
		if err := algorithm.CheckDuration("x", v); err != nil {
			t.Errorf("CheckDuration(%d): got %v, want nil", v, err)
		}
	}
	for _, v := range []int64{0, -1, math.MinInt64, algorithm.MaxDuration + 1, math.MaxInt64} {
		if err := algorithm.CheckDuration("x", v); !errors.Is(err, algorithm.ErrInvalidConfig) {
			t.Errorf("CheckDuration(%d): got %v, want ErrInvalidConfig", v, err)
		}
	}
}

func TestCheckFinite(t *testing.T) {
	for _, v := range []float64{math.SmallestNonzeroFloat64, 0.5, 1, 1e300, math.MaxFloat64} {
		if err := algorithm.CheckFinite("x", v); err != nil {
			t.Errorf("CheckFinite(%v): got %v, want nil", v, err)
		}
	}
	for _, v := range []float64{0, math.Copysign(0, -1), -1, -math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1)} {
		if err := algorithm.CheckFinite("x", v); !errors.Is(err, algorithm.ErrInvalidConfig) {
			t.Errorf("CheckFinite(%v): got %v, want ErrInvalidConfig", v, err)
		}
	}
}

func TestFloorDiv(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{
		{0, 10, 0},
		{9, 10, 0},
		{10, 10, 1},
		{11, 10, 1},
		{-1, 10, -1},
		{-9, 10, -1},
		{-10, 10, -1},
		{-11, 10, -2},
		{-20, 10, -2},
		{math.MinInt64, 1, math.MinInt64},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MinInt64, math.MaxInt64, -2},
	} {
		if got := algorithm.FloorDiv(tc.a, tc.b); got != tc.want {
			t.Errorf("FloorDiv(%d, %d): got %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestFresh(t *testing.T) {
	got := algorithm.Fresh(7)
	want := algorithm.Result{Remaining: 7}
	if got != want {
		t.Errorf("Fresh(7): got %+v, want %+v", got, want)
	}
}

// broken is a token bucket that breaks its contract as told.
type broken struct {
	algorithm.Algorithm
	staleResult   bool // report the state as it was before the charge
	chargeDenials bool // charge a cost even when it is denied
	neverCharge   bool // admit without charging
	takeN2        bool // return a state whose N2 is not 0
	takeLog       bool // return a state with a Log
	peekN2        bool // let N2 change what Peek reports
	initN2        bool // start a state whose N2 is not 0
	initFromOld   bool // start a state with the old state's N0
}

func (b broken) Init(old algorithm.State, now int64) algorithm.State {
	s := b.Algorithm.Init(old, now)
	if b.initN2 {
		s.N2 = 1
	}
	if b.initFromOld {
		s.N0 = old.N0
	}
	return s
}

func (b broken) Take(s algorithm.State, now, cost int64) (algorithm.State, algorithm.Result) {
	before := b.Peek(s, now, cost)
	if b.neverCharge && before.Allowed() {
		return s, before
	}
	next, r := b.Algorithm.Take(s, now, cost)
	switch {
	case b.staleResult && r.Allowed():
		return next, before
	case b.chargeDenials && !r.Allowed():
		next.N0 = int64(math.Float64bits(-1))
	}
	if b.takeN2 {
		next.N2 = 1
	}
	if b.takeLog {
		next.Log = new(algorithm.Log)
	}
	return next, r
}

func (b broken) Peek(s algorithm.State, now, cost int64) algorithm.Result {
	r := b.Algorithm.Peek(s, now, cost)
	if b.peekN2 {
		r.ResetAfter += s.N2
	}
	return r
}

// narrow is broken declared Narrow.
type narrow struct{ broken }

func (narrow) NarrowState() {}

func TestCheckTake(t *testing.T) {
	bucket, err := tokenbucket.New(tokenbucket.Config{Capacity: 3, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	const t0 = int64(1_700_000_000_000_000)
	// A state started from an old one that means nothing, then three
	// admitted costs of 1, then a denied one. The states a Narrow
	// algorithm is handed carry an N2 it must ignore.
	run := func(alg algorithm.Algorithm) error {
		s, err := algorithm.CheckInit(alg, algorithm.State{N0: 12345, N1: 678, N2: 9}, t0)
		if err != nil {
			return err
		}
		_, isNarrow := alg.(algorithm.Narrow)
		for range 4 {
			if isNarrow {
				s.N2 = 5
			}
			if s, _, err = algorithm.CheckTake(alg, s, t0, 1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := run(bucket); err != nil {
		t.Errorf("token bucket: %v", err)
	}
	if _, ok := algorithm.Algorithm(bucket).(algorithm.Narrow); !ok {
		t.Error("the token bucket is not Narrow")
	}
	if err := run(narrow{broken{Algorithm: bucket}}); err != nil {
		t.Errorf("token bucket, wrapped: %v", err)
	}
	// N2 and Log are a Narrow algorithm's business only.
	if err := run(broken{Algorithm: bucket, takeN2: true, takeLog: true, initN2: true}); err != nil {
		t.Errorf("a token bucket not declared Narrow, leaving N2 and Log set: %v", err)
	}
	for _, c := range []struct {
		alg  algorithm.Algorithm
		what string
	}{
		{broken{Algorithm: bucket, staleResult: true}, "a Take that reports the state before its charge"},
		{broken{Algorithm: bucket, chargeDenials: true}, "a Take that charges a denied cost"},
		{broken{Algorithm: bucket, neverCharge: true}, "a Take that admits without charging"},
		{broken{Algorithm: bucket, initFromOld: true}, "an Init that keeps a number of the old state"},
		{narrow{broken{Algorithm: bucket, takeN2: true}}, "a Narrow Take that returns N2 ≠ 0"},
		{narrow{broken{Algorithm: bucket, takeLog: true}}, "a Narrow Take that returns a Log"},
		{narrow{broken{Algorithm: bucket, peekN2: true}}, "a Narrow Peek that reads N2"},
		{narrow{broken{Algorithm: bucket, initN2: true}}, "a Narrow Init that returns N2 ≠ 0"},
	} {
		if err := run(c.alg); err == nil {
			t.Errorf("%s passed", c.what)
		} else {
			t.Logf("%s: %v", c.what, err)
		}
	}
}

// TestCheckDurationSaysDurations: a duration out of range is reported as
// durations, not as counts of µs ("281474976710656µs").
func TestCheckDurationSaysDurations(t *testing.T) {
	for _, c := range []struct {
		micros int64
		want   string
	}{
		{0, "Window must be between 1µs and 78187h29m36.710656s, got 0s"},
		{algorithm.MaxDuration + 1, "got 78187h29m36.710657s"},
		{1 << 62, "got 4611686018427387904µs"},
	} {
		err := algorithm.CheckDuration("Window", c.micros)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckDuration(%d) = %v, want it to say %q", c.micros, err, c.want)
		}
	}
}
