package slidinglog_test

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/slidinglog"
)

// A log's own states convert as they are: a narrower window forgets
// faster, a wider one counts what the log holds and nothing it forgot.
func TestInheritWindows(t *testing.T) {
	const t0 = 1_700_000_000_000_000
	minute, _ := slidinglog.PerMinute(100)
	hour, _ := slidinglog.Per(100, time.Hour)
	s := minute.Init(algorithm.State{}, t0)
	var err error
	for i, at := range []int64{0, 30e6, 70e6, 80e6} { // the first is forgotten at 70 s
		if s, _, err = algorithm.CheckTake(minute, s, t0+at, int64(10*(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	now := int64(t0 + 95e6)
	for _, c := range []struct {
		from, to *slidinglog.Log
		want     int64 // remaining
	}{
		{minute, hour, 100 - 20 - 30 - 40}, // the 10 at 0 s was forgotten
		{hour, minute, 100 - 30 - 40},      // the 20 at 30 s has left the minute
	} {
		next, err := algorithm.CheckInherit(c.to, c.from, s, now, now, algorithm.AsIs)
		if err != nil {
			t.Fatal(err)
		}
		if next.Log != s.Log || next.N0 != s.N0 {
			t.Errorf("%v → %v: got %+v, want the state as it is", c.from, c.to, next)
		}
		if r := c.to.Peek(next, now, 1); r.Remaining != c.want {
			t.Errorf("%v → %v: %+v, want %d remaining", c.from, c.to, r, c.want)
		}
	}
}

// Design §2.6: an entry at or before newest − W may be the base a log of
// window W kept (in Redis, the member a trim keeps); a wider window does
// not count the cost before it. Inherit leaves the state it was given
// as it was.
func TestInheritKnownBase(t *testing.T) {
	const t0 = 1_700_000_000_000_000
	minute, _ := slidinglog.PerMinute(100)
	hour, _ := slidinglog.Per(100, time.Hour)
	entries := []algorithm.Entry{{At: t0, Cost: 10}, {At: t0 + 10e6, Cost: 30}, {At: t0 + 90e6, Cost: 60}}
	s := algorithm.State{N1: t0 + 90e6, N2: 60, Log: &algorithm.Log{Entries: entries}}
	now := int64(t0 + 95e6)
	next := hour.Inherit(minute.Tag(), s, now, algorithm.AsIs)
	if next.N0 != 30 || len(next.Log.Entries[next.Log.Head:]) != 1 {
		t.Fatalf("got %+v with entries %v, want the base 30 and the entry at 90 s", next, next.Log.Entries)
	}
	if r := hour.Peek(next, now, 1); r.Remaining != 70 {
		t.Fatalf("Peek: %+v, want 70 remaining", r)
	}
	if s.Log.Head != 0 || len(s.Log.Entries) != 3 || s.Log.Entries[0] != entries[0] {
		t.Fatalf("the state given changed: %+v", s.Log)
	}
}
