package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// Booking ahead (docs/design/scheduling.md): ReserveN books a request at
// the earliest instant every limit admits it and charges it now, in one
// store call (one script on Redis); WaitN sleeps until that instant, so
// that waiters are admitted in the order they booked, each with one store
// call; Cancel gives a booking back; Refund gives back what was charged.

// longestDelay is the longest any algorithm can ask to wait.
const longestDelay = time.Duration(algorithm.MaxDuration) * time.Microsecond

// cancelTimeout bounds the call with which an ended WaitN cancels its booking.
const cancelTimeout = time.Second

// Reservation is a request ReserveN booked and charged, due in Delay. It is
// safe for concurrent use.
type Reservation[K comparable] struct {
	ok        bool
	decision  Decision  // as booked: RetryAfter the delay
	admission Decision  // as it admits the request at its instant
	due       time.Time // when the booking is due, on the limiter's clock
	key       K
	booking   store.Booking
	table     store.Booker[K] // that booked, to cancel; nil when there is nothing to give back
	e         *engine[K]
	hooks     *hooks
	// mu serialises Cancel, Refund, Release and Settle: Settle changes booking.
	mu    sync.Mutex
	done  atomic.Bool // given back (cancelled, refunded or released)
	holds bool        // a limit holds (algorithm.Holder): Release gives it back
	slots *slotQueues[K]
}

// OK reports whether the request was booked; one that was not charged nothing.
func (r *Reservation[K]) OK() bool { return r.ok }

// Delay returns how long from now until the booked instant, or 0.
func (r *Reservation[K]) Delay() time.Duration {
	if !r.ok {
		return 0
	}
	return max(0, r.due.Sub(r.e.clock.Now()))
}

// Decision returns the booking's decision as made (RetryAfter its delay)
// until due, then as WaitN returns it; for a request not booked, the denial.
func (r *Reservation[K]) Decision() Decision {
	if r.ok && !r.e.clock.Now().Before(r.due) {
		return r.admission
	}
	return r.decision
}

// Wait sleeps until the booking is due (ErrNotBooked if not booked); if ctx
// ends first it cancels the booking and returns ctx's error.
func (r *Reservation[K]) Wait(ctx context.Context) error {
	if !r.ok {
		return ErrNotBooked
	}
	if err := r.e.sleep(ctx, r.Delay()); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
		_ = r.Cancel(cctx) // the wait's error is the one to report
		cancel()
		return err
	}
	return nil
}

// Cancel gives back what later charges do not build on (all, when newest);
// nothing once due (Refund still can), when not booked, or a second time.
func (r *Reservation[K]) Cancel(ctx context.Context) error {
	if !r.ok || r.table == nil || r.done.Load() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Due by the instant the store is given: the store would give nothing
	// back, and the handle stays for Refund.
	now := r.e.micros.UnixMicro()
	if now >= r.due.UnixMicro() || r.done.Swap(true) {
		return nil
	}
	start := r.hooks.begin(r.e.clock)
	err := r.storeErr(ctx, r.table.Cancel(ctx, r.key, now, r.booking))
	if r.holds {
		r.slots.released(r.key)
	}
	d := r.decision
	d = d.booked() // the booking's, as it was booked: the event's outcome is the cancel's
	end(ctx, r.hooks, r.e.clock, OpCancel, r.key, r.booking.Cost, start, &d, err)
	return err
}

// Refund gives back this charge as far as undoing it now does, and says how
// much (of several limits, the least): 0 once it no longer counts.
func (r *Reservation[K]) Refund(ctx context.Context) (int64, error) {
	return r.giveBack(ctx, OpRefund, false)
}

// Settle makes this reservation's charge n (0 ≤ n ≤ 2^40): less is given
// back as Refund does, more is charged past the limit, a debt later requests
// wait out. It does nothing after Refund or Cancel (docs/refunds.md).
func (r *Reservation[K]) Settle(ctx context.Context, n int) error {
	if n < 0 || int64(n) > algorithm.MaxLimit {
		return fmt.Errorf("%w: settle to %d", ErrInvalidCost, n)
	}
	if !r.ok || r.table == nil || r.done.Load() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done.Load() {
		return nil
	}
	st, ok := r.table.(store.Settler[K])
	if !ok {
		return fmt.Errorf("%w: the store cannot settle a booking (store.Settler)", store.ErrAlgorithmUnsupported)
	}
	start := r.hooks.begin(r.e.clock)
	b, err := st.Settle(ctx, r.key, r.e.micros.UnixMicro(), r.booking, int64(n))
	err = r.storeErr(ctx, err)
	if err == nil {
		r.booking = b
	}
	d := r.decision
	d = d.booked() // the booking's, as it was booked: the event's outcome is the settle's
	end(ctx, r.hooks, r.e.clock, OpSettle, r.key, int64(n), start, &d, err)
	return err
}

