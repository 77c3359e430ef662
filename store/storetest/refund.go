package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// The scenarios of issue 41 (docs/design/refund-by-handle.md): refunds
// that give back more than undoing the refunded admission would, each
// replayed on a fake clock, so that every store answers the same.

// testJobRunner is issue 41's job runner: 20 workers take 300 jobs, each
// booking its call with ReserveN (no maximum delay), calling when it is
// due and booking its next job 5 ms later; every tenth call did not count
// at the third party and is refunded, through its Reservation (byHandle)
// or with Limiter.Refund of 1, when that answer comes: 5 ms after the
// call, or 1.005 s after it (an answer that comes late, after the worker
// moved on). Of the calls that still count, at most 50 fall in any
// second, on a sliding log of 50 per second and on GCRA of 50 per second
// with a burst of 1. (Refund by key gave back the newest charge, another
// worker's booking, which freed a second call at its instant.)
func testJobRunner(t *testing.T, st store.Store[string], byHandle bool) {
	const (
		workers = 20
		jobs    = 300
		perSec  = 50
		done    = 5 * time.Millisecond // from a call to the worker's next booking
	)
	algs := []struct {
		name string
		alg  func() (algorithm.Algorithm, error)
	}{
		{"slidinglog", func() (algorithm.Algorithm, error) { return slidinglog.PerSecond(perSec) }},
		{"gcra", func() (algorithm.Algorithm, error) { return gcra.PerSecond(perSec, gcra.Burst(1)) }},
	}
	for _, a := range algs {
		for _, late := range []time.Duration{5 * time.Millisecond, time.Second + 5*time.Millisecond} {
			t.Run(fmt.Sprintf("%s/refund+%v", a.name, late), func(t *testing.T) {
				alg, err := a.alg()
				if err != nil {
					t.Fatal(err)
				}
				clk := clock.NewFake(time.UnixMicro(epoch))
				id := fmt.Sprintf("jobs-%s-%v-%v", a.name, byHandle, late)
				lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clk), ratelimit.WithStateID(id))
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				key := id
				now := epoch
				moveTo := func(at int64) {
					clk.Advance(time.Duration(at-now) * time.Microsecond)
					now = at
				}
				// Each worker's next event, at next: a booking (res nil),
				// or the call of its booked job.
				type worker struct {
					next int64
					res  *ratelimit.Reservation[string]
					job  int
				}
				type refund struct {
					at  int64
					res *ratelimit.Reservation[string]
				}
				ws := make([]worker, workers)
				for i := range ws {
					ws[i].next = epoch
				}
				var refunds []refund // in order of instant
				var calls []int64    // the instants of the calls that still count
				started := 0
				for {
					w := -1
					for i := range ws {
						if ws[i].next >= 0 && (w < 0 || ws[i].next < ws[w].next) {
							w = i
						}
					}
					if len(refunds) > 0 && (w < 0 || refunds[0].at <= ws[w].next) {
						rf := refunds[0]
						refunds = refunds[1:]
						moveTo(rf.at)
						if byHandle {
							err = rf.res.Refund(ctx)
						} else {
							_, err = lim.Refund(ctx, key, 1)
						}
						if err != nil {
							t.Fatalf("refund at +%v: %v", time.Duration(now-epoch)*time.Microsecond, err)
						}
						continue
					}
					if w < 0 {
						break
					}
					wk := &ws[w]
					moveTo(wk.next)
					if wk.res == nil {
						if started == jobs {
							wk.next = -1 // no job left
							continue
						}
						res, err := lim.ReserveN(ctx, key, 1, -1)
						if err != nil || !res.OK() {
							t.Fatalf("job %d: ReserveN: %v, %v", started, res, err)
						}
						wk.res, wk.job = res, started
						wk.next = now + res.Delay().Microseconds()
						started++
						continue
					}
					if wk.job%10 == 9 {
						refunds = append(refunds, refund{now + late.Microseconds(), wk.res})
					} else {
						calls = append(calls, now)
					}
					wk.res, wk.next = nil, now+done.Microseconds()
				}
				if len(calls) != jobs-jobs/10 {
					t.Fatalf("%d calls counted, want %d", len(calls), jobs-jobs/10)
				}
				most, at := 0, int64(0)
				for _, x := range calls {
					n := 0
					for _, y := range calls {
						if y > x-time.Second.Microseconds() && y <= x {
							n++
						}
					}
					if n > most {
						most, at = n, x
					}
				}
				how := "Limiter.Refund"
				if byHandle {
					how = "Reservation.Refund"
				}
				t.Logf("%s, refunds by %s %v after the call: at most %d counted calls in a second (the one ending at +%v)", a.name, how, late, most, time.Duration(at-epoch)*time.Microsecond)
				if most > perSec {
					t.Errorf("%s, refunds by %s %v after the call: %d counted calls in the second ending at +%v, more than %d", a.name, how, late, most, time.Duration(at-epoch)*time.Microsecond, perSec)
				}
			})
		}
	}
}

