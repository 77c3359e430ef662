package algorithm_test

import (
	"errors"
	"math"
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

// brokenTake is a token bucket whose Take breaks its contract as told.
type brokenTake struct {
	algorithm.Algorithm
	staleResult   bool // report the state as it was before the charge
	chargeDenials bool // charge a cost even when it is denied
	neverCharge   bool // admit without charging
}

func (b brokenTake) Take(s *algorithm.State, now, cost int64) algorithm.Result {
	before := b.Peek(*s, now, cost)
	if b.neverCharge && before.Allowed() {
		return before
	}
	r := b.Algorithm.Take(s, now, cost)
	switch {
	case b.staleResult && r.Allowed():
		return before
	case b.chargeDenials && !r.Allowed():
		s.N0 = int64(math.Float64bits(-1))
	}
	return r
}

func TestCheckTake(t *testing.T) {
	bucket, err := tokenbucket.New(tokenbucket.Config{Capacity: 3, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	const t0 = int64(1_700_000_000_000_000)
	// Three admitted costs of 1, then a denied one.
	run := func(alg algorithm.Algorithm) error {
		var s algorithm.State
		alg.Init(&s, t0)
		for range 4 {
			if _, err := algorithm.CheckTake(alg, &s, t0, 1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := run(bucket); err != nil {
		t.Errorf("token bucket: %v", err)
	}
	if err := run(brokenTake{Algorithm: bucket, staleResult: true}); err == nil {
		t.Error("a Take that reports the state before its charge passed")
	}
	if err := run(brokenTake{Algorithm: bucket, chargeDenials: true}); err == nil {
		t.Error("a Take that charges a denied cost passed")
	}
	if err := run(brokenTake{Algorithm: bucket, neverCharge: true}); err == nil {
		t.Error("a Take that admits without charging passed")
	}
}
