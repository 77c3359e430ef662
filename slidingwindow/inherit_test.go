package slidingwindow_test

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
)

// Tightening 100 → 10 per minute, as-is, with 95 in the previous window
// and half of the current one gone: the estimate is ⌈95/2⌉ = 48, so
// nothing remains. Clamping the previous count to the new limit on its
// own (10, for an estimate of 5) would leave 5: the state is kept as it
// is instead, and the new limit applies to the old estimate.
func TestInheritKeepsThePreviousWindow(t *testing.T) {
	const w = 60_000_000
	const start = 28333333 * w
	old, _ := slidingwindow.PerMinute(100)
	to, _ := slidingwindow.PerMinute(10)
	s := algorithm.State{N0: 28333333, N1: 0, N2: 95}
	now := int64(start + w/2)
	next, err := algorithm.CheckInherit(to, old, s, now, now, algorithm.AsIs)
	if err != nil {
		t.Fatal(err)
	}
	if r := to.Peek(next, now, 1); r.Remaining != 0 || r.Allowed() {
		t.Fatalf("Peek: %+v, want nothing remaining", r)
	}
	// Proportionally the previous count is 95% of 10, and its half 5.
	next, err = algorithm.CheckInherit(to, old, s, now, now, algorithm.Proportional)
	if err != nil {
		t.Fatal(err)
	}
	if r := to.Peek(next, now, 1); r.Remaining != 5 {
		t.Fatalf("proportional Peek: %+v, want 5 remaining", r)
	}
}

// Another window length: the old estimate becomes the count of the new
// window of now, and is gone two new windows later.
func TestInheritOtherWindow(t *testing.T) {
	const start = 28333333 * 60_000_000
	old, _ := slidingwindow.PerMinute(100)
	to, _ := slidingwindow.Per(100, time.Hour)
	s := algorithm.State{N0: 28333333, N1: 30, N2: 40}
	now := int64(start + 15_000_000) // a quarter in: 30 + ⌈40·3/4⌉ = 60
	next, err := algorithm.CheckInherit(to, old, s, now, now, algorithm.AsIs)
	if err != nil {
		t.Fatal(err)
	}
	if want := (algorithm.State{N0: now / 3_600_000_000, N1: 60}); next != want {
		t.Fatalf("got %+v, want %+v", next, want)
	}
}
