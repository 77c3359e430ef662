package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
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
	const perSec = 50
	for _, a := range jobRunnerAlgs(perSec) {
		for _, late := range []time.Duration{5 * time.Millisecond, time.Second + 5*time.Millisecond} {
			t.Run(fmt.Sprintf("%s/refund+%v", a.name, late), func(t *testing.T) {
				alg, err := a.alg()
				if err != nil {
					t.Fatal(err)
				}
				clk := clock.NewFake(time.UnixMicro(epoch))
				id := fmt.Sprintf("jobs-%s-%v-%v", a.name, byHandle, late)
				lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clk), ratelimit.WithName(id))
				if err != nil {
					t.Fatal(err)
				}
				r := &jobRun{t: t, lim: lim, clk: clk, ctx: context.Background(), key: id,
					byHandle: byHandle, late: late, now: epoch, ws: make([]jobWorker, jobWorkers)}
				for i := range r.ws {
					r.ws[i].next = epoch
				}
				r.run()
				if len(r.calls) != jobCount-jobCount/10 {
					t.Fatalf("%d calls counted, want %d", len(r.calls), jobCount-jobCount/10)
				}
				most, at := mostInASecond(r.calls)
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

// The job runner's numbers: workers, jobs, and the time from a call to
// the worker's next booking.
const (
	jobWorkers = 20
	jobCount   = 300
	jobDone    = 5 * time.Millisecond
)

// jobRun is one run of the job runner on a fake clock.
type jobRun struct {
	t        *testing.T
	lim      *ratelimit.Limiter[string]
	clk      *clock.Fake
	ctx      context.Context
	key      string
	byHandle bool
	late     time.Duration // from a refunded call to its refund
	now      int64
	ws       []jobWorker
	refunds  []jobRefund // in order of instant
	calls    []int64     // the instants of the calls that still count
	started  int         // jobs booked
}

// jobWorker is a worker's next event, at next: a booking (res nil), or
// the call of its booked job. next is -1 once no job is left.
type jobWorker struct {
	next int64
	res  *ratelimit.Reservation[string]
	job  int
}

// jobRefund is a refund to make at an instant.
type jobRefund struct {
	at  int64
	res *ratelimit.Reservation[string]
}

// run plays every event in order of instant, a refund before a worker's
// event at the same instant, until none is left.
func (r *jobRun) run() {
	for {
		w := r.nextWorker()
		switch {
		case len(r.refunds) > 0 && (w < 0 || r.refunds[0].at <= r.ws[w].next):
			r.refund()
		case w < 0:
			return
		case r.ws[w].res == nil:
			r.book(&r.ws[w])
		default:
			r.call(&r.ws[w])
		}
	}
}

// nextWorker returns the index of the worker whose event comes first,
// or -1 when no worker has one.
func (r *jobRun) nextWorker() int {
	w := -1
	for i := range r.ws {
		if r.ws[i].next >= 0 && (w < 0 || r.ws[i].next < r.ws[w].next) {
			w = i
		}
	}
	return w
}

// moveTo advances the clock to at.
func (r *jobRun) moveTo(at int64) {
	r.clk.Advance(time.Duration(at-r.now) * time.Microsecond)
	r.now = at
}

// refund makes the first refund due, through its Reservation or with
// Limiter.Refund of 1.
func (r *jobRun) refund() {
	rf := r.refunds[0]
	r.refunds = r.refunds[1:]
	r.moveTo(rf.at)
	var err error
	if r.byHandle {
		_, err = rf.res.Refund(r.ctx)
	} else {
		_, err = r.lim.Refund(r.ctx, r.key, 1)
	}
	if err != nil {
		r.t.Fatalf("refund at +%v: %v", time.Duration(r.now-epoch)*time.Microsecond, err)
	}
}

// book books wk's next job, if one is left, with ReserveN and no maximum
// delay: wk calls when it is due.
func (r *jobRun) book(wk *jobWorker) {
	r.moveTo(wk.next)
	if r.started == jobCount {
		wk.next = -1 // no job left
		return
	}
	res, err := r.lim.ReserveN(r.ctx, r.key, 1, -1)
	if err != nil || !res.OK() {
		r.t.Fatalf("job %d: ReserveN: %v, %v", r.started, res, err)
	}
	wk.res, wk.job = res, r.started
	wk.next = r.now + res.Delay().Microseconds()
	r.started++
}

// call makes wk's call: every tenth did not count and is refunded late
// after it; wk books its next job jobDone later.
func (r *jobRun) call(wk *jobWorker) {
	r.moveTo(wk.next)
	if wk.job%10 == 9 {
		r.refunds = append(r.refunds, jobRefund{r.now + r.late.Microseconds(), wk.res})
	} else {
		r.calls = append(r.calls, r.now)
	}
	wk.res, wk.next = nil, r.now+jobDone.Microseconds()
}

// mostInASecond returns the most of calls (instants in µs) that fall in
// a second (x−1s, x], and the first x, one of calls, where that many do.
func mostInASecond(calls []int64) (most int, at int64) {
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
	return most, at
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
	for _, a := range lateRefundAlgs() {
		t.Run(a.name, func(t *testing.T) {
			alg, err := a.alg()
			if err != nil {
				t.Fatal(err)
			}
			minute := time.Minute.Microseconds()
			start := (epoch/minute + 1) * minute // a minute's start: 10:00:00
			clk := clock.NewFake(time.UnixMicro(start))
			lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clk), ratelimit.WithName("late-"+a.name))
			if err != nil {
				t.Fatal(err)
			}
			key := "late-" + a.name
			slow, admitted := lateFirstAdmissions(t, lim, key, start)
			admitted = lateClient(t, lim, clk, key, start, slow, admitted)
			checkLateBound(t, a, start, admitted)
		})
	}
}

