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

// ErrBreakerOpen is the error of a call that the circuit breaker (see
// [WithBreaker]) kept from the store while it was open. It wraps
// ErrStoreUnavailable, so failure policies decide on it as on any store
// failure, and a FailWithError Limiter returns it at once.
var ErrBreakerOpen = fmt.Errorf("ratelimit: circuit breaker open, the store was not asked: %w", store.ErrUnavailable)

// Breaker configures the circuit breaker set by [WithBreaker].
type Breaker struct {
	// Failures is how many store failures in a row open the breaker.
	// 0 means DefaultBreakerFailures.
	Failures int
	// ProbeInterval is how long the breaker stays open before it lets one
	// call through to the store (a probe), and how long it waits again
	// after each probe that fails. 0 means DefaultProbeInterval.
	ProbeInterval time.Duration
	// SlowCall is how long a call must have waited for a store that is
	// not store.Remote, when the caller's own deadline ended it, for it
	// to count as a failure; a shorter deadline is the caller's doing and
	// counts neither way. A remote store (the Redis stores) never sees a
	// caller's deadline, so its calls count by their own outcome. 0 means
	// DefaultSlowCall.
	SlowCall time.Duration
}

// The defaults of a Breaker's zero fields.
const (
	DefaultBreakerFailures = 5
	DefaultProbeInterval   = time.Second
	DefaultSlowCall        = 100 * time.Millisecond
)

// WithBreaker puts a circuit breaker in front of the store. Once
// b.Failures calls in a row have failed (an error wrapping
// ErrStoreUnavailable), the breaker opens: Allow, Peek and Reset fail at once with
// ErrBreakerOpen, without touching the network, and the failure policy
// decides (Decision.BreakerOpen is set on its decisions). Every
// b.ProbeInterval, one call is let through to the store as a probe; the
// first call the store answers closes the breaker, and decisions are the
// store's again.
//
// Only the store's health moves the breaker, so that no client can open
// it for everyone. A remote store's calls (store.Remote: the Redis
// stores) run under none of their callers' deadlines, so they count by
// their own outcome, a store's own timeout included. On other stores, a
// call whose caller's context was cancelled counts neither way; so does
// one that the caller's deadline ended before the store had b.SlowCall
// to answer. A store out of room (ErrStoreFull) and a key too long
// (ErrKeyTooLong) are not outages and count neither way either.
//
// The breaker belongs to the Limiter: Limiters sharing a store have a
// breaker each. It counts failures of the whole store, not of one key or
// one node: in a Redis Cluster with one master down, the answers of the
// others keep it closed.
//
// Instants are read from the Limiter's clock (the local one with
// clock.Server()), so a fake clock drives probes in tests. A Breaker with a
// negative field makes New fail with ErrInvalidConfig.
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
		b.Failures = DefaultBreakerFailures
	}
	if b.ProbeInterval == 0 {
		b.ProbeInterval = DefaultProbeInterval
	}
	if b.SlowCall == 0 {
		b.SlowCall = DefaultSlowCall
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

func (t *breakerTable[K]) Undo(ctx context.Context, key K, now int64, bk store.Booking) error {
	b, err := bookerOf(t.next)
	if err != nil {
		return err
	}
	if !t.b.admit(now) {
		return ErrBreakerOpen
	}
	err = b.Undo(ctx, key, now, bk)
	t.b.done(ctx, err, now, t.micros)
	return err
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