// storeErr returns err, a give-back's error, as one that says the caller
// ended when it did and the store failed meanwhile.
func (r *Reservation[K]) storeErr(ctx context.Context, err error) error {
	if err != nil && storeFailed(err) {
		if cerr := callerEnded(ctx); cerr != nil {
			return &endedError{ctxErr: cerr, storeErr: err}
		}
	}
	return err
}

// bookerOf returns t's booking operations, or an error wrapping
// store.ErrAlgorithmUnsupported for a store that has none.
func bookerOf[K comparable](t store.Table[K]) (store.Booker[K], error) {
	if b, ok := t.(store.Booker[K]); ok {
		return b, nil
	}
	return nil, fmt.Errorf("%w: the store cannot book, cancel or refund (store.Booker)", store.ErrAlgorithmUnsupported)
}

// settlerOf returns t's Settle, or an error wrapping
// store.ErrAlgorithmUnsupported for a store that has none.
func settlerOf[K comparable](t store.Table[K]) (store.Settler[K], error) {
	if s, ok := t.(store.Settler[K]); ok {
		return s, nil
	}
	return nil, fmt.Errorf("%w: the store cannot settle a booking (store.Settler)", store.ErrAlgorithmUnsupported)
}

// delayMicros returns d in µs, algorithm.MaxDuration for a negative d or one
// above longestDelay.
func delayMicros(d time.Duration) int64 {
	if d < 0 || d > longestDelay {
		return algorithm.MaxDuration
	}
	return d.Microseconds()
}

// reserve books n for key within maxDelay (0 in dry-run mode, where a
// request is never kept waiting: one that does not fit now is admitted
// uncharged, as AllowN does) and fills in res, whose engine and hooks are
// set.
func (e *engine[K]) reserve(ctx context.Context, h *hooks, key K, n int, maxDelay time.Duration, res *Reservation[K]) error {
	start := h.begin(e.clock)
	err := e.book(ctx, h.dryRun, key, n, maxDelay, res)
	if h.dryRun && err == nil && !res.ok {
		// Not booked now: admitted, uncharged, as a dry run's denial.
		res.ok, res.due = true, e.clock.Now()
		res.table = nil // nothing was booked: nothing to give back
	}
	outcome := res.decision
	if res.ok && err == nil && !h.dryRun {
		outcome = outcome.booked() // booked: the event reports it admitted
	}
	end(ctx, h, e.clock, OpReserve, key, int64(n), start, &outcome, err)
	if h.dryRun && outcome.DryRunDenied() {
		res.decision = outcome // its limits marked too, in their shared storage
	}
	res.admission = res.decision
	if res.ok && res.decision.retryAfter > 0 {
		res.admission = res.decision.admitted()
	}
	return err
}

// book is reserve without the hooks.
func (e *engine[K]) book(ctx context.Context, now0 bool, key K, n int, maxDelay time.Duration, res *Reservation[K]) error {
	ls := e.cur.Load()
	if n < 1 || int64(n) > ls.limit {
		return algorithm.CheckCost(int64(n), ls.limit)
	}
	md := min(delayMicros(maxDelay), ls.ahead)
	if now0 || ls.holds {
		md = 0 // a hold is never booked ahead: see inflight.go
	}
	res.key = key
	rs := make([]algorithm.Result, len(ls.each))
	bk, err := bookerOf(ls.table)
	if err != nil {
		return err
	}
	// The booking's delay counts from the instant the store is given, read
	// once: a caller descheduled between two readings would otherwise
	// wake that much early.
	now := e.micros.UnixMicro()
	at := time.UnixMicro(now)
	r, booking, ok, err := bk.Book(ctx, key, now, int64(n), md, rs)
	src, open := FromStore, errors.Is(err, ErrBreakerOpen)
	if err != nil {
		if r, booking, ok, src, err = e.failBook(ctx, ls, err, key, int64(n), md, rs, res); err != nil {
			return err
		}
	} else {
		res.table = bk
	}
	res.holds, res.slots = ls.holds, ls.slots
	res.ok, res.booking = ok, booking
	e.decide(&res.decision, ls, r, rs, src)
	res.decision.setBreakerOpen(open)
	if ok {
		res.due = at.Add(time.Duration(r.RetryAfter) * time.Microsecond)
	}
	return nil
}

