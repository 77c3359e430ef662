package concurrency

import "github.com/go-ratelimit/ratelimit/algorithm"

var _ algorithm.Inheritor = (*Slots)(nil)

// Inherit returns st, written under from (an in-flight limit whose lease
// is from.P0), as this limit's state at now. Entries are instants and
// units, which mean the same under every limit and lease: the holds are
// kept as they are, and count from now on under this lease, longer or
// shorter, but for those whose lease under from had ended by now, which
// are forgotten (a dead holder's slot is not held again by a longer
// lease). Under a lower limit, what is held may exceed the limit, and
// nothing is admitted until enough is released.
//
// Every rule is AsIs (algorithm.CheckRule refuses Proportional for a Kind
// that keeps a Log). A from of another Kind, or whose lease is out of
// range, is read as this limit's own: every entry counts under this
// lease. Inherit changes nothing st points to; it returns st itself when
// it forgets nothing, and otherwise a copy of the entries kept.
func (s *Slots) Inherit(from algorithm.Tag, st algorithm.State, now int64, _ algorithm.Rule) algorithm.State {
	if from == s.Tag() || from.Kind != Kind || from.P0 < 1 || from.P0 > algorithm.MaxDuration ||
		st.N2 <= 0 || st.Log == nil || st.Log.Head < 0 || st.Log.Head > len(st.Log.Entries) {
		return st
	}
	es := st.Log.Entries[st.Log.Head:]
	i, dead := live(es, now-from.P0)
	if i == 0 {
		return st
	}
	if i == len(es) {
		return algorithm.State{}
	}
	kept := append([]algorithm.Entry(nil), es[i:]...)
	return algorithm.State{N2: st.N2 - dead, Log: &algorithm.Log{Entries: kept}}
}
