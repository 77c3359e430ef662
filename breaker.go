package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// Breaker configures WithBreaker; a negative field is ErrInvalidConfig.
type Breaker struct {
	Failures      int           // failures in a row that open the breaker; 0 means 5
	ProbeInterval time.Duration // how long it stays open between probes; 0 means a second
	SlowCall      time.Duration // past it, a call its caller's deadline cut is a failure (not store.Remote); 0: 100ms
}

// The defaults of a Breaker's zero fields.
const (
	defaultBreakerFailures = 5
	defaultProbeInterval   = time.Second
	defaultSlowCall        = 100 * time.Millisecond
)

// WithBreaker fails calls with ErrBreakerOpen, not asking the store, once
// b.Failures in a row failed (ErrStoreUnavailable), until a probe is answered.
func WithBreaker(b Breaker) Option {
	return optionFunc(func(o *options) { o.breaker = &b })
}

// check returns b with its defaults filled in, or an error wrapping
// ErrInvalidConfig.
func (b Breaker) check() (Breaker, error) {
	if b.Failures < 0 || b.ProbeInterval < 0 || b.SlowCall < 0 {
		return b, fmt.Errorf("%w: Breaker{Failures: %d, ProbeInterval: %v, SlowCall: %v}: none may be negative", ErrInvalidConfig, b.Failures, b.ProbeInterval, b.SlowCall)
	}
	if b.ProbeInterval > time.Duration(algorithm.MaxDuration)*time.Microsecond {
		return b, fmt.Errorf("%w: Breaker.ProbeInterval %v is longer than %v", ErrInvalidConfig, b.ProbeInterval, time.Duration(algorithm.MaxDuration)*time.Microsecond)
	}
	if b.Failures == 0 {
		b.Failures = defaultBreakerFailures
	}
	if b.ProbeInterval == 0 {
		b.ProbeInterval = defaultProbeInterval
	}
	if b.SlowCall == 0 {
		b.SlowCall = defaultSlowCall
	}
	return b, nil
}

// closed is breaker.probeAt while the breaker is closed.
const closed = math.MinInt64

// breaker is the state of a circuit breaker, shared by the calls of one
// Limiter without a lock. While it is closed, a call reads one word that
// nobody writes; it is written when a failure follows a success or the
// breaker changes state.
type breaker struct {
	threshold int64
	interval  int64        // µs
	slowCall  int64        // µs
	failures  atomic.Int64 // consecutive failures
	// probeAt is closed while the breaker is closed; while it is open, the
	// instant (Unix µs) from which the next probe may go.
	probeAt atomic.Int64
}

func newBreaker(b Breaker) *breaker {
	br := &breaker{threshold: int64(b.Failures), interval: b.ProbeInterval.Microseconds(), slowCall: b.SlowCall.Microseconds()}
	if br.interval < 1 {
		br.interval = 1
	}
	br.probeAt.Store(closed)
	return br
}

// admit reports whether a call at now may go to the store: always while
// the breaker is closed; while it is open, only the first call at or
// after the instant of the next probe, which moves that instant on by the
// interval.
func (b *breaker) admit(now int64) bool {
	at := b.probeAt.Load()
	if at == closed {
		return true
	}
	if now < at {
		return false
	}
	return b.probeAt.CompareAndSwap(at, now+b.interval)
}

// done records the outcome of a call admitted at now; end is the clock
// now was read from, read again only when the call failed.
func (b *breaker) done(ctx context.Context, err error, now int64, end clock.Micros) {
	if err == nil {
		if b.failures.Load() != 0 {
			b.failures.Store(0)
		}
		if b.probeAt.Load() != closed {
			b.probeAt.Store(closed)
		}
		return
	}
	if !errors.Is(err, store.ErrUnavailable) {
		return // not the store's health: a store out of room, a bad key
	}
	if cerr := callerEnded(ctx); cerr != nil && !b.gaveSlowCall(ctx, cerr, now, end) {
		return // the caller gave up, or set a deadline no store could meet
	}
	if b.failures.Add(1) >= b.threshold {
		b.probeAt.CompareAndSwap(closed, now+b.interval)
	}
}