// failBook is fail for a booking: the failure policy's answer for key,
// whose store failed with err. FailOpen books nothing and admits at once;
// FailClosed refuses; FailLocal books on the local table (res.table).
func (e *engine[K]) failBook(ctx context.Context, ls *limits[K], err error, key K, cost, maxDelay int64, rs []algorithm.Result, res *Reservation[K]) (algorithm.Result, store.Booking, bool, Source, error) {
	if e.policy != FailLocal {
		r, src, err := e.fail(ctx, ls, err, key, cost, true, rs)
		if err != nil {
			return r, store.Booking{}, false, src, err
		}
		return r, store.Booking{}, src == FromFailOpen, src, nil
	}
	if !storeFailed(err) {
		return algorithm.Result{}, store.Booking{}, false, FromStore, err
	}
	if cerr := callerEnded(ctx); cerr != nil {
		return algorithm.Result{}, store.Booking{}, false, FromStore, &endedError{ctxErr: cerr, storeErr: err}
	}
	if e.onError != nil {
		e.onError(err)
	}
	local, lerr := bookerOf(ls.local)
	if lerr != nil {
		return algorithm.Result{}, store.Booking{}, false, FromStore, lerr
	}
	r, b, ok, lerr := local.Book(ctx, key, e.localAt.Now().UnixMicro(), cost, maxDelay, rs)
	if lerr != nil {
		return r, b, false, FromStore, lerr
	}
	res.table = local
	return r, b, ok, FromLocal, nil
}

// waitBooked is WaitN: one booking, then a sleep until it is due. A
// booking that cannot be made before ctx's deadline fails with
// ErrWouldExceedDeadline, charging nothing; one refused by FailClosed is
// asked again after its RetryAfter, one due beyond the bound on booking
// ahead (WithMaxBookAhead) once it would fit within it. A caller whose ctx ends first gives its
// booking back (Cancel, within a second). With ErrWouldExceedDeadline
// it returns the reservation that was not booked, whose decision says
// when the request would fit.
func (e *engine[K]) waitBooked(ctx context.Context, reserve func(maxDelay time.Duration) (*Reservation[K], error)) (*Reservation[K], error) {
	if !e.canBook() {
		return nil, errCannotBook
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		maxDelay := time.Duration(-1)
		deadline, hasDeadline := ctx.Deadline()
		if hasDeadline {
			maxDelay = max(0, time.Until(deadline))
		}
		r, err := reserve(maxDelay)
		if err != nil {
			return nil, err
		}
		if !r.OK() {
			retry := r.decision.RetryAfter()
			ahead := time.Duration(e.cur.Load().ahead) * time.Microsecond
			wait := retry // FailClosed's refusal: ask again after its RetryAfter
			if r.decision.Source() == FromStore {
				// Refused within the deadline: by the bound on booking
				// ahead, until the booking fits within it.
				wait = retry - ahead
			}
			if hasDeadline && time.Until(deadline) < retry || wait <= 0 {
				return r, fmt.Errorf("%w (retry after %v): %w", ErrWouldExceedDeadline, retry, context.DeadlineExceeded)
			}
			if err := e.sleep(ctx, wait); err != nil {
				return nil, err
			}
			continue
		}
		if err := r.Wait(ctx); err != nil {
			return nil, err
		}
		return r, nil
	}
}

// errCannotBook tells WaitN to poll instead: see canBook.
var errCannotBook = errors.New("ratelimit: the limits cannot book")

