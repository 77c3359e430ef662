package tokenbucket_test

import (
	"math"
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// Design §2.1 adds the capacities' difference to the tokens in float64,
// as the script does. A fraction within half an ulp of the sum below a
// whole token rounds up to it: 3 − 2^-51 tokens of 4, widened to 2^40,
// leave 2^40 − 1 whole tokens where 2^40 − 4 + 2 were whole before. Go
// and Lua agree on it; algorithm.CheckInherit allows this one token.
func TestInheritSumRoundsToNearest(t *testing.T) {
	const now = 1_700_000_000_000_000
	from, err := tokenbucket.New(tokenbucket.Config{Capacity: 4, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	to, err := tokenbucket.New(tokenbucket.Config{Capacity: algorithm.MaxLimit, Rate: float64(algorithm.MaxLimit)})
	if err != nil {
		t.Fatal(err)
	}
	s := algorithm.State{N0: int64(math.Float64bits(3 - 0x1p-51)), N1: now}
	next := to.Inherit(from.Tag(), s, now, algorithm.AsIs)
	if got, want := math.Float64frombits(uint64(next.N0)), float64(algorithm.MaxLimit-1); got != want {
		t.Fatalf("tokens %v, want %v", got, want)
	}
	if got := to.Peek(next, now, 1).Remaining; got != algorithm.MaxLimit-1 {
		t.Fatalf("Remaining %d, want %d", got, algorithm.MaxLimit-1)
	}
}

// An interval bucket converts on its own schedule with the old capacity
// (design §2.2): 5 of 100 left at 10:00:00.0, read at 10:00:01.3 by a
// bucket of 10 that adds 2 every 500ms, is 5 + 2·2 = 9 of 100 since
// 10:00:01.0, so 0 of 10 as-is and ⌊9·10/100⌋ = 0 proportionally; the
// next tick, at 10:00:01.5, adds 2.
func TestInheritIntervalSchedule(t *testing.T) {
	const t0 = 1_700_000_000_000_000
	from, _ := tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 100, Tokens: 1, Interval: 1e9})
	to, _ := tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 10, Tokens: 2, Interval: 5e8})
	s := algorithm.State{N0: 5, N1: t0}
	for _, rule := range []algorithm.Rule{algorithm.AsIs, algorithm.Proportional} {
		next := to.Inherit(from.Tag(), s, t0+1_300_000, rule)
		if next != (algorithm.State{N0: 0, N1: t0 + 1_000_000}) {
			t.Fatalf("%v: got %+v, want 0 tokens since %d", rule, next, t0+1_000_000)
		}
		if r := to.Peek(next, t0+1_500_000, 1); r.Remaining != 2 {
			t.Fatalf("%v: at the next tick: %+v, want 2 remaining", rule, r)
		}
	}
}
