package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// Request is a cost of N for Key by Limiter (of one limit), for AllowAll.
type Request[K comparable] struct {
	Limiter  *Limiter[K] // decides; every request's on one store
	Key      K
	N        int      // the cost, 1 to Limiter.Limit()
	Decision Decision // set by AllowAll
}

// AllowAll charges every request of reqs (on one store) if each is admitted
// and returns true, else none, each Decision saying what AllowN would alone:
// one store call (store.Multi; one script per Redis node). Failures act as
// for AllowN; errors name a request's index, or are the store's.
func AllowAll[K comparable](ctx context.Context, reqs []Request[K]) (bool, error) {
	parts := make([]allPart[K], len(reqs))
	for i := range reqs {
		rq, p := &reqs[i], &parts[i]
		if rq.Limiter == nil {
			return false, fmt.Errorf("%w: request %d has no Limiter", ErrInvalidConfig, i)
		}
		l := rq.Limiter
		if l.many {
			return false, fmt.Errorf("%w: request %d has a Limiter of several limits (NewPolicy)", ErrInvalidConfig, i)
		}
		p.ls = l.cur.Load()
		if err := algorithm.CheckCost(int64(rq.N), p.ls.limit); err != nil {
			return false, fmt.Errorf("request %d: %w", i, err)
		}
		p.now = l.micros.UnixMicro()
		p.start = l.hooks.begin(l.clock)
		p.unwrap(p.ls.table)
	}
	err := allowAll(ctx, reqs, parts)
	ok := err == nil
	for i := range reqs {
		rq := &reqs[i]
		if h := &rq.Limiter.hooks; h.active() {
			end(ctx, h, rq.Limiter.clock, OpAllow, rq.Key, int64(rq.N), parts[i].start, &rq.Decision, err)
		}
		ok = ok && rq.Decision.Allowed()
	}
	return ok, err
}

// allPart is what AllowAll knows of one request: its Limiter's limits in
// force, the instant it read, and the wrappers in front of its table.
type allPart[K comparable] struct {
	ls      *limits[K]
	now     int64
	start   time.Time
	raw     store.Table[K] // the store's own table
	cache   *denialCache[K]
	breaker *breaker
	timeout time.Duration // the table's CallTimeout, when it is remote
}

// unwrap finds the store's table behind t and the wrappers in front of it
// (wrapping.wrap).
func (p *allPart[K]) unwrap(t store.Table[K]) {
	for {
		switch w := t.(type) {
		case *denialTable[K]:
			p.cache, t = w.cache, w.next
		case *remoteTable[K]:
			p.timeout, t = w.timeout, w.next
		case *breakerTable[K]:
			p.breaker, t = w.b, w.next
		default:
			p.raw = t
			return
		}
	}
}

// allowAll sets every request's Decision, or returns an error.
func allowAll[K comparable](ctx context.Context, reqs []Request[K], parts []allPart[K]) error {
	if len(reqs) == 0 {
		return nil
	}
	m, multi := parts[0].raw.(store.Multi[K])
	sreqs := make([]store.Request[K], len(reqs))
	for i := range reqs {
		sreqs[i] = store.Request[K]{Table: parts[i].raw, Key: reqs[i].Key, Now: parts[i].now, Cost: int64(reqs[i].N)}
	}
	if !multi {
		// Each in turn, through the Limiters' tables (their breakers and
		// caches), giving back on a denial.
		for i := range sreqs {
			sreqs[i].Table = parts[i].ls.table
		}
		_, err := store.TakeEach(ctx, sreqs)
		return decideAll(ctx, reqs, parts, sreqs, err)
	}
	if cached(reqs, parts) {
		return nil
	}
	// The breakers of the Limiters (one each) must all let the call go.
	for i := range parts {
		if b := parts[i].breaker; b != nil && !b.admit(parts[i].now) {
			return decideAll(ctx, reqs, parts, sreqs, ErrBreakerOpen)
		}
	}
	gens := make([]uint64, len(reqs))
	for i, p := range parts {
		if p.cache != nil {
			h := p.cache.hash.Sum(reqs[i].Key)
			gens[i] = p.cache.set(h).gen.Load()
		}
	}
	err := call(ctx, parts, func(ctx context.Context) error {
		_, err := m.TakeAll(ctx, sreqs)
		return err
	})
	for i, p := range parts {
		if p.breaker != nil {
			p.breaker.done(ctx, err, p.now, reqs[i].Limiter.micros)
		}
		if err == nil && p.cache != nil {
			h := p.cache.hash.Sum(reqs[i].Key)
			p.cache.settle(p.cache.set(h), h, reqs[i].Key, p.now, int64(reqs[i].N), sreqs[i].Result, gens[i])
		}
	}
	return decideAll(ctx, reqs, parts, sreqs, err)
}

// cached reports whether every request is one of cost 1 that its
// Limiter's denial cache denies, and if so sets their Decisions.
func cached[K comparable](reqs []Request[K], parts []allPart[K]) bool {
	for i, p := range parts {
		if p.cache == nil || reqs[i].N != 1 {
			return false
		}
		h := p.cache.hash.Sum(reqs[i].Key)
		if _, ok := p.cache.standing(p.cache.set(h), h, reqs[i].Key, p.now); !ok {
			return false
		}
	}
	for i, p := range parts {
		h := p.cache.hash.Sum(reqs[i].Key)
		r, _ := p.cache.standing(p.cache.set(h), h, reqs[i].Key, p.now)
		reqs[i].Decision = decided(r, &p.ls.oneKinds[0])
	}
	return true
}

// call runs f under a context that keeps ctx's values but none of its
// cancellation or deadline. A caller whose deadline is nearer than half
// the stores' call timeout waits only until it ends (the call goes on,
// and may charge); any other waits for the call, which the store bounds.
func call[K comparable](ctx context.Context, parts []allPart[K], f func(context.Context) error) error {
	if ctx.Done() == nil {
		return f(ctx) // cannot end: nothing to detach from
	}
	detached := context.WithoutCancel(ctx)
	timeout := time.Duration(0)
	for _, p := range parts {
		timeout = max(timeout, p.timeout)
	}
	deadline, ok := ctx.Deadline()
	if !ok || timeout == 0 || time.Until(deadline) >= timeout/2 {
		return f(detached) // as a Limiter's calls (deadline.go), at least half the timeout away
	}
	done := make(chan error, 1)
	go func() {
		bounded, cancel := context.WithTimeout(detached, timeout)
		defer cancel()
		done <- f(bounded)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return &endedError{ctxErr: ctx.Err(), inFlight: true}
	}
}

// decideAll sets every request's Decision from the store's results, or
// from its Limiter's failure policy when the store failed with err; other
// errors are returned.
func decideAll[K comparable](ctx context.Context, reqs []Request[K], parts []allPart[K], sreqs []store.Request[K], err error) error {
	if err == nil {
		for i, p := range parts {
			reqs[i].Decision = decided(sreqs[i].Result, &p.ls.oneKinds[0])
		}
		return nil
	}
	var ended *endedError
	if errors.As(err, &ended) || !storeFailed(err) {
		return err
	}
	open := errors.Is(err, ErrBreakerOpen)
	var errs []error
	for i := range reqs {
		l, p := reqs[i].Limiter, &parts[i]
		r, src, ferr := l.fail(ctx, p.ls, err, reqs[i].Key, int64(reqs[i].N), false, nil)
		if ferr != nil {
			errs = append(errs, ferr)
			continue
		}
		reqs[i].Decision = decidedBy(r, p.ls.limit, src)
		reqs[i].Decision.setBreakerOpen(open)
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}