// canBook reports whether every limit's algorithm books
// (algorithm.Booker) and the store's table can (store.Booker).
func (e *engine[K]) canBook() bool {
	ls := e.cur.Load()
	if _, err := bookerOf(ls.table); err != nil {
		return false
	}
	for _, l := range ls.stored {
		if _, ok := l.Algorithm.(algorithm.Booker); !ok {
			return false
		}
	}
	return true
}

// sleep waits d on the engine's clock, or until ctx ends.
func (e *engine[K]) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := e.clock.NewTimer(d)
	select {
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// admitted returns d, a booking's decision, as the decision admitting it
// at its instant: RetryAfter 0, ResetAfter less the delay waited; each
// limit's likewise, in new storage.
func (d Decision) admitted() Decision {
	waited := d.retryAfter
	d.retryAfter = 0
	d.resetAfter = max(0, d.resetAfter-waited)
	w := d.word()
	if d.Source() != FromFailClosed {
		w |= allowedBit
	}
	if d.kind != nil && d.kind.limits != nil {
		ls := make([]Decision, len(*d.kind.limits))
		for i, l := range *d.kind.limits {
			ls[i] = l.admitted()
		}
		d.kind = &kind{word: w, limits: &ls}
		return d
	}
	return d.withWord(w)
}

// decide makes d the decision of r, the limits' results rs combined (rs
// unused for one limit), made by src.
func (e *engine[K]) decide(d *Decision, ls *limits[K], r algorithm.Result, rs []algorithm.Result, src Source) {
	switch {
	case e.many:
		d.set(r, rs, src, ls.each, ls.eachKinds)
	case src == FromStore:
		*d = decided(r, &ls.oneKinds[0])
	default:
		*d = decidedBy(r, ls.limit, src)
	}
}

// refund gives back up to n of key's charges; rs receives the limits'
// results. No failure policy decides a refund: a store error is returned,
// and the charge stays (with FailLocal, the local table is refunded too).
func (e *engine[K]) refund(ctx context.Context, h *hooks, key K, n int, d *Decision) error {
	start := h.begin(e.clock)
	err := e.refundStore(ctx, key, n, d)
	end(ctx, h, e.clock, OpRefund, key, int64(n), start, d, err)
	return err
}

func (e *engine[K]) refundStore(ctx context.Context, key K, n int, d *Decision) error {
	ls := e.cur.Load()
	if n < 1 {
		*d = Decision{}
		return algorithm.CheckCost(int64(n), ls.limit)
	}
	if ls.local != nil {
		if local, err := bookerOf(ls.local); err == nil {
			_, _ = local.Refund(ctx, key, e.localAt.Now().UnixMicro(), int64(n), nil) // the memory store cannot fail
		}
	}
	bk, err := bookerOf(ls.table)
	if err != nil {
		*d = Decision{}
		return err
	}
	rs := make([]algorithm.Result, len(ls.each))
	r, err := bk.Refund(ctx, key, e.micros.UnixMicro(), int64(n), rs)
	if err != nil {
		*d = Decision{}
		if storeFailed(err) {
			if cerr := callerEnded(ctx); cerr != nil {
				return &endedError{ctxErr: cerr, storeErr: err}
			}
		}
		return err
	}
	e.decide(d, ls, r, rs, FromStore)
	if ls.holds {
		ls.slots.released(key)
	}
	return nil
}

// ReserveN books n for key, charged now, at the first instant it fits within
// maxDelay (negative: any; 0 as AllowN); else it charges nothing and is not OK.
func (l *Limiter[K]) ReserveN(ctx context.Context, key K, n int, maxDelay time.Duration) (*Reservation[K], error) {
	res := &Reservation[K]{e: &l.engine, hooks: &l.hooks}
	if err := l.reserve(ctx, &l.hooks, key, n, maxDelay, res); err != nil {
		return nil, err
	}
	return res, nil
}

// Reserve is shorthand for ReserveN(ctx, key, 1, -1).
func (l *Limiter[K]) Reserve(ctx context.Context, key K) (*Reservation[K], error) {
	return l.ReserveN(ctx, key, 1, -1)
}

// Refund gives back up to n of key's newest due charges that still count, not
// bookings ahead; Reservation.Refund gives back its own exactly.
func (l *Limiter[K]) Refund(ctx context.Context, key K, n int) (Decision, error) {
	var d Decision
	err := l.refund(ctx, &l.hooks, key, n, &d)
	return d, err
}
