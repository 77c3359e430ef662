package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/nilness"
	"github.com/go-ratelimit/ratelimit/store"
)

var (
	ErrInvalidConfig    = algorithm.ErrInvalidConfig    // a configuration that cannot be used
	ErrInvalidCost      = algorithm.ErrInvalidCost      // a cost below 1; nothing is charged
	ErrCostExceedsLimit = algorithm.ErrCostExceedsLimit // a cost above Limit; nothing is charged
	ErrClockUnsupported = store.ErrClockUnsupported     // a clock the store cannot use
	ErrStoreUnavailable = store.ErrUnavailable          // wraps the errors of a store's backend
	ErrStoreFull        = store.ErrFull                 // a store out of room for a key's state
	ErrStateMismatch    = store.ErrStateMismatch        // a state of another algorithm or format
	ErrKeyTooLong       = store.ErrKeyTooLong           // a key longer than the store keeps
	ErrTooManyStates    = store.ErrTooManyStates        // a key with store.MaxStatesPerKey states

	// ErrWouldExceedDeadline reports a Wait past ctx's deadline (DeadlineExceeded).
	ErrWouldExceedDeadline = errors.New("ratelimit: wait would exceed the context deadline")
	// ErrNotBooked reports Reservation.Wait on a request not booked.
	ErrNotBooked = errors.New("ratelimit: the request was not booked")
	// ErrBreakerOpen reports a call an open breaker kept away (ErrStoreUnavailable).
	ErrBreakerOpen = fmt.Errorf("ratelimit: circuit breaker open, the store was not asked: %w", store.ErrUnavailable)
)

// Decision is the outcome of one call; the zero Decision denies. Of several
// limits, it admits if each does; its numbers are the binding limit's.
type Decision struct {
	remaining  int64
	retryAfter time.Duration
	resetAfter time.Duration
	kind       *kind // the limit, binding, source and flags; nil in the zero Decision
}

// kind is what a Decision holds beside its numbers, out of line so that a
// Decision stays four words, which Go keeps in registers (a fifth field
// costs a decision about 60 instructions: TestDecisionFitsInRegisters).
// A Decision of one limit points to a kind interned by word, shared and
// never changed, so that equal decisions compare equal; one of several
// limits to a kind of its own, holding their decisions.
type kind struct {
	word   uint64      // the limit, the binding limit, the source and the flags: see the bits below
	limits *[]Decision // each limit's decision, for a Limiter of several limits; nil for one
}

// The bits of kind.word: the limit (at most algorithm.MaxLimit, 41 bits)
// in the low bits, the binding limit's index above it (below
// store.MaxStatesPerKey), the source above that, and one bit per flag.
const (
	limitBits    = 41
	limitMask    = 1<<limitBits - 1
	bindingShift = limitBits
	bindingMask  = 1<<10 - 1
	sourceShift  = bindingShift + 10
	allowedBit   = 1 << 63
	dryRunBit    = 1 << 62
	breakerBit   = 1 << 61
)

// interned holds the kinds of decisions of one limit by word, at most
// maxInterned of them: past it, decisions of yet other limits get kinds of
// their own, equal in content but not under ==. Decisions find their
// kinds in their Limiter's configuration (kindsOf when it is opened); the
// map is read off the hot path alone.
var interned struct {
	sync.RWMutex
	m map[uint64]*[2]kind // by word without allowedBit: denied, allowed
}

const maxInterned = 1 << 16

// kindOf returns the interned kind of word, nil for 0 (the zero Decision's).
func kindOf(word uint64) *kind {
	if word == 0 {
		return nil
	}
	key, allowed := word&^allowedBit, word>>63
	interned.RLock()
	pair, ok := interned.m[key]
	interned.RUnlock()
	if ok {
		return &pair[allowed]
	}
	interned.Lock()
	defer interned.Unlock()
	if pair, ok := interned.m[key]; ok {
		return &pair[allowed]
	}
	pair = &[2]kind{{word: key}, {word: key | allowedBit}}
	if interned.m == nil {
		interned.m = make(map[uint64]*[2]kind)
	}
	if len(interned.m) < maxInterned {
		interned.m[key] = pair
	}
	return &pair[allowed]
}

// word returns d's kind's word, 0 for none.
func (d Decision) word() uint64 {
	if d.kind == nil {
		return 0
	}
	return d.kind.word
}

// withWord returns d with the word w: a decision of several limits in its
// own kind, which its copies share (for the engine's decision just made);
// one of one limit with the interned kind.
func (d Decision) withWord(w uint64) Decision {
	if d.kind != nil && d.kind.limits != nil {
		d.kind.word = w
		return d
	}
	d.kind = kindOf(w)
	return d
}

