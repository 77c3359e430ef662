package gcra

import (
	"math"
	"math/bits"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

var _ algorithm.Inheritor = (*Meter)(nil)

// Inherit returns s, written under from (a meter of burst B = from.P0 and
// emission interval E = from.P1, so τ = B·E), as this meter's state at
// now (design state-format.md §2.3). The key's debt d = max(TAT − now, 0)
// is carried as
//
//	AsIs:         d′ = min(⌈min(d, τ)·Every/E⌉, Burst·Every) + x   the units used, clamped to Burst
//	Proportional: d′ = ⌈min(d, τ)·Burst·Every/τ⌉ + x
//
// with exact 128-bit products, rounded toward more used, and the new TAT
// is now + d′. Beyond a full burst (d > τ) the key is in debt: units Book
// charged ahead (or a clock that stepped back). Under either rule the debt
// carries as the same units at this meter's interval, x = min(⌈min(d −
// τ, 2^48)·Every/E⌉, 2^48) (algorithm.MaxDuration), so that a limit changed after a
// booking does not hand its units out a second time. Any rule but
// Proportional is AsIs.
//
// A state under a from of another Kind, or whose burst, interval or τ is
// outside the ranges New accepts, is taken as fully used: a TAT of now +
// Burst·Every. A from equal to the meter's own Tag gives s as it is.
func (m *Meter) Inherit(from algorithm.Tag, s algorithm.State, now int64, rule algorithm.Rule) algorithm.State {
	if from == m.Tag() {
		return algorithm.State{N0: s.N0}
	}
	burst, every := from.P0, from.P1
	if from.Kind != Kind || burst < 1 || burst > algorithm.MaxLimit ||
		every < 1 || every > algorithm.MaxDuration {
		return algorithm.State{N0: now + m.tau}
	}
	hi, tau := bits.Mul64(uint64(burst), uint64(every))
	if hi != 0 || tau > uint64(algorithm.MaxDuration) {
		return algorithm.State{N0: now + m.tau}
	}
	var debt uint64
	if s.N0 > now { // not s.N0-now: a fresh key's TAT is math.MinInt64
		debt = uint64(s.N0) - uint64(now)
	}
	var beyond uint64
	if debt > tau {
		beyond = min(debt-tau, uint64(algorithm.MaxDuration)) // as the script's long division needs
		debt, beyond = tau, min(mulDivUp(beyond, uint64(m.every), uint64(every)), uint64(algorithm.MaxDuration))
	}
	var d uint64
	if rule == algorithm.Proportional {
		d = mulDivUp(debt, uint64(m.tau), tau)
	} else {
		d = min(mulDivUp(debt, uint64(m.every), uint64(every)), uint64(m.tau))
	}
	return algorithm.State{N0: now + int64(d+beyond)}
}

// mulDivUp returns ⌈a·b/c⌉ for c > 0, the product taken in 128 bits, or
// math.MaxUint64 when that does not fit in 64 bits. The script computes
// the same numbers by long division.
func mulDivUp(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxUint64
	}
	q, r := bits.Div64(hi, lo, c)
	if r > 0 && q < math.MaxUint64 {
		q++
	}
	return q
}
