package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/nilness"
	"github.com/go-ratelimit/ratelimit/store"
)

var (
	// ErrInvalidConfig reports a configuration that cannot be used: a nil
	// algorithm or store, or an algorithm config out of range.
	ErrInvalidConfig = algorithm.ErrInvalidConfig

	// ErrInvalidCost reports a cost below 1. Nothing is consumed.
	ErrInvalidCost = algorithm.ErrInvalidCost

	// ErrCostExceedsLimit reports a cost the algorithm can never admit at
	// once. Nothing is consumed; Wait fails with it at once.
	ErrCostExceedsLimit = algorithm.ErrCostExceedsLimit

	// ErrWouldExceedDeadline reports a Wait that could not be admitted
	// before its context's deadline. The error also matches
	// context.DeadlineExceeded.
	ErrWouldExceedDeadline = errors.New("ratelimit: wait would exceed the context deadline")

	// ErrNotBooked reports a Reservation.Wait on a request that was not
	// booked (Reservation.OK is false): nothing was charged, and there is
	// nothing to wait for.
	ErrNotBooked = errors.New("ratelimit: the request was not booked")

	// ErrClockUnsupported reports a clock the store cannot use.
	ErrClockUnsupported = store.ErrClockUnsupported

	// ErrStoreUnavailable wraps errors of a store's backend.
	ErrStoreUnavailable = store.ErrUnavailable

	// ErrStoreFull reports a store out of room for a key's state (a memory
	// table at its cap that refuses new keys, a Redis out of memory). The
	// failure policy decides as for an outage, but the circuit breaker
	// does not count it.
	ErrStoreFull = store.ErrFull

	// ErrStateMismatch reports a key whose stored state was written by
	// another algorithm or in a format this version does not read (see
	// WithStateID): a configuration error, not an outage. No failure
	// policy decides it and the circuit breaker does not count it.
	ErrStateMismatch = store.ErrStateMismatch

	// ErrKeyTooLong reports a key longer than the store keeps. Nothing is
	// charged and no failure policy decides.
	ErrKeyTooLong = store.ErrKeyTooLong

	// ErrTooManyStates reports a key that holds the most states a store
	// keeps for one key (store.MaxStatesPerKey), one per state ID, to
	// which a decision would add another: limits given per call (With)
	// that change more often than the key's state expires. Nothing is
	// charged; as for ErrKeyTooLong, no failure policy decides it and the
	// circuit breaker does not count it.
	ErrTooManyStates = store.ErrTooManyStates
)

// Decision is the outcome of one call. It is a small value, read through
// its methods: four machine words, which Go passes and returns in
// registers, so that a decision costs its caller no copy through memory.
// The zero Decision denies, with a zero Limit, from the store.
type Decision struct {
	remaining  int64
	retryAfter time.Duration
	resetAfter time.Duration
	word       uint64 // the limit, the source and the flags: see the bits below
}

// The bits of Decision.word: the limit (at most algorithm.MaxLimit, 41
// bits) in the low bits, the source above it, and one bit per flag.
const (
	limitBits   = 41
	limitMask   = 1<<limitBits - 1
	sourceShift = 48
	allowedBit  = 1 << 63
	dryRunBit   = 1 << 62
	breakerBit  = 1 << 61
)

// Allowed reports whether the request was admitted (for Peek: whether a
// request of cost 1 would be).
func (d Decision) Allowed() bool { return d.word&allowedBit != 0 }

// Limit is the largest cost one request may have: the bucket's capacity
// or the window's limit.
func (d Decision) Limit() int64 { return int64(d.word & limitMask) }

// Remaining is how much cost could still be admitted now, after this
// decision, rounded down; 0 ≤ Remaining ≤ Limit.
func (d Decision) Remaining() int64 { return d.remaining }

// RetryAfter is how long until this same request would be admitted if
// nothing else happened in between; 0 when allowed.
func (d Decision) RetryAfter() time.Duration { return d.retryAfter }

// ResetAfter is how long until the key is back to a full, fresh state if
// nothing else happens; 0 when it already is.
func (d Decision) ResetAfter() time.Duration { return d.resetAfter }

// Source tells what made the decision: the store, or the failure policy
// when the store could not.
func (d Decision) Source() Source { return Source(d.word >> sourceShift) }

