// Package algorithm defines the contract between a rate-limiting algorithm
// and the stores that keep its state.
//
// An algorithm is a pure description: its configuration, the state it keeps
// per key and one transition that, given that state, the current instant
// and a cost, says whether the cost is admitted and what the new state is.
// The in-memory store runs the transition in Go; the Redis stores run the
// same transition as a Lua script, identified by [Spec]. Every instant and
// duration is an integer number of microseconds, so that Go and Lua (whose
// numbers are doubles) compute bit-identical results.
//
// This package is for implementers of stores and algorithms. Users build
// algorithms with the tokenbucket, gcra, slidinglog, slidingwindow and
// fixedwindow packages and hand them to ratelimit.New.
package algorithm

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

var (
	// ErrInvalidConfig reports a configuration that cannot be used
	// (a zero capacity, a negative rate, a window longer than MaxDuration...).
	ErrInvalidConfig = errors.New("ratelimit: invalid config")

	// ErrInvalidCost reports a cost below 1. Nothing is consumed.
	ErrInvalidCost = errors.New("ratelimit: cost must be at least 1")

	// ErrCostExceedsLimit reports a cost larger than the algorithm can ever
	// admit at once. Nothing is consumed, and waiting would not help.
	ErrCostExceedsLimit = errors.New("ratelimit: cost exceeds the limit")
)

// MaxDuration is the longest window, interval or refill time an algorithm
// accepts, in microseconds (2^48 µs, a little under 9 years). It keeps every
// instant an algorithm computes below 2^53, where doubles stop being exact.
const MaxDuration = int64(1) << 48

// MaxLimit is the largest capacity or limit an algorithm accepts (2^40).
// Fractional token counts up to it keep 13 bits of fraction in a double.
const MaxLimit = int64(1) << 40

// Result is the outcome of one decision, in the units stores exchange:
// the three whole numbers the Lua scripts reply. The cost was admitted (for
// a peek: would be) exactly when RetryAfter is 0. It has no more fields
// than Go passes in registers, since every decision returns it through
// several calls.
type Result struct {
	// Remaining is how much cost could still be admitted now, after this
	// decision, rounded down. It is between 0 and the algorithm's Limit.
	Remaining int64
	// RetryAfter is how many microseconds from now the same cost would be
	// admitted, if nothing else happened in between; 0 when it is admitted.
	RetryAfter int64
	// ResetAfter is how many microseconds from now the key's state becomes
	// indistinguishable from a key never seen; 0 when it already is. Stores
	// use it as the key's time to live.
	ResetAfter int64
}

// Allowed reports whether the cost was admitted (for a peek: whether it
// would be).
func (r Result) Allowed() bool { return r.RetryAfter == 0 }

// Fresh is the result for a key that has no state: nothing is used, so the
// full limit remains. A store answers a peek at a missing key with it.
func Fresh(limit int64) Result {
	return Result{Remaining: limit}
}

// Algorithm is a rate-limiting algorithm with its configuration: the
// transition a store applies to each key's [State]. It is immutable and
// safe for concurrent use; the states it works on are not (stores
// serialise calls for one key).
//
// A decision is one call, Take, made while the store holds the key's state
// exclusively: it decides, charges an admitted cost and computes the
// numbers of the result in one pass over the state. Peek answers the same
// question without charging. Both are pure functions of the state, the
// instant and the cost, which is what lets the Redis stores run them as a
// Lua script with bit-identical results. A state that has reached its
// ResetAfter is treated exactly as a fresh one, so a store may keep it or
// drop it.
//
// States are passed and returned by value, in registers, so that a store
// may keep a state in a form of its own (two words inline, for a [Narrow]
// algorithm): a pointer to a State built from it on the stack would make
// that State escape to the heap on every call. Only a state's Log is
// shared: Init and Take may change the Log a state they are given points
// to, in place, and return a state pointing to it. A store must therefore
// keep the state Init or Take returns in place of the one it gave, and not
// use that one again.
type Algorithm interface {
	// Limit is the largest cost a single request may have.
	Limit() int64
	// Init returns the state of a key first seen at now (Unix µs). Its
	// numbers depend on now alone; old matters only for the memory
	// old.Log holds, which Init may empty and reuse, so that a store
	// reusing a slot does not allocate again. Peek of the returned state
	// at now is [Fresh]. [CheckInit] tests an algorithm against this.
	Init(old State, now int64) State
	// Take decides a cost (1 ≤ cost ≤ Limit) at now (Unix µs) on s, and
	// returns the key's new state and the result. When Peek(s, now, cost)
	// admits the cost, the new state is s charged with it, so that
	// exactly cost less remains, and the result is what Peek of the new
	// state reports, with RetryAfter 0: what remains, and when the key is
	// fresh again. Otherwise the new state means what s did, and the
	// result is Peek(s, now, cost), the denial. [CheckTake] tests an
	// algorithm against this.
	//
	// An algorithm that keeps a Log (the sliding log) changes s.Log in
	// place and returns a state pointing to the same Log, or to a new one
	// when s had none: s itself may then no longer mean what it did, and
	// the store must keep the returned state.
	Take(s State, now, cost int64) (State, Result)
	// Peek reports what taking cost at now would decide, without
	// charging: for a cost that would be denied, the denial (Remaining,
	// RetryAfter, ResetAfter); for one that would be admitted, RetryAfter
	// 0, and Remaining and ResetAfter describing s as it is, before the
	// cost. It changes nothing that s points to.
	Peek(s State, now, cost int64) Result
	// Spec describes the algorithm for stores that run it elsewhere.
	Spec() Spec
}