// testLateRefunds is issue 41's late refunds: 10 requests admitted at
// once at the start of a minute (ReserveN with no delay), 5 of them slow,
// which end and are refunded through their Reservations 61 s later; from
// the next minute on, a client admits as many requests as it can every
// second, for 2 minutes.
// The admissions that still count stay within the limit: 10 per fixed
// window, 10 in any rolling minute for the sliding log, 10 + 1/6 s × the
// span for a token bucket and GCRA of 10 per minute. (Refunded by key,
// the room came back in the new window: 15 in one fixed window, 15 in
// 31 s for the log, 20 in a span where 15.2 is the most the bucket
// allows.)
func testLateRefunds(t *testing.T, st store.Store[string]) {
	const limit = 10
	minute := time.Minute.Microseconds()
	algs := []struct {
		name string
		alg  func() (algorithm.Algorithm, error)
		// bound returns the most admissions that may count in [from, to].
		bound func(from, to int64) float64
		// span reports whether [from, to] is one the bound covers.
		span func(from, to int64) bool
	}{
		{"fixedwindow", func() (algorithm.Algorithm, error) { return fixedwindow.PerMinute(limit) },
			func(int64, int64) float64 { return limit },
			func(from, to int64) bool { return algorithm.FloorDiv(from, minute) == algorithm.FloorDiv(to, minute) }},
		{"slidinglog", func() (algorithm.Algorithm, error) { return slidinglog.PerMinute(limit) },
			func(int64, int64) float64 { return limit },
			func(from, to int64) bool { return to-from < minute }},
		{"tokenbucket", func() (algorithm.Algorithm, error) { return tokenbucket.PerMinute(limit) },
			func(from, to int64) float64 { return limit + float64(to-from)/6e6 },
			func(int64, int64) bool { return true }},
		{"gcra", func() (algorithm.Algorithm, error) { return gcra.PerMinute(limit) },
			func(from, to int64) float64 { return limit + float64(to-from)/6e6 },
			func(int64, int64) bool { return true }},
	}
	for _, a := range algs {
		t.Run(a.name, func(t *testing.T) {
			alg, err := a.alg()
			if err != nil {
				t.Fatal(err)
			}
			start := (epoch/minute + 1) * minute // a minute's start: 10:00:00
			clk := clock.NewFake(time.UnixMicro(start))
			lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clk), ratelimit.WithStateID("late-"+a.name))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			key := "late-" + a.name
			var admitted []int64 // the instants of the admissions that still count
			var slow []*ratelimit.Reservation[string]
			for i := range limit {
				res, err := lim.ReserveN(ctx, key, 1, 0)
				if err != nil || !res.OK() {
					t.Fatalf("admission %d at 10:00:00: %v, %v", i, res, err)
				}
				if i < 5 {
					slow = append(slow, res)
				} else {
					admitted = append(admitted, start)
				}
			}
			for s := int64(1); s <= 180; s++ {
				clk.Advance(time.Second)
				now := start + s*time.Second.Microseconds()
				if s < 60 {
					continue // idle: the key refills
				}
				if s == 61 {
					for _, res := range slow {
						if err := res.Refund(ctx); err != nil {
							t.Fatalf("Refund at 10:01:01: %v", err)
						}
					}
				}
				for {
					d, err := lim.Allow(ctx, key)
					if err != nil {
						t.Fatalf("Allow at +%ds: %v", s, err)
					}
					if !d.Allowed() {
						break
					}
					admitted = append(admitted, now)
				}
			}
			for i, from := range admitted {
				for j := i; j < len(admitted); j++ {
					to := admitted[j]
					if !a.span(from, to) {
						continue
					}
					n := 0
					for _, x := range admitted {
						if x >= from && x <= to {
							n++
						}
					}
					if b := a.bound(from, to); float64(n) > b {
						t.Fatalf("%d admissions count in [+%v, +%v], more than %.2f", n,
							time.Duration(from-start)*time.Microsecond, time.Duration(to-start)*time.Microsecond, b)
					}
				}
			}
		})
	}
}

// testRefundsInWindow is issue 41's third scenario: 10 admissions spend a
// fixed window of 10 (ReserveN with no delay), 3 of them are refunded
// through their Reservations in that window, one of them twice: exactly
// 3 more are admitted.
func testRefundsInWindow(t *testing.T, st store.Store[string]) {
	alg, err := fixedwindow.PerMinute(10)
	if err != nil {
		t.Fatal(err)
	}
	minute := time.Minute.Microseconds()
	start := (epoch/minute + 1) * minute
	clk := clock.NewFake(time.UnixMicro(start))
	lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clk), ratelimit.WithStateID("spent"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var rs []*ratelimit.Reservation[string]
	for i := range 10 {
		clk.Advance(time.Second)
		res, err := lim.ReserveN(ctx, "spent", 1, 0)
		if err != nil || !res.OK() {
			t.Fatalf("admission %d: %v, %v", i, res, err)
		}
		rs = append(rs, res)
	}
	clk.Advance(time.Second)
	for _, i := range []int{2, 5, 5, 8} {
		if err := rs[i].Refund(ctx); err != nil {
			t.Fatalf("Refund of admission %d: %v", i, err)
		}
	}
	more := 0
	for {
		d, err := lim.Allow(ctx, "spent")
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed() {
			break
		}
		more++
	}
	if more != 3 {
		t.Fatalf("after 3 refunds (one of them twice), %d more admitted, want exactly 3", more)
	}
}