// lateLimit is the late-refund scenario's limit, per minute.
const lateLimit = 10

// lateFirstAdmissions admits lateLimit requests at start, at once
// (ReserveN with no delay): it returns the first 5, the slow ones, and
// the instants of the others.
func lateFirstAdmissions(t *testing.T, lim *ratelimit.Limiter[string], key string, start int64) (slow []*ratelimit.Reservation[string], admitted []int64) {
	for i := range lateLimit {
		res, err := lim.ReserveN(context.Background(), key, 1, 0)
		if err != nil || !res.OK() {
			t.Fatalf("admission %d at 10:00:00: %v, %v", i, res, err)
		}
		if i < 5 {
			slow = append(slow, res)
		} else {
			admitted = append(admitted, start)
		}
	}
	return slow, admitted
}

// lateClient plays the 180 seconds after start: the key rests for the
// first minute, the slow requests are refunded at +61 s, and from +60 s
// on the client admits as many requests as it can every second. It
// returns admitted with the instants of the client's admissions added.
func lateClient(t *testing.T, lim *ratelimit.Limiter[string], clk *clock.Fake, key string, start int64,
	slow []*ratelimit.Reservation[string], admitted []int64) []int64 {
	ctx := context.Background()
	for s := int64(1); s <= 180; s++ {
		clk.Advance(time.Second)
		now := start + s*time.Second.Microseconds()
		if s < 60 {
			continue // idle: the key refills
		}
		if s == 61 {
			for _, res := range slow {
				if _, err := res.Refund(ctx); err != nil {
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
	return admitted
}

// checkLateBound fails t if the admissions that still count, in order,
// exceed a's bound in a span it covers.
func checkLateBound(t *testing.T, a lateAlg, start int64, admitted []int64) {
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
}

// testRefundsInWindow is issue 41's third scenario: 10 admissions spend a
// window of 10 (ReserveN with no delay), 3 of them, none the newest, are
// refunded through their Reservations in that window, one of them twice:
// exactly 3 more are admitted, on the fixed window, the sliding-window
// counter and the sliding log.
func testRefundsInWindow(t *testing.T, st store.Store[string]) {
	for name, newAlg := range exactUndoPerMinute(10) {
		t.Run(name, func(t *testing.T) { refundsInWindow(t, st, name, newAlg) })
	}
}

// refundsInWindow is testRefundsInWindow for one algorithm.
func refundsInWindow(t *testing.T, st store.Store[string], name string, newAlg func() (algorithm.Algorithm, error)) {
	alg, err := newAlg()
	if err != nil {
		t.Fatal(err)
	}
	minute := time.Minute.Microseconds()
	start := (epoch/minute + 1) * minute
	clk := clock.NewFake(time.UnixMicro(start))
	lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clk), ratelimit.WithName("spent-"+name))
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
	for k, i := range []int{2, 5, 5, 8} {
		given, err := rs[i].Refund(ctx)
		if err != nil {
			t.Fatalf("Refund of admission %d: %v", i, err)
		}
		if want := []int64{1, 1, 0, 1}[k]; given != want { // the second refund of 5 gives nothing
			t.Fatalf("Refund of admission %d (refund %d) gave back %d, want %d", i, k+1, given, want)
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