// Narrow is implemented by an algorithm whose state is N0 and N1 alone:
// Init and Take return states whose N2 is 0 and Log nil, whatever state
// they are given, and Peek reads only N0 and N1. A store may then keep
// two words per key, and hand the algorithm State{N0: n0, N1: n1}. Stores
// find it by type assertion; [CheckInit] and [CheckTake] test an
// algorithm that implements it against this.
type Narrow interface {
	Algorithm
	// NarrowState does nothing: it declares the algorithm Narrow.
	NarrowState()
}

// CheckInit reports how alg.Init(old, now) departs from its contract (see
// [Algorithm] and [Narrow]), or nil when it keeps it, and returns the state
// Init returned. Algorithms' step tests start their states with it.
func CheckInit(alg Algorithm, old State, now int64) (State, error) {
	// The numbers only: the Log Init returns may be old's, emptied.
	zero := alg.Init(State{}, now)
	s := alg.Init(old, now)
	if s.N0 != zero.N0 || s.N1 != zero.N1 || s.N2 != zero.N2 {
		return s, fmt.Errorf("init at %d: the numbers of %+v depend on the old state: a zero one gives %+v", now, s, zero)
	}
	if _, ok := alg.(Narrow); ok && (s.N2 != 0 || s.Log != nil) {
		return s, fmt.Errorf("init at %d of a Narrow algorithm: got N2 %d and Log %v, want 0 and nil", now, s.N2, s.Log)
	}
	if got, want := alg.Peek(s, now, 1), Fresh(alg.Limit()); got != want {
		return s, fmt.Errorf("init at %d: Peek of the new state gives %+v, want %+v", now, got, want)
	}
	return s, nil
}

// CheckTake reports how alg.Take(s, now, cost) departs from its contract,
// stated with Peek (see [Algorithm] and [Narrow]), or nil when it keeps it,
// and returns what Take returned. Algorithms' tests call it on every
// decision they make, and go on with the state it returns.
func CheckTake(alg Algorithm, s State, now, cost int64) (State, Result, error) {
	// Peek before Take: Take may change s.Log in place.
	want, one := alg.Peek(s, now, cost), alg.Peek(s, now, 1)
	_, narrow := alg.(Narrow)
	if narrow {
		if two := alg.Peek(State{N0: s.N0, N1: s.N1}, now, cost); two != want {
			return s, want, fmt.Errorf("peek at %d of %d by a Narrow algorithm reads more than N0 and N1: %+v gives %+v, its N0 and N1 alone %+v", now, cost, s, want, two)
		}
	}
	next, got := alg.Take(s, now, cost)
	if narrow && (next.N2 != 0 || next.Log != nil) {
		return next, got, fmt.Errorf("take at %d of %d by a Narrow algorithm: got N2 %d and Log %v, want 0 and nil", now, cost, next.N2, next.Log)
	}
	if !want.Allowed() {
		if got != want {
			return next, got, fmt.Errorf("denied take at %d of %d: got %+v, Peek said %+v", now, cost, got, want)
		}
		if after := alg.Peek(next, now, 1); after != one {
			return next, got, fmt.Errorf("denied take at %d of %d changed the state: a cost of 1 was %+v, now %+v", now, cost, one, after)
		}
		return next, got, nil
	}
	after := alg.Peek(next, now, cost)
	after.RetryAfter = 0
	if got != after {
		return next, got, fmt.Errorf("admitted take at %d of %d: got %+v, Peek of the new state says %+v", now, cost, got, after)
	}
	if got.Remaining != want.Remaining-cost {
		return next, got, fmt.Errorf("admitted take at %d of %d left %d of the %d Peek saw: charged %d", now, cost, got.Remaining, want.Remaining, want.Remaining-got.Remaining)
	}
	return next, got, nil
}

