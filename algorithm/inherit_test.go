package algorithm_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// per builds each of the six algorithms as n per period (a bucket's
// capacity, a meter's burst, a window's limit being n).
var per = []struct {
	name string
	new  func(n int64, period time.Duration) (algorithm.Inheritor, error)
}{
	{"tokenbucket", func(n int64, p time.Duration) (algorithm.Inheritor, error) { return tokenbucket.Per(n, p) }},
	{"interval", func(n int64, p time.Duration) (algorithm.Inheritor, error) { return tokenbucket.IntervalPer(n, p) }},
	{"gcra", func(n int64, p time.Duration) (algorithm.Inheritor, error) { return gcra.Per(n, p) }},
	{"fixedwindow", func(n int64, p time.Duration) (algorithm.Inheritor, error) { return fixedwindow.Per(n, p) }},
	{"slidingwindow", func(n int64, p time.Duration) (algorithm.Inheritor, error) { return slidingwindow.Per(n, p) }},
	{"slidinglog", func(n int64, p time.Duration) (algorithm.Inheritor, error) { return slidinglog.Per(n, p) }},
}

// rules returns the rules an algorithm offers: AsIs, and Proportional but
// for the sliding log.
func rules(alg algorithm.Algorithm) []algorithm.Rule {
	if algorithm.CheckRule(alg, algorithm.Proportional) != nil {
		return []algorithm.Rule{algorithm.AsIs}
	}
	return []algorithm.Rule{algorithm.AsIs, algorithm.Proportional}
}

// minute0 is an instant 10 seconds into a minute (and into an hour, 10:00:10 UTC).
const minute0 int64 = 28333333*60_000_000 + 10_000_000

