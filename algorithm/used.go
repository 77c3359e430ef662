package algorithm

// Used returns how much of its limit a state written under from had used
// at now, read from from's meaning parameters and the state alone, as a
// whole number between 0 and MaxLimit (more counts as MaxLimit, which no
// limit exceeds). It is what a key's state carries into an algorithm of
// another Kind (see [Carry]); each Kind's Used says how it reads its own
// states, and the Redis scripts compute the same number from the header
// and body they find (design state-format.md §2.10).
//
// A state of a Kind no package registered, or of a Kind whose parameters
// or numbers are out of the ranges its algorithm accepts, counts as
// MaxLimit: fully used.
func Used(from Tag, s State, now int64) int64 {
	k := kindOf(from.Kind)
	p0, p1 := from.P0, from.P1
	if k == nil || p0 < 1 || p0 > MaxDuration || k.Params == 2 && (p1 < 1 || p1 > MaxDuration) {
		return MaxLimit
	}
	return min(max(k.Used(from, s, now), 0), MaxLimit)
}

// Carry returns the state alg starts a key from when the key's state s
// was written under from, a Tag of another Kind than alg's: alg's fresh
// state at now, charged min(Used(from, s, now), alg.Limit()) at now, so
// that switching algorithms never hands out a quota the old state had
// used. Nothing of s is kept but that number, and nothing s points to is
// changed.
func Carry(alg Algorithm, from Tag, s State, now int64) State {
	st := alg.Init(State{}, now)
	if u := min(Used(from, s, now), alg.Limit()); u >= 1 {
		st, _ = alg.Take(st, now, u)
	}
	return st
}