// gaveSlowCall reports whether the caller, whose context ended with cerr,
// had given the store at least slowCall to answer a call made at now: a
// deadline at least slowCall after the call began. The budget is what the
// caller allowed, not how long the call took, so a call with a deadline
// of 1µs never counts, however long the goroutine then waited for a CPU.
// The call began elapsed ago on the Limiter's clock (end minus now),
// which on the wall clock is time.Now() less elapsed; a fake clock that
// stands still makes that the present.
func (b *breaker) gaveSlowCall(ctx context.Context, cerr error, now int64, end clock.Micros) bool {
	deadline, ok := ctx.Deadline()
	if !ok || errors.Is(cerr, context.Canceled) {
		return false
	}
	elapsed := time.Duration(end.UnixMicro()-now) * time.Microsecond
	return deadline.Sub(time.Now().Add(-elapsed)) >= time.Duration(b.slowCall)*time.Microsecond
}

// breakerTable is a table behind a circuit breaker.
type breakerTable[K comparable] struct {
	next   store.Table[K]
	b      *breaker
	micros clock.Micros // for Reset, which is given no instant
}

func (t *breakerTable[K]) Take(ctx context.Context, key K, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	if !t.b.admit(now) {
		return algorithm.Result{}, ErrBreakerOpen
	}
	r, err := t.next.Take(ctx, key, now, cost, out)
	t.b.done(ctx, err, now, t.micros)
	return r, err
}

func (t *breakerTable[K]) Peek(ctx context.Context, key K, now int64, out []algorithm.Result) (algorithm.Result, error) {
	if !t.b.admit(now) {
		return algorithm.Result{}, ErrBreakerOpen
	}
	r, err := t.next.Peek(ctx, key, now, out)
	t.b.done(ctx, err, now, t.micros)
	return r, err
}

func (t *breakerTable[K]) Reset(ctx context.Context, key K) error {
	now := t.micros.UnixMicro()
	if !t.b.admit(now) {
		return ErrBreakerOpen
	}
	err := t.next.Reset(ctx, key)
	t.b.done(ctx, err, now, t.micros)
	return err
}

// Book, Cancel, Undo and Refund pass the booking operations (store.Booker)
// through the breaker as Take does.
func (t *breakerTable[K]) Book(ctx context.Context, key K, now, cost, maxDelay int64, out []algorithm.Result) (algorithm.Result, store.Booking, bool, error) {
	b, err := bookerOf(t.next)
	if err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	if !t.b.admit(now) {
		return algorithm.Result{}, store.Booking{}, false, ErrBreakerOpen
	}
	r, bk, ok, err := b.Book(ctx, key, now, cost, maxDelay, out)
	t.b.done(ctx, err, now, t.micros)
	return r, bk, ok, err
}

func (t *breakerTable[K]) Cancel(ctx context.Context, key K, now int64, bk store.Booking) error {
	b, err := bookerOf(t.next)
	if err != nil {
		return err
	}
	if !t.b.admit(now) {
		return ErrBreakerOpen
	}
	err = b.Cancel(ctx, key, now, bk)
	t.b.done(ctx, err, now, t.micros)
	return err
}

func (t *breakerTable[K]) Undo(ctx context.Context, key K, now int64, bk store.Booking) (int64, error) {
	b, err := bookerOf(t.next)
	if err != nil {
		return 0, err
	}
	if !t.b.admit(now) {
		return 0, ErrBreakerOpen
	}
	given, err := b.Undo(ctx, key, now, bk)
	t.b.done(ctx, err, now, t.micros)
	return given, err
}

func (t *breakerTable[K]) Settle(ctx context.Context, key K, now int64, bk store.Booking, n int64) (store.Booking, error) {
	s, err := settlerOf(t.next)
	if err != nil {
		return bk, err
	}
	if !t.b.admit(now) {
		return bk, ErrBreakerOpen
	}
	next, err := s.Settle(ctx, key, now, bk, n)
	t.b.done(ctx, err, now, t.micros)
	return next, err
}

func (t *breakerTable[K]) Refund(ctx context.Context, key K, now, n int64, out []algorithm.Result) (algorithm.Result, error) {
	b, err := bookerOf(t.next)
	if err != nil {
		return algorithm.Result{}, err
	}
	if !t.b.admit(now) {
		return algorithm.Result{}, ErrBreakerOpen
	}
	r, err := b.Refund(ctx, key, now, n, out)
	t.b.done(ctx, err, now, t.micros)
	return r, err
}