// DryRunDenied reports a request that the limit denied and that the
// limiter, in dry-run mode (WithDryRun), admitted anyway: Allowed is true,
// the other numbers are the denial's.
func (d Decision) DryRunDenied() bool { return d.word&dryRunBit != 0 }

// BreakerOpen reports that the store was not asked, because the circuit
// breaker (WithBreaker) was open: Source names the failure policy that
// decided instead.
func (d Decision) BreakerOpen() bool { return d.word&breakerBit != 0 }

// DryRun returns what a limiter in dry-run mode decides where it would
// have decided d: d itself when d admits; otherwise d admitted and marked
// DryRunDenied, with the denial's numbers. For middleware with a dry-run
// mode of its own.
func (d Decision) DryRun() Decision {
	if !d.Allowed() {
		d.word |= allowedBit | dryRunBit
	}
	return d
}

// String describes the decision, for logs and test failures.
func (d Decision) String() string {
	verdict := "denied"
	if d.Allowed() {
		verdict = "allowed"
	}
	s := fmt.Sprintf("%s: %d of %d remaining, retry after %v, reset after %v, from %v",
		verdict, d.remaining, d.Limit(), d.retryAfter, d.resetAfter, d.Source())
	if d.DryRunDenied() {
		s += ", denied in dry run"
	}
	if d.BreakerOpen() {
		s += ", breaker open"
	}
	return s
}

// DecisionFields is a Decision's content as a plain struct: for logs
// (%+v), for comparing decisions in tests, and for building the decisions
// a fake limiter returns.
type DecisionFields struct {
	Allowed      bool
	Limit        int64
	Remaining    int64
	RetryAfter   time.Duration
	ResetAfter   time.Duration
	Source       Source
	DryRunDenied bool
	BreakerOpen  bool
}

// Fields returns d's content as a plain struct.
func (d Decision) Fields() DecisionFields {
	return DecisionFields{Allowed: d.Allowed(), Limit: d.Limit(), Remaining: d.remaining,
		RetryAfter: d.retryAfter, ResetAfter: d.resetAfter, Source: d.Source(),
		DryRunDenied: d.DryRunDenied(), BreakerOpen: d.BreakerOpen()}
}

// Decision returns the Decision with f's content. A Limit outside 0 to
// algorithm.MaxLimit, the most a Decision holds, is clamped to it.
func (f DecisionFields) Decision() Decision {
	d := Decision{remaining: f.Remaining, retryAfter: f.RetryAfter, resetAfter: f.ResetAfter,
		word: uint64(min(max(f.Limit, 0), algorithm.MaxLimit)) | uint64(f.Source)<<sourceShift}
	if f.Allowed {
		d.word |= allowedBit
	}
	if f.DryRunDenied {
		d.word |= dryRunBit
	}
	if f.BreakerOpen {
		d.word |= breakerBit
	}
	return d
}

// MarshalJSON encodes d as its Fields, so that a decision logged as JSON
// shows what it holds.
func (d Decision) MarshalJSON() ([]byte, error) { return json.Marshal(d.Fields()) }

// UnmarshalJSON decodes what MarshalJSON encodes.
func (d *Decision) UnmarshalJSON(b []byte) error {
	var f DecisionFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*d = f.Decision()
	return nil
}

// Source tells what made a Decision.
type Source uint8

const (
	// FromStore: the Limiter's store decided. The zero value.
	FromStore Source = iota
	// FromFailOpen: the store failed and FailOpen admitted the request.
	FromFailOpen
	// FromFailClosed: the store failed and FailClosed denied the request.
	FromFailClosed
	// FromLocal: the store failed and FailLocal's in-memory limiter decided.
	FromLocal
)

// String returns the name of the source.
func (s Source) String() string {
	switch s {
	case FromStore:
		return "store"
	case FromFailOpen:
		return "fail-open"
	case FromFailClosed:
		return "fail-closed"
	case FromLocal:
		return "local"
	}
	return fmt.Sprintf("Source(%d)", uint8(s))
}

// FailurePolicy says what a Limiter decides when its store fails (an error
// wrapping ErrStoreUnavailable, or ErrStoreFull for a store out of room)
// while the caller's context is still live. A request whose context has
// ended (cancelled, or past its deadline) gets an error matching the
// context's error instead, whatever the policy and whatever error the
// client library reported: the caller has gone, and no policy may admit
// it uncharged or charge it elsewhere. Other errors (ErrKeyTooLong,
// ErrStateMismatch, a bad cost) are returned as they are.
type FailurePolicy uint8

