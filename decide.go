package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/nilness"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// engine is a Limiter's limits and the tables deciding them, the clock,
// and the failure policy: what the Limiters of With share.
type engine[K comparable] struct {
	cur     *atomic.Pointer[limits[K]] // the limits in force; SetLimit replaces them
	clock   clock.Clock
	micros  clock.Micros // the clock, read as Unix µs
	policy  FailurePolicy
	onError func(error)
	store   store.Store[K] // where the limits' state is kept, to open them anew
	wrap    *wrapping[K]   // the breaker and denial cache in front of each table
	localSt store.Store[K] // FailLocal's private memory store; nil otherwise
	localAt clock.Clock    // the clock of localSt
	mu      *sync.Mutex    // serialises changes of limits
	many    bool           // built by NewPolicy: decisions carry each limit's
	ahead   int64          // WithMaxBookAhead in µs; -1 for the limits' reset period
	hooks   hooks          // the observer and dry run, applied by end (observer.go)
}

// limits is a configuration of limits in force, with the tables opened
// for it: a decision reads it once, so that a change of limits in the
// middle of a decision does not mix two configurations.
type limits[K comparable] struct {
	table     store.Table[K]
	local     store.Table[K] // FailLocal's table; nil otherwise
	limit     int64          // the largest cost every limit can admit at once
	each      []int64        // each limit's Limit
	eachKinds []kinds        // of each limit's decisions by the store
	oneKinds  [1]kinds       // eachKinds of one limit
	stored    []store.Limit  // as opened
	ahead     int64          // how far ahead, in µs, a booking may be due
	spec      []Limit        // the limits with their names (NewPolicy's), for Limits
	// holding says, per limit, whether its algorithm holds
	// (algorithm.Holder), and holds whether any does; inProcess is
	// the store's store.Local.
	holding          []bool
	holds, inProcess bool
	slots            *slotQueues[K] // the key's waiters for a slot, when a limit holds (inflight.go)
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
	if o.named {
		return o, checkName(o.hooks.name)
	}
	return o, nil
}

// init opens st for spec, whose algorithms are not nil; stored are the
// limits as the store sees them, in the same order.
func (e *engine[K]) init(st store.Store[K], spec []Limit, stored []store.Limit, o options) error {
	if nilness.Is(st) {
		return fmt.Errorf("%w: nil store", ErrInvalidConfig)
	}
	*e = engine[K]{cur: new(atomic.Pointer[limits[K]]), clock: o.clock, micros: clock.AsMicros(o.clock),
		policy: o.policy, onError: o.onError, store: st, mu: new(sync.Mutex), ahead: bookAheadMicros(o.bookAhead), hooks: o.hooks}
	var err error
	if e.wrap, err = newWrapping[K](&o, e.micros); err != nil {
		return err
	}
	if o.policy == FailLocal {
		// The memory store has no server clock; the local one stands in.
		e.localAt = o.clock
		if clock.IsServer(o.clock) {
			e.localAt = clock.Local()
		}
		e.localSt = memorystore.New[K]()
	}
	ls, err := e.open(spec, stored)
	if err != nil {
		return err
	}
	e.cur.Store(ls)
	return nil
}

// open opens the tables of a configuration of limits; spec nil for a
// Limiter of one limit, which it makes of stored.
func (e *engine[K]) open(spec []Limit, stored []store.Limit) (*limits[K], error) {
	if err := store.CheckLimits(stored); err != nil {
		return nil, err
	}
	if spec == nil {
		s := stored[0]
		spec = []Limit{{Algorithm: s.Algorithm, Inherit: s.Inherit, ResetOnMismatch: s.ResetOnMismatch}}
	}
	spec = spec[:len(spec):len(spec)]
	holding := make([]bool, len(stored))
	holds := false
	for i, l := range stored {
		holding[i] = algorithm.Holds(l.Algorithm)
		holds = holds || holding[i]
	}
	if holds && e.wrap.denials != 0 {
		// A release frees a slot at any moment, here or elsewhere: a
		// denial holds for no known time.
		return nil, fmt.Errorf("%w: WithDenialCache cannot apply to a limit that holds (%v)", ErrInvalidConfig, stored[0].Algorithm)
	}
	table, err := e.store.Open(stored, e.clock)
	if err != nil {
		return nil, err
	}
	if w, ok := table.(store.Warner); ok {
		warn(w.Warnings(), e.onError)
	}
	if r, ok := table.(store.Reporter); ok {
		onError := e.onError
		r.ReportTo(func(err error) { warn([]error{err}, onError) })
	}
	ls := &limits[K]{table: e.wrap.wrap(table), each: make([]int64, len(stored)), stored: stored, spec: spec, holding: holding, holds: holds}
	if l, ok := e.store.(store.Local); ok {
		ls.inProcess = l.Local()
	}
	for i, l := range stored {
		if holding[i] {
			ls.slots = sharedSlots(e.store, l.ID)
			break
		}
	}
	ls.limit = stored[0].Algorithm.Limit()
	ls.ahead = e.ahead
	if e.ahead < 0 {
		ls.ahead = minBookAhead.Microseconds()
	}
	ls.eachKinds = ls.oneKinds[:]
	if len(stored) > 1 {
		ls.eachKinds = make([]kinds, len(stored))
	}
	for i, l := range stored {
		ls.each[i] = l.Algorithm.Limit()
		ls.eachKinds[i] = kindsOf(ls.each[i], FromStore)
		ls.limit = min(ls.limit, ls.each[i])
		if e.ahead < 0 {
			ls.ahead = max(ls.ahead, resetPeriod(l.Algorithm))
		}
	}
	if e.localSt != nil {
		if ls.local, err = e.localSt.Open(stored, e.localAt); err != nil {
			return nil, err
		}
	}
	return ls, nil
}