// booked returns d, a booking's decision, marked admitted for the event of
// an operation on the booking, leaving d's kind as it is.
func (d Decision) booked() Decision {
	w := d.word() | allowedBit
	if d.kind != nil && d.kind.limits != nil {
		d.kind = &kind{word: w, limits: d.kind.limits}
		return d
	}
	d.kind = kindOf(w)
	return d
}

// kinds are the kinds of one limit's decisions by one source: denied and
// allowed.
type kinds [2]*kind

// kindsOf returns the kinds of decisions under a limit of limit, made by src.
func kindsOf(limit int64, src Source) kinds {
	w := uint64(limit) | uint64(src)<<sourceShift
	return kinds{kindOf(w), kindOf(w | allowedBit)}
}

// Allowed reports whether the request was admitted (for Peek: would be).
func (d Decision) Allowed() bool { return d.word()&allowedBit != 0 }

// Limit is the largest cost one request may have.
func (d Decision) Limit() int64 { return int64(d.word() & limitMask) }

// Remaining is how much cost could still be admitted now, at most Limit.
func (d Decision) Remaining() int64 { return d.remaining }

// RetryAfter is how long until this request would be admitted; 0 when allowed.
func (d Decision) RetryAfter() time.Duration { return d.retryAfter }

// ResetAfter is how long until the key is fresh again if nothing else happens.
func (d Decision) ResetAfter() time.Duration { return d.resetAfter }

// Source tells whether the store decided or a failure policy did.
func (d Decision) Source() Source { return Source(d.word() >> sourceShift) }

// DryRunDenied reports a denial that dry-run mode (WithDryRun) admitted.
func (d Decision) DryRunDenied() bool { return d.word()&dryRunBit != 0 }

// BreakerOpen reports that an open breaker (WithBreaker) kept the call away.
func (d Decision) BreakerOpen() bool { return d.word()&breakerBit != 0 }

// Limits returns each limit's decision, in d's storage; nil for one limit.
func (d Decision) Limits() []Decision {
	if d.kind == nil || d.kind.limits == nil {
		return nil
	}
	return *d.kind.limits
}

// Binding is the index in Limits of the limit that decided; 0 for one limit.
func (d Decision) Binding() int { return int(d.word() >> bindingShift & bindingMask) }

// DryRun returns d as WithDryRun would, for middleware; d is unchanged.
func (d Decision) DryRun() Decision {
	if d.Allowed() {
		return d
	}
	w := d.word() | allowedBit | dryRunBit
	if d.kind == nil || d.kind.limits == nil {
		d.kind = kindOf(w)
		return d
	}
	ls := make([]Decision, len(*d.kind.limits))
	for i, l := range *d.kind.limits {
		ls[i] = l.DryRun()
	}
	d.kind = &kind{word: w, limits: &ls}
	return d
}

