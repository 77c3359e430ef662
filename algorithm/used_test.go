package algorithm_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestUsedIsWhatPeekSees checks Used against each algorithm's own count:
// after random admissions, at the instant of the last one and later, what
// Used reads from the state and the Tag alone is the limit less what Peek
// leaves (the buckets only at the instant their state is dated: their
// refill since is not counted, so Used never counts less than that).
func TestUsedIsWhatPeekSees(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 1))
	for _, p := range per {
		t.Run(p.name, func(t *testing.T) {
			for range 300 {
				limit := 1 + rng.Int64N(30)
				alg, err := p.new(limit, time.Duration(1+rng.Int64N(5000))*time.Microsecond)
				if err != nil {
					t.Fatal(err)
				}
				now := minute0 + rng.Int64N(1_000_000)
				s := alg.Init(algorithm.State{}, now)
				for range rng.IntN(12) {
					now += rng.Int64N(2000)
					s, _ = alg.Take(s, now, 1+rng.Int64N(limit))
				}
				bucket := p.name == "tokenbucket" || p.name == "interval"
				for _, at := range []int64{now, now + rng.Int64N(3000), now + rng.Int64N(20000)} {
					got := algorithm.Used(alg.Tag(), s, at)
					want := limit - alg.Peek(s, at, 1).Remaining
					if bucket && at != s.N1 {
						if got < want {
							t.Fatalf("%v at +%dµs: Used %d, below the %d Peek sees used", alg, at-now, got, want)
						}
						continue
					}
					if got != want {
						t.Fatalf("%v, state %+v at +%dµs: Used %d, Peek sees %d used", alg, s, at-now, got, want)
					}
				}
			}
		})
	}
}

// TestCarryTakingTurns is the case: two limits of different kinds
// on one key, taking turns at one instant, each starting from what the
// other's state had used, admit no more than the larger limit, for every
// ordered pair of the six kinds, equal and unequal limits. Before Carry
// (a foreign state read as fresh) every request was admitted.
func TestCarryTakingTurns(t *testing.T) {
	for _, limits := range [][2]int64{{10, 10}, {10, 25}, {25, 10}, {1, 7}} {
		for _, pa := range per {
			for _, pb := range per {
				if pa.name == pb.name {
					continue
				}
				a, errA := pa.new(limits[0], time.Minute)
				b, errB := pb.new(limits[1], time.Hour)
				if errA != nil || errB != nil {
					t.Fatal(errA, errB)
				}
				now := minute0
				algs := []algorithm.Tagged{a, b}
				var s algorithm.State
				var owner algorithm.Tagged // whose state s is; nil: none yet
				admitted := 0
				for i := range 80 {
					alg := algs[i%2]
					cur := s
					switch {
					case owner == nil:
						cur = alg.Init(algorithm.State{}, now)
					case owner != alg:
						cur = algorithm.Carry(alg, owner.Tag(), s, now)
					}
					next, r := alg.Take(cur, now, 1)
					if r.Allowed() {
						admitted++
						s, owner = next, alg
					}
				}
				if most := max(limits[0], limits[1]); int64(admitted) > most {
					t.Errorf("%v and %v taking turns: %d of 80 admitted, want at most %d", a, b, admitted, most)
				}
			}
		}
	}
}

// TestUsedUnreadable checks that a state Used cannot read (an unknown
// Kind, parameters or numbers out of range) counts as fully used, and
// that Carry then leaves nothing.
func TestUsedUnreadable(t *testing.T) {
	for _, c := range []struct {
		tag algorithm.Tag
		s   algorithm.State
	}{
		{algorithm.Tag{Kind: 'X', P0: 5}, algorithm.State{}},
		{algorithm.Tag{Kind: fixedwindow.Kind, P0: 0, P1: 10}, algorithm.State{}},
		{algorithm.Tag{Kind: fixedwindow.Kind, P0: 5, P1: 10}, algorithm.State{N0: 1, N1: 11}},
		{algorithm.Tag{Kind: tokenbucket.IntervalKind, P0: 5}, algorithm.State{N0: 1 << 60}},
		{algorithm.Tag{Kind: slidingwindow.Kind, P0: 5, P1: 10}, algorithm.State{N2: -1}},
	} {
		if got := algorithm.Used(c.tag, c.s, minute0); got != algorithm.MaxLimit {
			t.Errorf("Used(%v, %+v) = %d, want MaxLimit", c.tag, c.s, got)
		}
	}
	for _, p := range per {
		alg, err := p.new(5, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		s := algorithm.Carry(alg, algorithm.Tag{Kind: 'X'}, algorithm.State{}, minute0)
		if r := alg.Peek(s, minute0, 1); r.Remaining != 0 || r.Allowed() {
			t.Errorf("%v carrying an unreadable state: %+v, want nothing left", alg, r)
		}
	}
}
