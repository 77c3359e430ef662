package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/nilness"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// engine is what a Limiter and a Policy share: a table of their limits,
// the clock, and the failure policy.
type engine[K comparable] struct {
	table   store.Table[K]
	clock   clock.Clock
	micros  clock.Micros // the clock, read as Unix µs
	limit   int64        // the largest cost every limit can admit at once
	limits  []int64      // each limit's Limit
	policy  FailurePolicy
	onError func(error)
	local   store.Table[K] // FailLocal's table; nil otherwise
	localAt clock.Clock    // the clock of local
}

func newOptions(opts []Option) (options, error) {
	o := options{clock: clock.Local()}
	for _, opt := range opts {
		opt.apply(&o)
	}
	if nilness.Is(o.clock) {
		return o, fmt.Errorf("%w: nil clock", ErrInvalidConfig)
	}
	if o.policy > FailLocal {
		return o, fmt.Errorf("%w: unknown FailurePolicy %d", ErrInvalidConfig, o.policy)
	}
	return o, nil
}

// init opens st for limits, whose algorithms are not nil.
func (e *engine[K]) init(st store.Store[K], limits []store.Limit, o options) error {
	if nilness.Is(st) {
		return fmt.Errorf("%w: nil store", ErrInvalidConfig)
	}
	if err := store.CheckLimits(limits); err != nil {
		return err
	}
	table, err := st.Open(limits, o.clock)
	if err != nil {
		return err
	}
	if w, ok := table.(store.Warner); ok {
		warn(w.Warnings(), o.onError)
	}
	*e = engine[K]{clock: o.clock, micros: clock.AsMicros(o.clock), policy: o.policy, onError: o.onError}
	if e.table, err = wrapTable(table, &o, e.micros); err != nil {
		return err
	}
	e.limits = make([]int64, len(limits))
	e.limit = limits[0].Algorithm.Limit()
	for i, l := range limits {
		e.limits[i] = l.Algorithm.Limit()
		e.limit = min(e.limit, e.limits[i])
	}
	if o.policy == FailLocal {
		// The memory store has no server clock; the local one stands in.
		e.localAt = o.clock
		if clock.IsServer(o.clock) {
			e.localAt = clock.Local()
		}
		if e.local, err = memorystore.New[K]().Open(limits, e.localAt); err != nil {
			return err
		}
	}
	return nil
}

// storeFailed reports whether err is the store's failure to decide, an
// outage (ErrStoreUnavailable) or a store out of room (ErrStoreFull): the
// errors a failure policy decides on. Any other error (a bad cost, a key
// too long) is the caller's, returned as it is.
func storeFailed(err error) bool {
	return errors.Is(err, ErrStoreUnavailable) || errors.Is(err, ErrStoreFull)
}

// callerEnded returns ctx's error when the caller's context has ended:
// cancelled, or past its deadline by the wall clock. It checks the
// deadline itself because ctx.Err can still be nil just after the
// deadline, until the context's timer has run, while client libraries
// check deadlines on their own and fail first (rueidis reports a dial
// timeout).
func callerEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// endedError is the error of a store call that failed after the caller's
// own context had ended. It is the caller's doing, not the store's: it
// matches the context's error (context.Canceled or
// context.DeadlineExceeded) and not ErrStoreUnavailable, whatever the
// client library reported, so that no failure policy decides it and the
// circuit breaker does not count it. The store's error is kept in the
// text, for logs.
type endedError struct {
	ctxErr   error // context.Canceled or context.DeadlineExceeded
	storeErr error
}

func (e *endedError) Error() string {
	return "ratelimit: the caller's context ended before the store answered (" + e.ctxErr.Error() + "); the store said: " + e.storeErr.Error()
}

func (e *endedError) Unwrap() error { return e.ctxErr }

// warn passes each of a table's warnings to onError, or logs it with
// log/slog's default logger when onError is nil: a store that may drop
// limiter state must not go unnoticed because no handler was set.
func warn(warnings []error, onError func(error)) {
	for _, w := range warnings {
		if onError != nil {
			onError(w)
		} else {
			slog.Warn("ratelimit: the store may not keep limits exactly", "err", w)
		}
	}
}

// fail turns a store error into the failure policy's result, and says
// where it came from, or returns the error. peek selects the local table's
// Peek rather than Take; out, when not nil, receives each limit's result.
//
// A request whose caller's context has ended gets no decision from the
// failure policy, whatever the policy: the caller has gone, and admitting
// it uncharged (FailOpen) or charging it to the local table (FailLocal)
// would let a client that sets a deadline too short for any store to meet
// switch the limiter off for itself. It gets an endedError.
func (e *engine[K]) fail(ctx context.Context, err error, key K, cost int64, peek bool, out []algorithm.Result) (algorithm.Result, Source, error) {
	if !storeFailed(err) {
		return algorithm.Result{}, FromStore, err
	}
	if cerr := callerEnded(ctx); cerr != nil {
		return algorithm.Result{}, FromStore, &endedError{ctxErr: cerr, storeErr: err}
	}
	if e.policy == FailWithError {
		return algorithm.Result{}, FromStore, err
	}
	if e.onError != nil {
		e.onError(err)
	}
	switch e.policy {
	case FailOpen:
		for i := range out {
			out[i] = algorithm.Fresh(e.limits[i])
		}
		return algorithm.Fresh(e.limit), FromFailOpen, nil
	case FailClosed:
		closed := algorithm.Result{RetryAfter: FailClosedRetryAfter.Microseconds()}
		for i := range out {
			out[i] = closed
		}
		return closed, FromFailClosed, nil
	}
	now := e.localAt.Now().UnixMicro()
	var r algorithm.Result
	if peek {
		r, err = e.local.Peek(ctx, key, now, out)
	} else {
		r, err = e.local.Take(ctx, key, now, cost, out)
	}
	if err != nil {
		return r, FromStore, err
	}
	return r, FromLocal, nil
}

// failed is the decision of a single limit whose store failed with err:
// the failure policy's, marked BreakerOpen when the breaker refused the
// call, or the error.
func (e *engine[K]) failed(ctx context.Context, err error, key K, cost int64, peek bool) (Decision, error) {
	open := errors.Is(err, ErrBreakerOpen)
	r, src, err := e.fail(ctx, err, key, cost, peek, nil)
	if err != nil {
		return Decision{}, err
	}
	d := decided(r, e.limit, src)
	d.setBreakerOpen(open)
	return d, nil
}

// wait calls allow until the decision it returns admits the request, as
// WaitN documents, sleeping on the engine's clock in between.
func (e *engine[K]) wait(ctx context.Context, allow func() (Decision, error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := allow()
		if err != nil || d.Allowed() {
			return err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d.RetryAfter() {
			return fmt.Errorf("%w (retry after %v): %w", ErrWouldExceedDeadline, d.RetryAfter(), context.DeadlineExceeded)
		}
		t := e.clock.NewTimer(d.RetryAfter())
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// reset forgets key's state in the store, and in FailLocal's table.
func (e *engine[K]) reset(ctx context.Context, key K) error {
	if e.local != nil {
		_ = e.local.Reset(ctx, key) // the memory store cannot fail
	}
	return e.table.Reset(ctx, key)
}

// windowOf returns alg's window, or 0 when it does not say.
func windowOf(alg algorithm.Algorithm) time.Duration {
	if w, ok := alg.(interface{ Window() time.Duration }); ok {
		return w.Window()
	}
	return 0
}
