package algorithm

import "fmt"

// CheckInherit reports how to.Inherit(from.Tag(), s, now, rule) departs
// from the bounds of design state-format.md §2.7, or nil when it keeps
// them, and returns the state Inherit returned. s is a state from's Take
// left, last the latest instant it was decided at (a clock that stepped
// back since, last > now, may add its step to every wait). Tests call it
// on states from random histories.
//
// It checks that Inherit changes nothing s points to; that what a Narrow
// to returns is N0 and N1 alone; and that, for Peek at now of the
// converted state (for a cost of 1 and of to's Limit), and for Take
// (checked by [CheckTake], on a copy):
//
//   - 0 ≤ Remaining ≤ to.Limit();
//   - RetryAfter and ResetAfter are at least 0 and at most what a key of
//     to's that used its whole limit at now, or at last, reports at now:
//     its fill time, or its window (two for the sliding-window counter),
//     plus the clock's step back, counted as to counts it (a Kind whose
//     StepBack is set counts it by that);
//   - under AsIs, with used = from.Limit() − from's Remaining at now:
//     Remaining ≤ max(0, to.Limit() − used), and, when to.Limit() ≥
//     from.Limit(), Remaining ≥ from's Remaining: what was used stays
//     used, no more. A Kind whose AsIsBounds is set says which of the two hold
//     for it, and by how much the first may be exceeded (a sliding log
//     with a shorter window forgets faster; a continuous token bucket
//     rounds a fraction of a token up);
//   - the converted state is a fixed point: converting it again as if it
//     were written under to's own Tag changes nothing Peek reports.
//
// The buckets refill the time since a state's instant at the reader's
// rate (§2.1, §2.2), which is not in their Tag: for the comparisons with
// from's Remaining, from must refill as to does (build it with to's rate,
// or to's tokens and interval, and the capacity of the writer's Tag).
func CheckInherit(to Inheritor, from Tagged, s State, last, now int64, rule Rule) (State, error) {
	tag, limit := from.Tag(), to.Limit()
	oldOne, oldAll := from.Peek(s, now, 1), from.Peek(s, now, from.Limit())
	next := to.Inherit(tag, s, now, rule)
	fail := func(format string, args ...any) (State, error) {
		return next, fmt.Errorf("inherit %v → %v (%v) of %+v at %d: "+format,
			append([]any{tag, to.Tag(), rule, s, now}, args...)...)
	}
	if one, all := from.Peek(s, now, 1), from.Peek(s, now, from.Limit()); one != oldOne || all != oldAll {
		return fail("the state given changed: from's Peek gave %+v and %+v, now %+v and %+v", oldOne, oldAll, one, all)
	}
	if _, ok := to.(Narrow); ok && (next.N2 != 0 || next.Log != nil) {
		return fail("a Narrow algorithm returned N2 %d and Log %v, want 0 and nil", next.N2, next.Log)
	}

	// The longest waits of to's own: a key that used its whole limit at
	// now, or at the latest instant it was decided at, seen at now.
	var bound int64
	ats := []int64{now, max(last, now)}
	if k := kindOf(to.Tag().Kind); k != nil && k.StepBack != nil && tag.Kind == k.Letter && last > now {
		ats = append(ats, now+k.StepBack(to.Tag(), tag, last-now))
	}
	for _, at := range ats {
		full, _ := to.Take(to.Init(State{}, at), at, limit)
		bound = max(bound, to.Peek(full, now, 1).ResetAfter, to.Peek(full, now, limit).RetryAfter)
	}

	one := to.Peek(next, now, 1)
	for _, cost := range []int64{1, limit} {
		r := to.Peek(next, now, cost)
		if r.Remaining < 0 || r.Remaining > limit {
			return fail("Peek of cost %d gives %+v: want 0 ≤ Remaining ≤ %d", cost, r, limit)
		}
		if r.RetryAfter < 0 || r.RetryAfter > bound || r.ResetAfter < 0 || r.ResetAfter > bound {
			return fail("Peek of cost %d gives %+v: want RetryAfter and ResetAfter in [0, %d]", cost, r, bound)
		}
		if again := to.Peek(to.Inherit(to.Tag(), next, now, rule), now, cost); again != r {
			return fail("converting %+v again under its own tag: Peek of cost %d gives %+v, want %+v", next, cost, again, r)
		}
	}

	if rule != Proportional {
		upper, lower, slack := true, limit >= from.Limit(), int64(0)
		if k := kindOf(tag.Kind); k != nil && k.AsIsBounds != nil {
			u, l, s := k.AsIsBounds(to.Tag(), tag)
			upper, lower, slack = u, lower && l, s
		}
		most := min(max(0, limit-(from.Limit()-oldOne.Remaining))+slack, limit)
		if upper && one.Remaining > most {
			return fail("as-is leaves %d remaining, want at most %d: from had %d of %d", one.Remaining, most, oldOne.Remaining, from.Limit())
		}
		if lower && one.Remaining < oldOne.Remaining {
			return fail("as-is leaves %d remaining under a limit of %d, want at least the %d of %d from had", one.Remaining, limit, oldOne.Remaining, from.Limit())
		}
	}

	for _, cost := range []int64{1, limit} {
		_, r, err := CheckTake(to, clone(next), now, cost)
		if err != nil {
			return fail("%v", err)
		}
		if r.ResetAfter > bound {
			return fail("Take of cost %d gives %+v: want ResetAfter ≤ %d", cost, r, bound)
		}
	}
	return next, nil
}

// clone returns s with a Log of its own, so that a Take on it changes
// nothing s points to.
func clone(s State) State {
	if s.Log != nil {
		s.Log = &Log{Entries: append([]Entry(nil), s.Log.Entries...), Head: s.Log.Head}
	}
	return s
}