// bookAheadMicros is WithMaxBookAhead's bound in µs: -1 when not given
// (each configuration's reset period then, at least minBookAhead), algorithm.MaxDuration for no
// bound.
func bookAheadMicros(d *time.Duration) int64 {
	switch {
	case d == nil:
		return -1
	case *d < 0 || *d > longestDelay:
		return algorithm.MaxDuration
	}
	return d.Microseconds()
}

// minBookAhead is the least default bound on booking ahead: waiters
// queued within it each make one store call, however fast the limit.
const minBookAhead = time.Minute

// resetPeriod is how long a key alg has fully spent takes to be fresh
// again, in µs: the default bound on booking ahead.
func resetPeriod(alg algorithm.Algorithm) int64 {
	_, r := alg.Take(alg.Init(algorithm.State{}, 0), 0, alg.Limit())
	return min(r.ResetAfter, algorithm.MaxDuration)
}

// replace puts alg in place of limit i's algorithm, keeping its quota's
// ID, so that each key's state is carried by the limit's rule on its next
// decision. It refuses an algorithm of another Kind than the one it
// replaces unless the limit starts keys afresh on a mismatch.
func (e *engine[K]) replace(i int, alg algorithm.Algorithm) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.cur.Load()
	if i < 0 || i >= len(old.stored) {
		return fmt.Errorf("%w: no limit %d among %d", ErrInvalidConfig, i, len(old.stored))
	}
	if err := checkAlgorithm(alg); err != nil {
		return err
	}
	if err := sameKind(old.stored[i], alg); err != nil {
		return fmt.Errorf("limit %d: %w", i, err)
	}
	stored := append([]store.Limit(nil), old.stored...)
	stored[i].Algorithm = alg
	spec := append([]Limit(nil), old.spec...)
	spec[i].Algorithm = alg
	ls, err := e.open(spec, stored)
	if err != nil {
		return err
	}
	e.cur.Store(ls)
	return nil
}

// checkAlgorithm returns an error wrapping ErrInvalidConfig for a nil
// algorithm (or an interface holding a nil pointer), or one that admits
// nothing (store.CheckAlgorithm).
func checkAlgorithm(alg algorithm.Algorithm) error {
	if nilness.Is(alg) {
		return fmt.Errorf("%w: nil algorithm", ErrInvalidConfig)
	}
	return store.CheckAlgorithm(alg)
}

