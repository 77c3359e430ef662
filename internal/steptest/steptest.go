// Package steptest replays tables of steps on an algorithm's state, in the
// shape of golang.org/x/time/rate's tests: named instants, one row per call,
// failures reported as "got …, want …". The algorithm packages' tests share
// it.
package steptest

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Peek as a step's cost makes the step a Peek instead of a Take.
const Peek = 0

// Step is one call on a state: Take(At, Cost), or Peek(At) when Cost is
// Peek, and the result it must give (Run fills in Limit).
type Step struct {
	At   int64
	Cost int64
	Want algorithm.Result
}

// OK is the wanted result of an admitted decision.
func OK(remaining, resetAfter int64) algorithm.Result {
	return algorithm.Result{Remaining: remaining, ResetAfter: resetAfter}
}

// No is the wanted result of a denied decision.
func No(remaining, retryAfter, resetAfter int64) algorithm.Result {
	return algorithm.Result{Remaining: remaining, RetryAfter: retryAfter, ResetAfter: resetAfter}
}

// Steps are the types a test may declare its steps with: a type of its own
// with Step's fields keeps its table's unkeyed literals short (go vet wants
// keys in literals of another package's struct).
type Steps interface {
	~struct {
		At   int64
		Cost int64
		Want algorithm.Result
	}
}

// Run replays steps on a state of alg created at start, naming instants
// relative to start in failures. A Peek step peeks for a cost of 1. Every
// result's Remaining must be within [0, alg.Limit()].
func Run[S Steps](t *testing.T, alg algorithm.Algorithm, start int64, steps []S) {
	t.Helper()
	s, err := algorithm.CheckInit(alg, algorithm.State{}, start)
	if err != nil {
		t.Fatal(err)
	}
	for i, raw := range steps {
		st := Step(raw)
		var got algorithm.Result
		op := "Peek"
		if st.Cost == Peek {
			got = alg.Peek(s, st.At, 1)
		} else {
			if s, got, err = algorithm.CheckTake(alg, s, st.At, st.Cost); err != nil {
				t.Errorf("step %d: %v", i, err)
			}
			op = "Take"
		}
		want := st.Want
		if got.Remaining < 0 || got.Remaining > alg.Limit() {
			t.Errorf("step %d: %s(start%+dµs, cost %d): got %+v, want Remaining within [0, %d]", i, op, st.At-start, st.Cost, got, alg.Limit())
		}
		if got != want {
			t.Errorf("step %d: %s(start%+dµs, cost %d): got %+v, want %+v", i, op, st.At-start, st.Cost, got, want)
		}
	}
}

// Same reports, as test errors, how b departs from a: their Spec and Limit,
// and the results of the same sequence of Takes and Peeks, from states
// created at start. The sequence is fixed (a seeded generator), with costs
// from 1 to the limit and gaps from 0 to about the time a unit takes to
// come back; it must see both admissions and denials, or Same reports
// that it tested too little. Tests use it to show that two ways of
// building an algorithm build the same one.
func Same(t *testing.T, a, b algorithm.Algorithm, start int64) {
	t.Helper()
	if sa, sb := a.Spec(), b.Spec(); !reflect.DeepEqual(sa, sb) {
		t.Errorf("Spec: got %+v, want %+v", sb, sa)
	}
	if la, lb := a.Limit(), b.Limit(); la != lb {
		t.Errorf("Limit: got %d, want %d", lb, la)
		return
	}
	// A unit comes back about every window/limit; gaps average half that,
	// so that the sequence uses more than comes back, and is denied.
	unit := int64(1)
	if w, ok := a.(interface{ Window() time.Duration }); ok {
		unit = max(w.Window().Microseconds()/a.Limit(), 1)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	sa, sb := a.Init(algorithm.State{}, start), b.Init(algorithm.State{}, start)
	now, admitted, denied := start, 0, 0
	for i := range 500 {
		now += rng.Int64N(unit + 1)
		cost := 1 + rng.Int64N(min(a.Limit(), 3))
		if rng.IntN(20) == 0 {
			cost = a.Limit()
		}
		if pa, pb := a.Peek(sa, now, cost), b.Peek(sb, now, cost); pa != pb {
			t.Fatalf("call %d: Peek(start%+dµs, cost %d): got %+v, want %+v", i, now-start, cost, pb, pa)
		}
		var ra, rb algorithm.Result
		sa, ra = a.Take(sa, now, cost)
		sb, rb = b.Take(sb, now, cost)
		if ra != rb {
			t.Fatalf("call %d: Take(start%+dµs, cost %d): got %+v, want %+v", i, now-start, cost, rb, ra)
		}
		if ra.Allowed() {
			admitted++
		} else {
			denied++
		}
	}
	if admitted == 0 || denied == 0 {
		t.Errorf("the sequence admitted %d and denied %d: it tests too little", admitted, denied)
	}
}
