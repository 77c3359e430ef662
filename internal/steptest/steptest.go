// Package steptest replays tables of steps on an algorithm's state, in the
// shape of golang.org/x/time/rate's tests: named instants, one row per call,
// failures reported as "got …, want …". The algorithm packages' tests share
// it.
package steptest

import (
	"testing"

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
