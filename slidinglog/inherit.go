package slidinglog

import "github.com/go-ratelimit/ratelimit/algorithm"

var _ algorithm.Inheritor = (*Log)(nil)

// Inherit returns s, written under from (a log of window W = from.P0), as
// this log's state at now (design state-format.md §2.6). Entries are
// instants and costs, which mean the same under every limit and window,
// so the numbers are kept as they are; what changes is which entries
// still count. An entry at or before clock − W, clock being the log's
// (N1: the latest instant it charged at, its newest admission's when
// nothing is booked ahead), may be one whose predecessors a log of window
// W forgot (in Redis, the member a trim keeps as the base of the
// cumulative counts), so the cost before it does not count under any
// window:
//
//	t    = max(now, clock)
//	base = cumulative cost up to the newest entry at or before
//	       max(t − Window, clock − W)   (what the log forgot, when none)
//	used = total − base
//
// A log narrower than W forgets faster; a wider one counts what the log
// still holds, at least the last W, and cannot count what it forgot.
//
// A log's own charges leave no entry at or before clock − W (each
// forgets what left its window before it appends), so s itself is that
// state, and Inherit returns it as it is: it changes nothing s points
// to, and allocates nothing. Only for a state holding such entries does
// it return a copy of the entries after them.
//
// The log has no proportional rule (algorithm.CheckRule refuses it):
// every rule is AsIs here. A from of another Kind, or whose window is
// outside [1, algorithm.MaxDuration], is read with the least clock − W
// could be: every entry the log holds counts, within this log's window.
// That counts at least as much as any window W would, and is also s as it
// is. So is a from equal to the log's own Tag.
func (l *Log) Inherit(from algorithm.Tag, s algorithm.State, now int64, _ algorithm.Rule) algorithm.State {
	if from == l.Tag() || from.Kind != Kind || from.P0 < 1 || from.P0 > algorithm.MaxDuration ||
		s.N2 <= 0 || s.Log == nil || s.Log.Head < 0 || s.Log.Head > len(s.Log.Entries) {
		return s
	}
	entries := live(&s)
	t := at(&s, now)
	known := s.N1 - from.P0
	if known <= t-l.window {
		return s // this log's own cut leaves out all that W may have forgotten
	}
	i, base := split(&s, entries, known)
	if j, _ := split(&s, entries, t-l.window); i == j {
		return s
	}
	kept := append([]algorithm.Entry(nil), entries[i:]...)
	return algorithm.State{N0: base, N1: s.N1, N2: s.N2, Log: &algorithm.Log{Entries: kept}}
}