const (
	// FailWithError returns the store's error. The default.
	FailWithError FailurePolicy = iota
	// FailOpen admits every request while the store fails.
	FailOpen
	// FailClosed denies every request while the store fails, with a
	// RetryAfter of FailClosedRetryAfter.
	FailClosed
	// FailLocal decides with an in-memory limiter of the same algorithm,
	// private to this process, while the store fails. Charges made locally
	// are not carried to the store when it recovers.
	FailLocal
)

// FailClosedRetryAfter is the RetryAfter of decisions made by FailClosed.
const FailClosedRetryAfter = time.Second

// decided returns r's decision under a limit of limit, made by src.
func decided(r algorithm.Result, limit int64, src Source) Decision {
	d := Decision{
		remaining:  r.Remaining,
		retryAfter: time.Duration(r.RetryAfter) * time.Microsecond,
		resetAfter: time.Duration(r.ResetAfter) * time.Microsecond,
		word:       uint64(limit) | uint64(src)<<sourceShift,
	}
	if r.RetryAfter == 0 {
		d.word |= allowedBit
	}
	return d
}

// setBreakerOpen marks d, a decision just made, BreakerOpen when open.
func (d *Decision) setBreakerOpen(open bool) {
	if open {
		d.word |= breakerBit
	}
}

// Option configures a Limiter or a Policy.
type Option interface{ apply(*options) }

type options struct {
	clock           clock.Clock
	policy          FailurePolicy
	onError         func(error)
	stateID         *string         // WithStateID's, nil when not given
	inherit         *algorithm.Rule // WithInheritance's, nil when not given
	resetOnMismatch bool            // WithResetOnMismatch was given
	hooks           hooks           // observer.go
	breaker         *Breaker        // WithBreaker; nil without
	denialCache     bool            // WithDenialCache was given,
	denials         int             // with this size
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithClock sets the clock decisions are made by. The default is
// clock.Local(). A nil clock is ignored.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(o *options) {
		if c != nil {
			o.clock = c
		}
	})
}

// WithFailurePolicy sets what the Limiter decides when its store fails.
// The default is FailWithError.
func WithFailurePolicy(p FailurePolicy) Option {
	return optionFunc(func(o *options) { o.policy = p })
}

// WithErrorHandler sets a function called with every store error that a
// failure policy other than FailWithError turned into a decision, so that
// it can be logged or counted, and with each warning the store gives when
// the Limiter is built (store.Warner: a Redis that may evict limiter
// state, say), which are otherwise logged with log/slog. It must be safe
// for concurrent use.
func WithErrorHandler(f func(error)) Option {
	return optionFunc(func(o *options) { o.onError = f })
}

// WithStateID names the state a Limiter keeps in a store: a key's state
// is named by (state ID, key) on every store, so Limiters and Policy
// limits with the same state ID on one store share each key's state (the
// Redis stores keep it in the field of that name of the key's hash, the
// memory store numbers it). By default it is store.DefaultID of the
// algorithm: a fingerprint of its name and parameters, so that limiters
// configured differently never read each other's state, and limiters
// configured alike in processes sharing a Redis share it; within one
// store value a second limiter with a default ID in use fails with
// ErrStateInUse. Give Limiters built apart one ID to share each key's
// state, IDs of their own to keep them apart, and an ID of your own to
// keep a key's state across a change of configuration (see
// WithInheritance). The empty ID is an ID
// like any other; it no longer names the Redis keys of releases before
// headers, which are never read (see README's migration notes). It is an
// error for a Policy, whose limits name their state in Limit.StateID.
func WithStateID(id string) Option {
	return optionFunc(func(o *options) { o.stateID = &id })
}

// WithInheritance sets how a key's state written by the same algorithm
// with other parameters is carried when this Limiter reads it: a limit
// changed on live keys, a process rebuilt with a new configuration under
// the same state ID (WithStateID), or two processes mid-deploy. The
// default, algorithm.AsIs, keeps what was used (clamped to the new
// limit); algorithm.Proportional keeps the fraction used. Under either,
// tightening never grants a fresh quota. Proportional is an error
// (ErrInvalidConfig) for the sliding log. For a Policy, set Limit.Inherit.
func WithInheritance(rule algorithm.Rule) Option {
	return optionFunc(func(o *options) { o.inherit = &rule })
}

