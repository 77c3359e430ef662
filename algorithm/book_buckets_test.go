package algorithm_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// bucketBookers are the token buckets and GCRAs the booking histories
// run on: small and large limits, slow and fast refills, rates whose
// refill per µs is not exact in floating point and ones that are, tokens
// per interval below, at and above the capacity.
func bucketBookers(t *testing.T) []algorithm.Booker {
	t.Helper()
	var out []algorithm.Booker
	for _, c := range []tokenbucket.Config{
		{Capacity: 3, Rate: 2},
		{Capacity: 1, Rate: 3},
		{Capacity: 10, Rate: 3.3},
		{Capacity: 5, Rate: 1e6 / 1024}, // 2^-10 per µs: exact
		{Capacity: 100, Rate: 1e6},
		{Capacity: 1000, Rate: 1e9 / 3600},
		{Capacity: 7, Rate: 0.01},
	} {
		b, err := tokenbucket.New(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	for _, c := range []tokenbucket.IntervalConfig{
		{Capacity: 10, Tokens: 1, Interval: time.Second},
		{Capacity: 10, Tokens: 4, Interval: time.Second},
		{Capacity: 3, Tokens: 5, Interval: time.Millisecond},
		{Capacity: 1, Tokens: 1, Interval: time.Microsecond},
		{Capacity: 100, Tokens: 7, Interval: 333 * time.Microsecond},
	} {
		b, err := tokenbucket.NewInterval(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	for _, c := range []gcra.Config{
		{Burst: 3, Every: 500 * time.Millisecond},
		{Burst: 1, Every: time.Microsecond},
		{Burst: 1000, Every: 7 * time.Microsecond},
		{Burst: 10, Every: 333_333 * time.Microsecond},
	} {
		m, err := gcra.New(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// booking is a booking made in a history: what Unused is asked about.
type booking struct{ act, cost int64 }

// TestBucketsBookHistories replays random histories of Take, Peek, Book,
// Refund and cancellations (Unused, then Refund of what it gives) on the
// token buckets and GCRAs, with a clock that mostly moves forward and
// sometimes steps back, checking every step against its contract
// (algorithm.CheckTake, CheckBook, CheckRefund, CheckUnused), and that a
// booking with nothing charged after it is given back whole.
func TestBucketsBookHistories(t *testing.T) {
	const t0 = 1_700_000_000_000_000 // Unix µs
	rng := rand.New(rand.NewPCG(26, 4))
	for _, b := range bucketBookers(t) {
		t.Run(fmt.Sprint(b), func(t *testing.T) {
			limit := b.Limit()
			// period: a natural unit of time, a Window's worth of the
			// limit's single units.
			period := b.(algorithm.Quoter).Quota().Window.Microseconds() / limit
			period = max(period, 1)
			for seq := range 60 {
				now := int64(t0) + rng.Int64N(period*limit+1)
				s, err := algorithm.CheckInit(b, algorithm.State{}, now)
				if err != nil {
					t.Fatal(err)
				}
				var log []string
				var books []booking
				fail := func(err error) {
					t.Helper()
					t.Fatalf("history %d:\n  %s\n%v", seq, joinLines(log), err)
				}
				cost := func() int64 {
					if rng.IntN(4) == 0 {
						return 1 + rng.Int64N(limit)
					}
					return 1 + rng.Int64N(min(limit, 3))
				}
				// later: instants at which the checks compare states, the
				// ones results name, a µs either side, and random ones.
				later := func(marks ...int64) []int64 {
					var ts []int64
					for _, m := range marks {
						ts = append(ts, m-1, m, m+1)
					}
					for range 4 {
						ts = append(ts, now+rng.Int64N(3*period*limit+2))
					}
					return ts
				}
				for range 40 {
					switch rng.IntN(6) {
					case 0:
					case 1:
						now += rng.Int64N(3)
					case 2:
						now += rng.Int64N(2 * period)
					case 3:
						now += rng.Int64N(period*limit + 2)
					case 4:
						now -= rng.Int64N(2 * period) // the clock steps back
					default:
						now += b.Peek(s, now, 1).RetryAfter
					}
					var r algorithm.Result
					switch op := rng.IntN(10); {
					case op < 3:
						c := cost()
						log = append(log, fmt.Sprintf("take %d at %+d", c, now-t0))
						if s, r, err = algorithm.CheckTake(b, s, now, c); err != nil {
							fail(err)
						}
					case op < 7:
						c := cost()
						act := algorithm.Earliest(b, s, now, c)
						if rng.IntN(3) == 0 {
							act += rng.Int64N(period*limit + 1)
						}
						log = append(log, fmt.Sprintf("book %d at %+d for %+d", c, now-t0, act-t0))
						taken, _ := b.Take(s, act, c)
						marks := []int64{now, act, act + b.Peek(taken, act, 1).RetryAfter, act + b.Peek(taken, act, limit).RetryAfter}
						if s, r, err = algorithm.CheckBook(b, algorithm.CloneState(s), now, act, c, later(marks...)); err != nil {
							fail(err)
						}
						// From act on: the interval bucket and GCRA are Take
						// at act exactly, the continuous bucket to the µs
						// either way (CheckBook allows the µs after).
						_, float := b.(*tokenbucket.Bucket)
						for _, m := range marks {
							for _, t := range []int64{m - 1, m, m + 1} {
								if t < act {
									continue
								}
								for _, c := range []int64{1, limit} {
									got, want := b.Peek(s, t, c), b.Peek(taken, t, c)
									if float {
										if early := b.Peek(taken, t-1, c); got.Remaining < early.Remaining || early.Allowed() && !got.Allowed() {
											fail(fmt.Errorf("at %+d the booked state admits less than a Take at act a µs earlier: Peek of %d %+v, Take's %+v", t-t0, c, got, early))
										}
									} else if got != want {
										fail(fmt.Errorf("at %+d the booked state is not Take at act's: Peek of %d %+v, Take's %+v", t-t0, c, got, want))
									}
								}
							}
						}
						if act > now {
							if u, err := algorithm.CheckUnused(b, s, now, act, c); err != nil || u != c {
								fail(fmt.Errorf("unused at once of the booking just made: got %d (%v), want all %d", u, err, c))
							}
						}
						books = append(books, booking{act, c})
					case op < 8:
						n := cost()
						log = append(log, fmt.Sprintf("refund %d at %+d", n, now-t0))
						if s, r, err = algorithm.CheckRefund(b, s, now, n, later(now)); err != nil {
							fail(err)
						}
					default:
						if len(books) == 0 {
							continue
						}
						bk := books[rng.IntN(len(books))]
						give, err := algorithm.CheckUnused(b, s, now, bk.act, bk.cost)
						log = append(log, fmt.Sprintf("cancel %d for %+d at %+d: give %d", bk.cost, bk.act-t0, now-t0, give))
						if err != nil {
							fail(err)
						}
						if give > 0 {
							if s, r, err = algorithm.CheckRefund(b, s, now, give, later(now)); err != nil {
								fail(err)
							}
						}
					}
					if s.N2 != 0 || s.Log != nil {
						fail(fmt.Errorf("a Narrow algorithm left N2 %d and Log %v", s.N2, s.Log))
					}
					if r.Remaining < 0 || r.Remaining > limit || r.RetryAfter < 0 || r.ResetAfter < r.RetryAfter {
						fail(fmt.Errorf("result %+v out of range", r))
					}
					// Peek of a state in debt is exact as of any other: a
					// cost fits at RetryAfter and not a µs before, the state
					// is fresh at ResetAfter and a µs before it is not.
					c := cost()
					p := b.Peek(s, now, c)
					if p.Remaining < 0 || p.Remaining > limit {
						fail(fmt.Errorf("peek of %d at %+d: Remaining of %+v out of [0, %d]", c, now-t0, p, limit))
					}
					if p.RetryAfter > 0 && b.Peek(s, now+p.RetryAfter-1, c).Allowed() || !b.Peek(s, now+p.RetryAfter, c).Allowed() {
						fail(fmt.Errorf("peek of %d at %+d: RetryAfter of %+v is not exact", c, now-t0, p))
					}
					if got := b.Peek(s, now+p.ResetAfter, 1); got != algorithm.Fresh(limit) {
						fail(fmt.Errorf("peek at %+d: at ResetAfter (%+v) the state is not fresh: %+v", now-t0, p, got))
					}
					if p.ResetAfter > 0 && b.Peek(s, now+p.ResetAfter-1, 1).ResetAfter != 1 {
						fail(fmt.Errorf("peek at %+d: a µs before ResetAfter (%+v) the state is not a µs from fresh", now-t0, p))
					}
				}
			}
		})
	}
}

func joinLines(lines []string) string {
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "\n  "
		}
		out += l
	}
	return out
}