// used returns the state of alg at t0 after cost was taken there.
func used(t *testing.T, alg algorithm.Algorithm, t0, cost int64) algorithm.State {
	t.Helper()
	s, err := algorithm.CheckInit(alg, algorithm.State{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	s, r, err := algorithm.CheckTake(alg, s, t0, cost)
	if err != nil || !r.Allowed() {
		t.Fatalf("taking %d at %d: %+v, %v", cost, t0, r, err)
	}
	return s
}

// admitted returns how many requests of cost 1 alg admits on s from t0
// until end (excluded), each made as soon as the last one's RetryAfter
// allows.
func admitted(t *testing.T, alg algorithm.Algorithm, s algorithm.State, t0, end int64) int {
	t.Helper()
	n := 0
	for now := t0; now < end; {
		next, r, err := algorithm.CheckTake(alg, s, now, 1)
		if err != nil {
			t.Fatal(err)
		}
		s = next
		if r.Allowed() {
			n++
			continue
		}
		now += r.RetryAfter
	}
	return n
}

// Issue 24: tightening 100 → 10 per minute after 95 were used admits at
// most 5 more while the old window lasts; in fact none at once under
// either rule (as-is: max(0, 10 − 95); proportional: 10 × 95% used), and
// afterwards only what the new rate refills (8 by the end of the old
// fixed window, 50 s later, one every 6 s, for the buckets and GCRA),
// while the windows and the log stay full.
func TestInheritTightening(t *testing.T) {
	end := minute0 + 50_000_000 // the end of the minute of minute0
	later := map[string]int{"tokenbucket": 8, "interval": 8, "gcra": 8}
	for _, a := range per {
		old, _ := a.new(100, time.Minute)
		alg, _ := a.new(10, time.Minute)
		for _, rule := range rules(alg) {
			t.Run(fmt.Sprintf("%s/%v", a.name, rule), func(t *testing.T) {
				s := used(t, old, minute0, 95)
				next, err := algorithm.CheckInherit(alg, old, s, minute0, minute0, rule)
				if err != nil {
					t.Fatal(err)
				}
				if r := alg.Peek(next, minute0, 1); r.Remaining != 0 || r.Allowed() {
					t.Fatalf("Peek after the change: %+v, want nothing remaining (at most 5)", r)
				}
				if got, want := admitted(t, alg, next, minute0, end), later[a.name]; got != want {
					t.Fatalf("admitted %d until the old window ends, want %d", got, want)
				}
			})
		}
	}
}

// Issue 24: widening 10 → 100 per minute after 5 were used leaves 95 as
// they are (and 50 proportionally: half used).
func TestInheritWidening(t *testing.T) {
	for _, a := range per {
		old, _ := a.new(10, time.Minute)
		alg, _ := a.new(100, time.Minute)
		for _, rule := range rules(alg) {
			t.Run(fmt.Sprintf("%s/%v", a.name, rule), func(t *testing.T) {
				s := used(t, old, minute0, 5)
				next, err := algorithm.CheckInherit(alg, old, s, minute0, minute0, rule)
				if err != nil {
					t.Fatal(err)
				}
				want := int64(95)
				if rule == algorithm.Proportional {
					want = 50
				}
				if r := alg.Peek(next, minute0, 1); r.Remaining != want {
					t.Fatalf("Peek after the change: %+v, want %d remaining", r, want)
				}
			})
		}
	}
}

// Issue 24: a minute's window changed to an hour's, and back, at instants
// within the old window, at its end and past it: never a negative
// duration, and none longer than the new window's own (two for the
// sliding-window counter), or its fill time.
func TestInheritMinuteHour(t *testing.T) {
	for _, a := range per {
		minute, _ := a.new(100, time.Minute)
		hour, _ := a.new(100, time.Hour)
		for _, c := range []struct {
			name     string
			from, to algorithm.Inheritor
		}{{"minute→hour", minute, hour}, {"hour→minute", hour, minute}} {
			for _, rule := range rules(c.to) {
				for _, after := range []int64{0, 1, 10_000_000, 49_999_999, 50_000_000, 59_999_999, 60_000_000, 3_599_999_999, 3_600_000_000, 7_200_000_000} {
					t.Run(fmt.Sprintf("%s/%s/%v/+%dus", a.name, c.name, rule, after), func(t *testing.T) {
						s := used(t, c.from, minute0, 95)
						now := minute0 + after
						// A bucket refills an old state at its own rate:
						// compare with the old capacity at that rate.
						from := c.from
						if k := c.to.Tag().Kind; k == tokenbucket.Kind || k == tokenbucket.IntervalKind {
							from = c.to
						}
						next, err := algorithm.CheckInherit(c.to, from, s, minute0, now, rule)
						if err != nil {
							t.Fatal(err)
						}
						longest := int64(3_600_000_000)
						if c.to == minute {
							longest = 60_000_000
						}
						if a.name == "slidingwindow" {
							longest *= 2
						}
						for _, cost := range []int64{1, 100} {
							r := c.to.Peek(next, now, cost)
							if r.RetryAfter < 0 || r.ResetAfter < 0 || r.RetryAfter > longest || r.ResetAfter > longest || r.Remaining < 0 || r.Remaining > 100 {
								t.Fatalf("Peek of cost %d: %+v, want durations in [0, %d]", cost, r, longest)
							}
						}
					})
				}
			}
		}
	}
}

// A state Inherit cannot read (a Tag of another Kind or with parameters
// out of range, numbers no algorithm writes) is taken as fully used, and
// the log's is read as it stands (every entry it holds counts): never
// fresh, never a panic.
func TestInheritUnreadable(t *testing.T) {
	tags := []algorithm.Tag{
		{}, {Kind: 'x', P0: 1, P1: 1},
		{Kind: tokenbucket.Kind, P0: 0}, {Kind: tokenbucket.IntervalKind, P0: -1},
		{Kind: gcra.Kind, P0: algorithm.MaxLimit, P1: algorithm.MaxDuration},
		{Kind: fixedwindow.Kind, P0: 10, P1: 0}, {Kind: slidingwindow.Kind, P0: math.MaxInt64, P1: 1},
		{Kind: slidinglog.Kind, P0: algorithm.MaxDuration + 1},
	}
	states := []algorithm.State{
		{}, {N0: math.MinInt64, N1: math.MaxInt64, N2: -1},
		{N0: int64(math.Float64bits(math.NaN())), N1: minute0},
		{N0: math.MaxInt64, N1: math.MaxInt64, N2: math.MaxInt64},
		{N0: -1, N1: -1, N2: -1, Log: &algorithm.Log{Head: 3}},
	}
	for _, a := range per {
		alg, _ := a.new(10, time.Minute)
		for _, tag := range tags {
			for i, s := range states {
				for _, rule := range []algorithm.Rule{algorithm.AsIs, algorithm.Proportional, 7} {
					next := alg.Inherit(tag, s, minute0, rule)
					if alg.Tag().Kind == slidinglog.Kind {
						// Read as it stands, counting all it holds.
						if next != s {
							t.Errorf("%s: Inherit(%v, state %d, %v) = %+v, want the state as it is", a.name, tag, i, rule, next)
						}
						continue
					}
					if r := alg.Peek(next, minute0, 1); r.Allowed() || r.Remaining != 0 || r.ResetAfter <= 0 || r.ResetAfter > 2*60_000_000 {
						t.Errorf("%s: Inherit(%v, state %d, %v): Peek gives %+v, want fully used", a.name, tag, i, rule, r)
					}
				}
			}
		}
	}
}

// A limit changed on a key that holds bookings (issue 26's debt: units
// booked ahead of their instants) does not hand those units out again.
// A key of 10 per second used to the full and then booked ahead, converted
// to another limit or period under either rule, admits over the next
// seconds no more than the new algorithm's own key would, used to the full
// and holding the same units booked one by one (which a sliding-window
// counter spreads least: a booking of its whole limit waits for the
// previous window's share to pass); as-is, plus what a larger limit adds
// to a used key (L′ − L).
func TestInheritKeepsBookings(t *testing.T) {
	const horizon = 6_000_000
	readers := []struct {
		n      int64
		period time.Duration
	}{{4, time.Second}, {15, time.Second}, {10, 2 * time.Second}, {10, time.Second / 2}, {25, 3 * time.Second}, {3, time.Second / 4},
		{1, time.Second}, {2, 700 * time.Millisecond}}
	for _, a := range per {
		if a.name == "slidinglog" {
			continue // its bookings are entries of its log, kept as they are
		}
		old, _ := a.new(10, time.Second)
		for _, rd := range readers {
			alg, err := a.new(rd.n, rd.period)
			if err != nil {
				t.Fatal(err)
			}
			for _, rule := range rules(alg) {
				for _, c := range []struct{ t0, booked int64 }{{minute0, 3}, {minute0, 10}, {minute0 + 370_000, 7}} {
					t0, booked := c.t0, c.booked
					t.Run(fmt.Sprintf("%s/%d-per-%v/%v/at=%d/booked=%d", a.name, rd.n, rd.period, rule, t0-minute0, booked), func(t *testing.T) {
						s := bookedAhead(t, old, used(t, old, t0, 10), t0, booked, booked)
						next := alg.Inherit(old.(algorithm.Tagged).Tag(), s, t0, rule)
						ref := bookedAhead(t, alg, used(t, alg, t0, rd.n), t0, booked, 1)
						most := admitted(t, alg, ref, t0, t0+horizon)
						if rule == algorithm.AsIs {
							most += int(max(rd.n-10, 0))
						}
						if got := admitted(t, alg, next, t0, t0+horizon); got > most {
							t.Fatalf("admitted %d in %dµs after the change, want at most %d: the booking of %d was forgiven (state %+v → %+v; the reader's own %+v)",
								got, horizon, most, booked, s, next, ref)
						}
					})
				}
			}
		}
	}
}

// bookedAhead returns s with cost booked from t0, each at its earliest
// instant, in bookings of chunk units (the last of what is left).
func bookedAhead(t *testing.T, alg algorithm.Algorithm, s algorithm.State, t0, cost, chunk int64) algorithm.State {
	t.Helper()
	b := alg.(algorithm.Booker)
	for cost > 0 {
		n := min(cost, chunk)
		act, ok := algorithm.EarliestAll([]algorithm.Algorithm{alg}, []algorithm.State{s}, t0, algorithm.BookingDeadline(t0, -1), n)
		if !ok {
			t.Fatalf("%v: no instant to book %d on %+v", alg, n, s)
		}
		s, _ = b.Book(s, t0, act, n)
		cost -= n
	}
	return s
}