// WithResetOnMismatch lets a limiter read a key whose state was written
// by another algorithm under the same state ID, instead of failing with
// ErrStateMismatch: for a deliberate switch of algorithm under a kept
// state ID. The key starts from what the old state had used at the
// decision's instant, as the new algorithm's fresh state charged with it
// (at most its limit; see algorithm.Used for how each algorithm's usage
// is read), so a switch never hands out a fresh quota; an unreadable
// value starts fresh. The old state is replaced when a request is
// admitted. For a Policy, set Limit.ResetOnMismatch.
func WithResetOnMismatch() Option {
	return optionFunc(func(o *options) { o.resetOnMismatch = true })
}

// Limiter limits the rate of requests per key of type K. It combines an
// algorithm, which decides, a store, which keeps each key's state, and a
// clock, read once per decision. Create it with [New]. A Limiter is safe
// for concurrent use.
//
// A Limiter is a [Policy] of one limit, with decisions that need no slice
// and allocate nothing.
type Limiter[K comparable] struct {
	engine[K]
	hooked *hooked[K] // the observer and dry run (observer.go); nil when unset
	with   *withs[K]  // the Limiters of With (with.go)
	hooks  hooks      // as given, for the Limiters of With
	named  bool       // the state ID was given (WithStateID)
}