// sameKind returns an error wrapping ErrInvalidConfig when alg cannot
// read the states l's algorithm writes: an algorithm of no registered
// Kind (no Tag) of another name, unless l starts such keys afresh. An
// algorithm of another Kind carries what they had used (algorithm.Carry).
func sameKind(l store.Limit, alg algorithm.Algorithm) error {
	if l.ResetOnMismatch || nilness.Is(alg) {
		return nil
	}
	was, okWas := algorithm.TagOf(l.Algorithm)
	now, okNow := algorithm.TagOf(alg)
	if okWas && okNow && was.Kind != 0 && now.Kind != 0 {
		return nil
	}
	if was.Kind != now.Kind || was.Kind == 0 && l.Algorithm.Spec().Name != alg.Spec().Name {
		return fmt.Errorf("%w: %v cannot read the states %v writes under its name (ResetOnMismatch starts them afresh)", ErrInvalidConfig, alg, l.Algorithm)
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

// endedError is the error of a caller whose context ended before the
// store answered: it is the caller's doing, not the store's. It matches
// the context's error (context.Canceled or context.DeadlineExceeded) and
// not ErrStoreUnavailable, whatever the store said, so that no failure
// policy decides it and the circuit breaker does not count it. What the
// request was charged depends on how far it got: nothing when the store
// was not called; when the call was in flight, what the store does with
// it (it goes on); when the store failed, what the store's error says.
type endedError struct {
	ctxErr   error // context.Canceled or context.DeadlineExceeded
	storeErr error // what the store said, if it answered
	inFlight bool  // the call was made and goes on
}

func (e *endedError) Error() string {
	var refused *refusedError
	if errors.As(e.storeErr, &refused) {
		return refused.Error()
	}
	switch {
	case e.storeErr != nil:
		return "ratelimit: the caller's context ended before the store answered (" + e.ctxErr.Error() + "); the store said: " + e.storeErr.Error()
	case e.inFlight:
		return "ratelimit: the caller's context ended while the store call was in flight (" + e.ctxErr.Error() + "); the call goes on, and may charge the request"
	}
	return "ratelimit: the caller's context had ended before the store was called (" + e.ctxErr.Error() + "); nothing was charged"
}

func (e *endedError) Unwrap() error { return e.ctxErr }

// Is reports whether target is ErrStoreUnavailable and the store said
// that it refuses connections (a refusedError): that is the store's
// failure, whenever the caller left.
func (e *endedError) Is(target error) bool {
	var refused *refusedError
	return target == ErrStoreUnavailable && errors.As(e.storeErr, &refused)
}

// refusedError is the error of a caller whose context ended while its
// call waited on a store that refuses connections (store.Refuser): the
// store's failure, not the caller's, so it matches ErrStoreUnavailable
// (through the refusal) as well as the context's error. A client library
// may retry a refused dial for longer than the caller waits (go-redis
// does, 5 times 100 ms apart by default); the call goes on meanwhile,
// and the circuit breaker counts its outcome. No failure policy decides
// it: the caller has gone.
type refusedError struct {
	ctxErr  error // context.Canceled or context.DeadlineExceeded
	refusal error // store.Refuser's, wrapping ErrStoreUnavailable
}

func (e *refusedError) Error() string {
	return e.refusal.Error() + " (the caller's context ended, " + e.ctxErr.Error() + ", while its call waited on a store that refuses connections)"
}

func (e *refusedError) Unwrap() []error { return []error{e.refusal, e.ctxErr} }

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
func (e *engine[K]) fail(ctx context.Context, ls *limits[K], err error, key K, cost int64, peek bool, out []algorithm.Result) (algorithm.Result, Source, error) {
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
			out[i] = algorithm.Fresh(ls.each[i])
		}
		return algorithm.Fresh(ls.limit), FromFailOpen, nil
	case FailClosed:
		closed := algorithm.Result{RetryAfter: failClosedRetryAfter.Microseconds()}
		for i := range out {
			out[i] = closed
		}
		return closed, FromFailClosed, nil
	}
	now := e.localAt.Now().UnixMicro()
	var r algorithm.Result
	if peek {
		r, err = ls.local.Peek(ctx, key, now, out)
	} else {
		r, err = ls.local.Take(ctx, key, now, cost, out)
	}
	if err != nil {
		return r, FromStore, err
	}
	return r, FromLocal, nil
}

// failed is the decision of a single limit whose store failed with err:
// the failure policy's, marked BreakerOpen when the breaker refused the
// call, or the error.
func (e *engine[K]) failed(ctx context.Context, ls *limits[K], err error, key K, cost int64, peek bool) (Decision, error) {
	open := errors.Is(err, ErrBreakerOpen)
	r, src, err := e.fail(ctx, ls, err, key, cost, peek, nil)
	if err != nil {
		return Decision{}, err
	}
	d := decidedBy(r, ls.limit, src)
	d.setBreakerOpen(open)
	return d, nil
}

// poll calls allow until the decision it returns admits the request,
// sleeping on the engine's clock for each denial's RetryAfter in between:
// WaitN for limits whose algorithms cannot book (not algorithm.Booker),
// which costs a store call per wake-up, and wakes waiters in no order.
func (e *engine[K]) poll(ctx context.Context, allow func() (Decision, error)) error {
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
	ls := e.cur.Load()
	if ls.local != nil {
		_ = ls.local.Reset(ctx, key) // the memory store cannot fail
	}
	return ls.table.Reset(ctx, key)
}
