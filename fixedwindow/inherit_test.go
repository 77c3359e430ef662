package fixedwindow_test

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
)

// Design §2.4's example: 95 used in the minute of 10:30:20 count, with a
// limit of 100 per hour, in [10:00, 11:00); 95 used in the hour count,
// with 100 per minute, in [10:30, 10:31) and are gone at 10:31.
func TestInheritMinuteHour(t *testing.T) {
	const h10 = 472222 * 3_600_000_000 // the start of an hour, standing for 10:00
	const now = h10 + 30*60_000_000 + 20_000_000
	minute, _ := fixedwindow.PerMinute(100)
	hour, _ := fixedwindow.PerHour(100)
	for _, c := range []struct {
		from, to *fixedwindow.Window
		reset    int64
	}{
		{minute, hour, h10 + 3_600_000_000 - now},
		{hour, minute, h10 + 31*60_000_000 - now},
	} {
		s := c.from.Init(algorithm.State{}, now)
		s, _ = c.from.Take(s, now-5_000_000, 95)
		next, err := algorithm.CheckInherit(c.to, c.from, s, now-5_000_000, now, algorithm.AsIs)
		if err != nil {
			t.Fatal(err)
		}
		if r := c.to.Peek(next, now, 1); r.Remaining != 5 || r.ResetAfter != c.reset {
			t.Errorf("%v → %v: %+v, want 5 remaining until %dµs from now", c.from, c.to, r, c.reset)
		}
	}
}

// A window that starts more than algorithm.MaxDuration after now's is
// fresh to the old window (commit 1's rule), and so to its heir.
func TestInheritFarAhead(t *testing.T) {
	const now = 1_700_000_000_000_000
	old, _ := fixedwindow.New(fixedwindow.Config{Limit: 100, Window: time.Microsecond})
	to, _ := fixedwindow.PerMinute(10)
	s := algorithm.State{N0: now + algorithm.MaxDuration + 1, N1: 50}
	if r := old.Peek(s, now, 1); r.Remaining != 100 {
		t.Fatalf("the old window reads %+v, want fresh", r)
	}
	if r := to.Peek(to.Inherit(old.Tag(), s, now, algorithm.AsIs), now, 1); r != algorithm.Fresh(10) {
		t.Fatalf("converted: %+v, want fresh", r)
	}
}