// New returns a Limiter deciding with alg on state kept in st. It returns
// an error wrapping ErrInvalidConfig when alg or st is nil (or an
// interface holding a nil pointer), ErrStateInUse when another live
// Limiter or Policy on st has alg's default state ID, or the store's
// error when it cannot run alg with the chosen clock (ErrClockUnsupported).
func New[K comparable](alg algorithm.Algorithm, st store.Store[K], opts ...Option) (*Limiter[K], error) {
	if nilness.Is(alg) {
		return nil, fmt.Errorf("%w: nil algorithm", ErrInvalidConfig)
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	id := store.DefaultID(alg.Spec())
	if o.stateID != nil {
		id = *o.stateID
	}
	l := &Limiter[K]{named: o.stateID != nil, hooks: o.hooks, with: newWiths[K]()}
	lim := store.Limit{Algorithm: alg, ID: id, ResetOnMismatch: o.resetOnMismatch}
	if o.inherit != nil {
		lim.Inherit = *o.inherit
	}
	own := newOwner("a Limiter", o.hooks.name, 1)
	made, err := claimStore(st, own, []store.Limit{lim}, []bool{o.stateID == nil})
	if err != nil {
		return nil, err
	}
	if err := l.engine.init(st, nil, []store.Limit{lim}, o); err != nil {
		unclaimAll(own, made)
		return nil, err
	}
	l.own = own
	l.hooked = newHooked(l, o.hooks)
	return l, nil
}

// Limit returns the largest cost one request may have.
func (l *Limiter[K]) Limit() int64 { return l.cur.Load().limit }

// Name returns the name given with WithName, or "" when none was.
func (l *Limiter[K]) Name() string { return l.hooks.name }

// Algorithm returns the algorithm deciding now: the one given to New, or
// to SetAlgorithm since.
func (l *Limiter[K]) Algorithm() algorithm.Algorithm { return l.cur.Load().stored[0].Algorithm }

// StateID returns the ID naming the limiter's state in its store: the one
// given with WithStateID, or store.DefaultID of the algorithm it was built
// with. Limiters and Policy limits with the same state ID on one store
// share each key's state, on every store; SetAlgorithm keeps it.
func (l *Limiter[K]) StateID() string { return l.cur.Load().stored[0].ID }

// SetAlgorithm makes alg decide from now on, in place of the algorithm
// deciding now, keeping the limiter's state ID: every key's state is
// carried into alg's terms by the limiter's rule (WithInheritance) on its
// next decision, as when another process reads it with alg. Tightening
// never grants a fresh quota. It is safe to call while other goroutines
// decide: each decision uses the old algorithm or the new one, never a
// mix.
//
// It returns an error wrapping ErrInvalidConfig for a nil alg, for an
// algorithm of another kind (a token bucket in place of a sliding log:
// their states cannot be read as each other's) unless the limiter was
// built WithResetOnMismatch, or for a rule alg has not (a proportional
// sliding log); or the store's error opening it. A process restarted with
// another configuration gets another default state ID: name the state
// (WithStateID) to carry it across restarts too.
func (l *Limiter[K]) SetAlgorithm(alg algorithm.Algorithm) error { return l.replace(0, alg) }

// Window returns the period over which the limiter admits Limit: the window
// of a sliding log, sliding-window counter or fixed window, the time an
// empty token bucket takes to refill or a GCRA key to come back to rest.
// It is 0 for an algorithm that does not say (one with no Window method).
// HTTP headers advertise it as the policy's window.
func (l *Limiter[K]) Window() time.Duration { return windowOf(l.Algorithm()) }

// Quota returns the limit as its user configured it, Limit per Window:
// QuotaOf the limiter's algorithm.
func (l *Limiter[K]) Quota() algorithm.Quota { return QuotaOf(l.Algorithm()) }

// QuotaOf returns alg's quota as its user configured it when alg says
// (algorithm.Quoter), and otherwise its Limit per its Window (0 for an
// algorithm with no Window method).
func QuotaOf(alg algorithm.Algorithm) algorithm.Quota {
	if q, ok := alg.(algorithm.Quoter); ok {
		return q.Quota()
	}
	return algorithm.Quota{Limit: alg.Limit(), Window: windowOf(alg)}
}

// Allow is shorthand for AllowN(ctx, key, 1).
func (l *Limiter[K]) Allow(ctx context.Context, key K) (Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN decides whether a request of cost n for key is admitted now, and
// consumes n if it is. A cost below 1 or above Limit is an error
// (ErrInvalidCost, ErrCostExceedsLimit) that consumes nothing.
func (l *Limiter[K]) AllowN(ctx context.Context, key K, n int) (Decision, error) {
	if l.hooked != nil {
		return l.hooked.allowN(ctx, key, n)
	}
	ls := l.cur.Load()
	if n < 1 || int64(n) > ls.limit {
		return Decision{}, algorithm.CheckCost(int64(n), ls.limit)
	}
	r, err := ls.table.Take(ctx, key, l.micros.UnixMicro(), int64(n), nil)
	if err != nil {
		return l.failed(ctx, ls, err, key, int64(n), false)
	}
	return decided(r, ls.limit, FromStore), nil
}

// Wait is shorthand for WaitN(ctx, key, 1).
func (l *Limiter[K]) Wait(ctx context.Context, key K) (Decision, error) {
	return l.WaitN(ctx, key, 1)
}

// WaitN blocks until a request of cost n for key is admitted, then returns
// the admitting decision. It books the request (ReserveN, with the time
// left before ctx's deadline as the maximum delay) and sleeps on the
// limiter's clock until the booked instant: one store call per admission,
// and waiters are admitted in the order they booked, not in a scramble
// each time room frees up. It returns at once with ErrCostExceedsLimit for
// a cost that can never be admitted, and with ErrWouldExceedDeadline,
// charging nothing, when the request cannot be booked before ctx's
// deadline (with the denial, whose RetryAfter says when it would fit). When ctx ends first it gives the booking back (Cancel) and
// returns ctx's error.
func (l *Limiter[K]) WaitN(ctx context.Context, key K, n int) (Decision, error) {
	r, err := l.waitBooked(ctx, func(maxDelay time.Duration) (*Reservation[K], error) {
		return l.ReserveN(ctx, key, n, maxDelay)
	})
	if errors.Is(err, errCannotBook) {
		var d Decision
		err = l.poll(ctx, func() (Decision, error) {
			d, err = l.AllowN(ctx, key, n)
			return d, err
		})
		return d, err
	}
	if err != nil {
		if r != nil {
			return r.decision, err // when it would fit
		}
		return Decision{}, err
	}
	return admitted(r.decision), nil
}

// Peek reports key's state now without consuming anything: Allowed and
// RetryAfter are for a request of cost 1, Remaining is what is left.
func (l *Limiter[K]) Peek(ctx context.Context, key K) (Decision, error) {
	if l.hooked != nil {
		return l.hooked.peek(ctx, key)
	}
	ls := l.cur.Load()
	r, err := ls.table.Peek(ctx, key, l.micros.UnixMicro(), nil)
	if err != nil {
		return l.failed(ctx, ls, err, key, 1, true)
	}
	return decided(r, ls.limit, FromStore), nil
}

// Reset forgets key's state: its next request is decided as a new key's.
// With FailLocal, the local state is forgotten too; with WithDenialCache,
// the key's cached denial.
func (l *Limiter[K]) Reset(ctx context.Context, key K) error { return l.reset(ctx, key) }
