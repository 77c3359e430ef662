package ratelimit

import (
	"context"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// remoteTable calls a table whose calls wait on the network
// (store.Remote) under a context with the caller's values and none of its
// cancellation, so that no caller's deadline reaches the client library:
// one caller's short deadline once failed a dial that every caller
// waiting on that connection shared. A caller whose context can end
// waits for the call in a goroutine of the call's own, and stops waiting
// when its context ends, with an endedError; the call goes on to the
// store's answer, bounded by the store's own timeout, and charges what the
// store charges. The circuit breaker sits below, so it counts the store's
// own failures, never a caller's impatience.
//
// The calls in flight this way, those whose callers still wait and those
// whose callers have left, are at most maxRemoteCalls per Limiter or
// Policy (slots): without a bound, callers that leave at once and call
// again would pile calls on the store faster than it answers, until its
// own calls time out and the breaker opens for everyone. A caller waits
// for a slot under its own context, and leaves uncharged, the call not
// made, when its context ends first.
type remoteTable[K comparable] struct {
	next    store.Table[K]
	slots   chan struct{}
	timeout time.Duration // the table's CallTimeout: the deadline of each call
}

// maxRemoteCalls is how many calls a Limiter or Policy has in flight at
// once on a remote store for callers whose contexts can end: enough to
// keep a Redis busy (as 64 goroutines pipelining on rueidis do in the
// benchmarks), few enough that the calls of callers who left cannot pile
// up behind a slow server (256 did, on miniredis under load, until its
// own timeouts opened the breaker).
const maxRemoteCalls = 64

// pending is the outcome of a call in flight; the call's goroutine
// writes it, then closes done.
type pending struct {
	r     algorithm.Result
	rs    []algorithm.Result // the limits' results, when the caller asked
	bk    store.Booking
	ok    bool
	given int64 // an undo's
	err   error
	done  chan struct{}
}

// detached runs call under ctx without its cancellation, with the
// table's own deadline instead (CallTimeout), once it has a slot. It
// returns the call's outcome, or an endedError when ctx ends first (or
// had ended, or ends while waiting for a slot: the call is then not
// made). n is the length of the caller's out; the outcome's rs has that
// length.
func (t *remoteTable[K]) detached(ctx context.Context, n int, call func(context.Context, *pending)) (*pending, error) {
	if err := callerEnded(ctx); err != nil {
		return nil, &endedError{ctxErr: err}
	}
	select {
	case t.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, &endedError{ctxErr: ctx.Err()}
	}
	p := &pending{done: make(chan struct{})}
	if n > 0 {
		p.rs = make([]algorithm.Result, n)
	}
	base := context.WithoutCancel(ctx)
	go func() {
		defer func() { <-t.slots }()
		defer close(p.done)
		bounded, cancel := context.WithTimeout(base, t.timeout)
		defer cancel()
		call(bounded, p)
	}()
	select {
	case <-p.done:
		return p, nil
	case <-ctx.Done():
	}
	select {
	case <-p.done: // answered as the context ended: the answer counts
		return p, nil
	default:
		return nil, &endedError{ctxErr: ctx.Err(), inFlight: true}
	}
}

func (t *remoteTable[K]) Take(ctx context.Context, key K, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	if ctx.Done() == nil { // cannot end: nothing to detach from
		return t.next.Take(ctx, key, now, cost, out)
	}
	p, err := t.detached(ctx, len(out), func(ctx context.Context, p *pending) {
		p.r, p.err = t.next.Take(ctx, key, now, cost, p.rs)
	})
	if err != nil {
		return algorithm.Result{}, err
	}
	copy(out, p.rs)
	return p.r, p.err
}

func (t *remoteTable[K]) Peek(ctx context.Context, key K, now int64, out []algorithm.Result) (algorithm.Result, error) {
	if ctx.Done() == nil {
		return t.next.Peek(ctx, key, now, out)
	}
	p, err := t.detached(ctx, len(out), func(ctx context.Context, p *pending) {
		p.r, p.err = t.next.Peek(ctx, key, now, p.rs)
	})
	if err != nil {
		return algorithm.Result{}, err
	}
	copy(out, p.rs)
	return p.r, p.err
}

func (t *remoteTable[K]) Reset(ctx context.Context, key K) error {
	if ctx.Done() == nil {
		return t.next.Reset(ctx, key)
	}
	p, err := t.detached(ctx, 0, func(ctx context.Context, p *pending) {
		p.err = t.next.Reset(ctx, key)
	})
	if err != nil {
		return err
	}
	return p.err
}

// Book, Cancel, Undo and Refund detach the booking operations (store.Booker)
// as Take does.
func (t *remoteTable[K]) Book(ctx context.Context, key K, now, cost, maxDelay int64, out []algorithm.Result) (algorithm.Result, store.Booking, bool, error) {
	b, err := bookerOf(t.next)
	if err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	if ctx.Done() == nil {
		return b.Book(ctx, key, now, cost, maxDelay, out)
	}
	p, err := t.detached(ctx, len(out), func(ctx context.Context, p *pending) {
		p.r, p.bk, p.ok, p.err = b.Book(ctx, key, now, cost, maxDelay, p.rs)
	})
	if err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	copy(out, p.rs)
	return p.r, p.bk, p.ok, p.err
}

func (t *remoteTable[K]) Cancel(ctx context.Context, key K, now int64, bk store.Booking) error {
	b, err := bookerOf(t.next)
	if err != nil {
		return err
	}
	if ctx.Done() == nil {
		return b.Cancel(ctx, key, now, bk)
	}
	p, err := t.detached(ctx, 0, func(ctx context.Context, p *pending) {
		p.err = b.Cancel(ctx, key, now, bk)
	})
	if err != nil {
		return err
	}
	return p.err
}

func (t *remoteTable[K]) Undo(ctx context.Context, key K, now int64, bk store.Booking) (int64, error) {
	b, err := bookerOf(t.next)
	if err != nil {
		return 0, err
	}
	if ctx.Done() == nil {
		return b.Undo(ctx, key, now, bk)
	}
	p, err := t.detached(ctx, 0, func(ctx context.Context, p *pending) {
		p.given, p.err = b.Undo(ctx, key, now, bk)
	})
	if err != nil {
		return 0, err
	}
	return p.given, p.err
}

func (t *remoteTable[K]) Settle(ctx context.Context, key K, now int64, bk store.Booking, n int64) (store.Booking, error) {
	s, err := settlerOf(t.next)
	if err != nil {
		return bk, err
	}
	if ctx.Done() == nil {
		return s.Settle(ctx, key, now, bk, n)
	}
	p, err := t.detached(ctx, 0, func(ctx context.Context, p *pending) {
		p.bk, p.err = s.Settle(ctx, key, now, bk, n)
	})
	if err != nil {
		return bk, err
	}
	if p.err != nil {
		return bk, p.err
	}
	return p.bk, nil
}

func (t *remoteTable[K]) Refund(ctx context.Context, key K, now, n int64, out []algorithm.Result) (algorithm.Result, error) {
	b, err := bookerOf(t.next)
	if err != nil {
		return algorithm.Result{}, err
	}
	if ctx.Done() == nil {
		return b.Refund(ctx, key, now, n, out)
	}
	p, err := t.detached(ctx, len(out), func(ctx context.Context, p *pending) {
		p.r, p.err = b.Refund(ctx, key, now, n, p.rs)
	})
	if err != nil {
		return algorithm.Result{}, err
	}
	copy(out, p.rs)
	return p.r, p.err
}