// Combine is the result of several limits deciding one request together,
// given each limit's own result: it is admitted when every limit admits
// it. Remaining is the least any limit has left, RetryAfter the longest
// any limit asks to wait (each denying limit denies until its own
// RetryAfter, so the request is denied until the last of them), and
// ResetAfter the longest until every limit is fresh. An empty rs gives
// the zero Result.
func Combine(rs []Result) Result {
	if len(rs) == 0 {
		return Result{}
	}
	c := rs[0]
	for _, r := range rs[1:] {
		c.Remaining = min(c.Remaining, r.Remaining)
		c.RetryAfter = max(c.RetryAfter, r.RetryAfter)
		c.ResetAfter = max(c.ResetAfter, r.ResetAfter)
	}
	return c
}

// Expiry returns the instant (Unix µs) from which s is the same as a fresh
// state, so that a store may drop it, or at itself when s is already fresh
// at at. at may be earlier than the instant s was last decided at: every
// algorithm's ResetAfter names an instant that does not depend on when it
// is asked.
func Expiry(alg Algorithm, s State, at int64) int64 {
	return at + alg.Peek(s, at, 1).ResetAfter
}

// State is one key's state under one algorithm, held by value so that a
// store keeps it inline, with no allocation per key and no pointer to
// chase. Its numbers mean what the algorithm that set them says (tokens,
// instants, counts); only that algorithm reads them. The zero State is not
// a fresh one: stores start a key with [Algorithm.Init].
//
// Its fields are separate words, not an array, so that a State passed by
// value travels in registers (Go passes arrays of more than one element in
// memory, and a copy of a just-written state through memory stalls).
type State struct {
	// N0, N1 and N2 are the algorithm's numbers. A float is kept as its
	// IEEE 754 bits.
	N0, N1, N2 int64
	// Log holds the admissions of an algorithm that remembers each one
	// (the sliding log); nil for every other algorithm.
	Log *Log
}

// Log is the part of a State that grows with what a key admits: amounts
// admitted at instants, kept in order of instant from Entries[Head] on.
// The algorithm that owns it decides how it is kept; stores only hold it.
type Log struct {
	Entries []Entry
	Head    int
}

// Entry is an amount admitted at an instant (Unix µs).
type Entry struct {
	At, Cost int64
}

// Spec names an algorithm and its parameters for stores that implement the
// transition themselves (the Redis stores' Lua scripts).
type Spec struct {
	// Name identifies the transition: "tokenbucket", "tokenbucket-interval",
	// "gcra", "slidinglog", "slidingwindow" or "fixedwindow".
	Name string
	// Params are the numeric parameters, in the order the transition's
	// documentation gives. Durations are in microseconds.
	Params []float64
}

// CheckCost returns an error wrapping ErrInvalidCost or ErrCostExceedsLimit
// when cost cannot be asked of an algorithm whose limit is limit.
func CheckCost(cost, limit int64) error {
	if cost < 1 {
		return fmt.Errorf("%w: got %d", ErrInvalidCost, cost)
	}
	if cost > limit {
		return fmt.Errorf("%w: cost %d, limit %d", ErrCostExceedsLimit, cost, limit)
	}
	return nil
}

// CheckLimit returns an error wrapping ErrInvalidConfig unless 1 ≤ v ≤ MaxLimit.
func CheckLimit(name string, v int64) error {
	if v < 1 || v > MaxLimit {
		return fmt.Errorf("%w: %s must be in [1, %d], got %d", ErrInvalidConfig, name, MaxLimit, v)
	}
	return nil
}

// CheckDuration returns an error wrapping ErrInvalidConfig unless
// 1 ≤ micros ≤ MaxDuration.
func CheckDuration(name string, micros int64) error {
	if micros < 1 || micros > MaxDuration {
		return fmt.Errorf("%w: %s must be between 1µs and %v, got %s", ErrInvalidConfig, name, time.Duration(MaxDuration)*time.Microsecond, microsString(micros))
	}
	return nil
}

// microsString formats a span of µs as a time.Duration does ("1h30m0s"),
// or in µs when it is beyond what a Duration holds.
func microsString(micros int64) string {
	const most = int64(1<<63-1) / int64(time.Microsecond)
	if micros > most || micros < -most {
		return strconv.FormatInt(micros, 10) + "µs"
	}
	return (time.Duration(micros) * time.Microsecond).String()
}

// CheckFinite returns an error wrapping ErrInvalidConfig unless v is a
// finite number greater than 0.
func CheckFinite(name string, v float64) error {
	if !(v > 0) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: %s must be a finite number above 0, got %v", ErrInvalidConfig, name, v)
	}
	return nil
}

// FloorDiv returns ⌊a/b⌋ for b > 0, rounding toward minus infinity.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