// markDryRun is DryRun of the engine's own decision, just made: in its
// storage, allocating nothing.
func (d *Decision) markDryRun() {
	if d.Allowed() {
		return
	}
	*d = d.withWord(d.word() | allowedBit | dryRunBit)
	if d.kind.limits != nil {
		ls := *d.kind.limits
		for i, l := range ls {
			ls[i] = l.DryRun() // of one limit: an interned kind
		}
	}
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

// DecisionFields is a Decision's content, but Limits, as a plain struct.
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

// Decision returns the Decision with f's content, its Limit clamped.
func (f DecisionFields) Decision() Decision {
	w := uint64(min(max(f.Limit, 0), algorithm.MaxLimit)) | uint64(f.Source)<<sourceShift
	if f.Allowed {
		w |= allowedBit
	}
	if f.DryRunDenied {
		w |= dryRunBit
	}
	if f.BreakerOpen {
		w |= breakerBit
	}
	return Decision{remaining: f.Remaining, retryAfter: f.RetryAfter, resetAfter: f.ResetAfter, kind: kindOf(w)}
}

// MarshalJSON encodes d as its Fields.
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
	FromStore      Source = iota // the Limiter's store decided; the zero value
	FromFailOpen                 // FailOpen admitted the request
	FromFailClosed               // FailClosed denied the request
	FromLocal                    // FailLocal's in-memory limiter decided
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

// FailurePolicy says what a Limiter decides while its store fails.
type FailurePolicy uint8

const (
	FailWithError FailurePolicy = iota // return the store's error; the default
	FailOpen                           // admit every request
	FailClosed                         // deny, with a RetryAfter of one second
	FailLocal                          // decide with a limiter in this process's memory alone
)

// failClosedRetryAfter is the RetryAfter of decisions made by FailClosed.
const failClosedRetryAfter = time.Second

// decided returns r's decision of kinds k (kindsOf).
func decided(r algorithm.Result, k *kinds) Decision {
	d := Decision{
		remaining:  r.Remaining,
		retryAfter: time.Duration(r.RetryAfter) * time.Microsecond,
		resetAfter: time.Duration(r.ResetAfter) * time.Microsecond,
		kind:       k[0],
	}
	if r.RetryAfter == 0 {
		d.kind = k[1]
	}
	return d
}

// decidedBy returns r's decision under a limit of limit, made by src: decided
// off the hot path.
func decidedBy(r algorithm.Result, limit int64, src Source) Decision {
	var k kinds
	w := uint64(limit) | uint64(src)<<sourceShift
	if r.RetryAfter == 0 {
		k[1] = kindOf(w | allowedBit)
	} else {
		k[0] = kindOf(w)
	}
	return decided(r, &k)
}

// setBreakerOpen marks d, a decision just made, BreakerOpen when open.
func (d *Decision) setBreakerOpen(open bool) {
	if open {
		*d = d.withWord(d.word() | breakerBit)
	}
}

// Option configures a Limiter.
type Option interface{ apply(*options) }

type options struct {
	clock           clock.Clock
	policy          FailurePolicy
	onError         func(error)
	named           bool            // WithName was given: hooks.name is the quota's name
	inherit         *algorithm.Rule // WithInheritance's, nil when not given
	resetOnMismatch bool            // WithResetOnMismatch was given
	hooks           hooks           // observer.go
	breaker         *Breaker        // WithBreaker; nil without
	denialCache     bool            // WithDenialCache was given,
	denials         int             // with this size
	bookAhead       *time.Duration  // WithMaxBookAhead's, nil when not given
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithClock sets the clock decisions are made by (clock.Local(); nil: kept).
func WithClock(c clock.Clock) Option {
	return optionFunc(func(o *options) {
		if c != nil {
			o.clock = c
		}
	})
}

// WithFailurePolicy sets what the Limiter decides when its store fails.
func WithFailurePolicy(p FailurePolicy) Option {
	return optionFunc(func(o *options) { o.policy = p })
}

// WithErrorHandler calls f, concurrently, with each store error a failure
// policy absorbed and each warning of the store.
func WithErrorHandler(f func(error)) Option {
	return optionFunc(func(o *options) { o.onError = f })
}

// WithName names a Limiter's quota (a NewPolicy limit's: name/Limit.Name):
// limits of one name on one store backend share each key's usage, across
// processes and changes of numbers. Unnamed, a Limiter is its own quota on
// a store.Local and refused elsewhere. A name is 1 to 256 bytes of UTF-8,
// no control characters.
func WithName(name string) Option {
	return optionFunc(func(o *options) { o.hooks.name, o.named = name, true })
}

// WithMaxBookAhead bounds how far ahead ReserveN and WaitN book; by default
// the limits' reset period, at least a minute; negative: no bound.
func WithMaxBookAhead(d time.Duration) Option {
	return optionFunc(func(o *options) { o.bookAhead = &d })
}

// WithInheritance sets how state written under other numbers carries over.
func WithInheritance(rule algorithm.Rule) Option {
	return optionFunc(func(o *options) { o.inherit = &rule })
}

// WithResetOnMismatch starts afresh a state no algorithm reads (else
// ErrStateMismatch).
func WithResetOnMismatch() Option {
	return optionFunc(func(o *options) { o.resetOnMismatch = true })
}

// Limiter limits requests per key of type K under one limit (New) or several
// charged all or none (NewPolicy). It is safe for concurrent use.
type Limiter[K comparable] struct {
	engine[K]
	with *withs[K] // the Limiters of With (with.go)
}

// New returns a Limiter deciding with alg on state kept in st, under its name
// (WithName). Errors wrap ErrInvalidConfig, or are the store's.
func New[K comparable](alg algorithm.Algorithm, st store.Store[K], opts ...Option) (*Limiter[K], error) {
	if nilness.Is(alg) {
		return nil, fmt.Errorf("%w: nil algorithm", ErrInvalidConfig)
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	id, err := quotaID(st, &o, "a Limiter")
	if err != nil {
		return nil, err
	}
	l := &Limiter[K]{with: newWiths[K]()}
	lim := store.Limit{Algorithm: alg, ID: id, ResetOnMismatch: o.resetOnMismatch}
	if o.inherit != nil {
		lim.Inherit = *o.inherit
	}
	if err := l.engine.init(st, nil, []store.Limit{lim}, o); err != nil {
		return nil, err
	}
	return l, nil
}

// Limit returns the largest cost one request may have, the least limit's.
func (l *Limiter[K]) Limit() int64 { return l.cur.Load().limit }

// Name returns the name of the Limiter's quota (WithName), or "" when unnamed.
func (l *Limiter[K]) Name() string { return l.hooks.name }

// Limits returns the limits deciding now (New's: one, unnamed); do not modify.
func (l *Limiter[K]) Limits() []Limit { return l.cur.Load().spec }

// SetAlgorithm is SetLimit(0, alg).
func (l *Limiter[K]) SetAlgorithm(alg algorithm.Algorithm) error { return l.replace(0, alg) }

// SetLimit makes alg decide limit i under the same quota, each key's state
// carried by its rule (WithInheritance). Errors: ErrInvalidConfig, the store's.
func (l *Limiter[K]) SetLimit(i int, alg algorithm.Algorithm) error { return l.replace(i, alg) }

// Allow is shorthand for AllowN(ctx, key, 1).
func (l *Limiter[K]) Allow(ctx context.Context, key K) (Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN admits a request of cost n (1 to Limit) for key now and charges it,
// or denies it and charges nothing. To refund later, use ReserveN(…, 0).
func (l *Limiter[K]) AllowN(ctx context.Context, key K, n int) (Decision, error) {
	if l.many || l.hooks.active() {
		return l.allowNSlow(ctx, key, n)
	}
	return l.take(ctx, key, n)
}

// AllowNInto is AllowN into d, reusing (so sharing) d's Limits: no allocation.
func (l *Limiter[K]) AllowNInto(ctx context.Context, key K, n int, d *Decision) error {
	if l.many {
		return l.allowNMany(ctx, key, n, d)
	}
	var err error
	*d, err = l.AllowN(ctx, key, n)
	return err
}

// allowNSlow is AllowN of several limits, or with the hooks applied
// around take.
func (l *Limiter[K]) allowNSlow(ctx context.Context, key K, n int) (d Decision, err error) {
	if l.many {
		err = l.allowNMany(ctx, key, n, &d)
		return d, err
	}
	start := l.hooks.begin(l.clock)
	d, err = l.take(ctx, key, n)
	end(ctx, &l.hooks, l.clock, OpAllow, key, int64(n), start, &d, err)
	return d, err
}

// take is AllowN without the hooks, for one limit.
func (l *Limiter[K]) take(ctx context.Context, key K, n int) (Decision, error) {
	ls := l.cur.Load()
	if n < 1 || int64(n) > ls.limit {
		return Decision{}, algorithm.CheckCost(int64(n), ls.limit)
	}
	r, err := ls.table.Take(ctx, key, l.micros.UnixMicro(), int64(n), nil)
	if err != nil {
		return l.failed(ctx, ls, err, key, int64(n), false)
	}
	return decided(r, &ls.oneKinds[0]), nil
}

// Wait is shorthand for WaitN(ctx, key, 1).
func (l *Limiter[K]) Wait(ctx context.Context, key K) (Decision, error) {
	return l.WaitN(ctx, key, 1)
}

// WaitN books n for key (ReserveN) and sleeps until due; it fails at once,
// uncharged, if ctx's deadline is too near, and cancels if ctx ends first.
func (l *Limiter[K]) WaitN(ctx context.Context, key K, n int) (Decision, error) {
	if l.cur.Load().holds {
		r, err := l.waitHold(ctx, &l.hooks, key, n, func() (*Reservation[K], error) {
			return l.ReserveN(ctx, key, n, 0)
		})
		if err != nil {
			return Decision{}, err
		}
		return r.admission, nil
	}
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
	return r.admission, nil
}

// Peek reports key's state now, for a cost of 1, without charging anything.
func (l *Limiter[K]) Peek(ctx context.Context, key K) (d Decision, err error) {
	if !l.hooks.active() {
		return l.peek(ctx, key)
	}
	start := l.hooks.begin(l.clock)
	d, err = l.peek(ctx, key)
	end(ctx, &l.hooks, l.clock, OpPeek, key, 1, start, &d, err)
	return d, err
}

// peek is Peek without the hooks.
func (l *Limiter[K]) peek(ctx context.Context, key K) (d Decision, err error) {
	if l.many {
		err = l.peekMany(ctx, key, &d)
		return d, err
	}
	ls := l.cur.Load()
	r, err := ls.table.Peek(ctx, key, l.micros.UnixMicro(), nil)
	if err != nil {
		return l.failed(ctx, ls, err, key, 1, true)
	}
	return decided(r, &ls.oneKinds[0]), nil
}

// Reset forgets key's state, its denial cache entry and its FailLocal state.
func (l *Limiter[K]) Reset(ctx context.Context, key K) error { return l.reset(ctx, key) }
