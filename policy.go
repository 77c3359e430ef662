package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/nilness"
	"github.com/go-ratelimit/ratelimit/store"
)

// Limit is one of the limits of a Limiter built by NewPolicy.
type Limit struct {
	// Name's quota is the Limiter's name (WithName), '/' and Name; no '/'.
	// The default is "limit1", "limit2"… by position.
	Name            string
	Algorithm       algorithm.Algorithm // decides for this limit
	Inherit         algorithm.Rule      // the limit's WithInheritance
	ResetOnMismatch bool                // the limit's WithResetOnMismatch
}

// Policy is the name a Limiter of several limits went by.
type Policy[K comparable] = Limiter[K]

// PolicyDecision is the name a Decision of several limits went by.
type PolicyDecision = Decision

// NewPolicy returns a Limiter of several limits, charging each or none,
// atomically, on state in st under its name (WithName), as New.
func NewPolicy[K comparable](st store.Store[K], limits []Limit, opts ...Option) (*Limiter[K], error) {
	if len(limits) == 0 {
		return nil, fmt.Errorf("%w: a policy needs at least one limit", ErrInvalidConfig)
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.inherit != nil || o.resetOnMismatch {
		return nil, fmt.Errorf("%w: WithInheritance and WithResetOnMismatch apply to a Limiter of one limit; a policy's limits say so in Limit.Inherit and Limit.ResetOnMismatch", ErrInvalidConfig)
	}
	if o.denialCache {
		// The limits that admit a denied request keep changing while
		// another denies it: a policy's denial is not frozen.
		return nil, fmt.Errorf("%w: WithDenialCache applies to a Limiter of one limit, not to a policy", ErrInvalidConfig)
	}
	name, err := quotaID(st, &o, "a Policy")
	if err != nil {
		return nil, err
	}
	spec := make([]Limit, len(limits))
	stored := make([]store.Limit, len(limits))
	for i, l := range limits {
		if nilness.Is(l.Algorithm) {
			return nil, fmt.Errorf("%w: limit %d has a nil algorithm", ErrInvalidConfig, i)
		}
		if l.Name == "" {
			l.Name = fmt.Sprintf("limit%d", i+1)
		}
		id, err := limitID(name, i, l.Name)
		if err != nil {
			return nil, err
		}
		for _, prev := range spec[:i] {
			if prev.Name == l.Name {
				return nil, fmt.Errorf("%w: two limits named %q", ErrInvalidConfig, l.Name)
			}
		}
		spec[i] = l
		stored[i] = store.Limit{Algorithm: l.Algorithm, ID: id, Inherit: l.Inherit, ResetOnMismatch: l.ResetOnMismatch}
	}
	p := &Limiter[K]{with: newWiths[K]()}
	if err := p.engine.init(st, spec, stored, o); err != nil {
		return nil, err
	}
	p.many = true
	return p, nil
}

// allowNMany is AllowNInto for a Limiter of several limits.
func (l *Limiter[K]) allowNMany(ctx context.Context, key K, n int, d *Decision) error {
	if !l.hooks.active() {
		return l.takeMany(ctx, key, n, d)
	}
	start := l.hooks.begin(l.clock)
	err := l.takeMany(ctx, key, n, d)
	end(ctx, &l.hooks, l.clock, OpAllow, key, int64(n), start, d, err)
	return err
}

// takeMany is take for a Limiter of several limits, writing into d.
func (l *Limiter[K]) takeMany(ctx context.Context, key K, n int, d *Decision) error {
	ls := l.cur.Load()
	if n < 1 || int64(n) > ls.limit {
		*d = Decision{}
		return algorithm.CheckCost(int64(n), ls.limit)
	}
	rs, buf := results(len(ls.each))
	defer release(buf)
	r, err := ls.table.Take(ctx, key, l.micros.UnixMicro(), int64(n), rs)
	if err != nil {
		return l.failedMany(ctx, ls, err, key, int64(n), false, rs, d)
	}
	d.set(r, rs, FromStore, ls.each, ls.eachKinds)
	return nil
}

// peekMany is peek for a Limiter of several limits, filling in d as
// takeMany does.
func (l *Limiter[K]) peekMany(ctx context.Context, key K, d *Decision) error {
	ls := l.cur.Load()
	rs, buf := results(len(ls.each))
	defer release(buf)
	r, err := ls.table.Peek(ctx, key, l.micros.UnixMicro(), rs)
	if err != nil {
		return l.failedMany(ctx, ls, err, key, 1, true, rs, d)
	}
	d.set(r, rs, FromStore, ls.each, ls.eachKinds)
	return nil
}

// failedMany is engine.failed for several limits: it makes d the failure
// policy's decision for key, whose store failed with err (peek selecting
// the local table's Peek), marked BreakerOpen when the breaker refused the
// call; or it zeroes d and returns the error. rs receives the limits'
// results.
func (l *Limiter[K]) failedMany(ctx context.Context, ls *limits[K], err error, key K, cost int64, peek bool, rs []algorithm.Result, d *Decision) error {
	open := errors.Is(err, ErrBreakerOpen)
	r, src, err := l.fail(ctx, ls, err, key, cost, peek, rs)
	if err != nil {
		*d = Decision{}
		return err
	}
	d.set(r, rs, src, ls.each, ls.eachKinds)
	d.setBreakerOpen(open)
	return nil
}

// inlineLimits is how many limits' results a pooled buffer holds.
const inlineLimits = 4

// resultBufs lends decisions room for their limits' results on the way
// back from the store. The results reach the store through an interface,
// so they cannot live on the caller's stack; set copies them into the
// decision at once, and the room goes back to the pool.
var resultBufs = sync.Pool{New: func() any { return new([inlineLimits]algorithm.Result) }}

// results returns room for one result per limit, and the pooled buffer it
// lies in (nil when the Limiter has more limits than a buffer holds), for
// release.
func results(n int) ([]algorithm.Result, *[inlineLimits]algorithm.Result) {
	if n > inlineLimits {
		return make([]algorithm.Result, n), nil
	}
	buf := resultBufs.Get().(*[inlineLimits]algorithm.Result)
	return buf[:n:n], buf
}

// release returns buf, from results, to the pool.
func release(buf *[inlineLimits]algorithm.Result) {
	if buf != nil {
		resultBufs.Put(buf)
	}
}

// set makes d the decision of r, the limits' results rs combined, made by
// src: the binding limit's numbers, each limit's decision in its Limits,
// each limit's Limit being in each and its kinds by the store in
// eachKinds. It writes every field of d, which may hold an earlier
// decision of several limits: it then reuses its kind (see AllowNInto).
func (d *Decision) set(r algorithm.Result, rs []algorithm.Result, src Source, each []int64, eachKinds []kinds) {
	k := d.kind
	if k == nil || k.limits == nil || cap(*k.limits) < len(rs) {
		k = ownKind(len(rs))
	}
	ds := (*k.limits)[:len(rs):len(rs)]
	binding := 0
	denied := r.RetryAfter > 0
	for i, ri := range rs {
		ek := &eachKinds[i]
		if src != FromStore {
			bySrc := kindsOf(each[i], src)
			ek = &bySrc
		}
		ds[i] = decided(ri, ek)
		b := rs[binding]
		if denied && ri.RetryAfter > b.RetryAfter ||
			!denied && (ri.Remaining < b.Remaining || ri.Remaining == b.Remaining && ri.ResetAfter > b.ResetAfter) {
			binding = i
		}
	}
	var c Decision
	if src == FromStore {
		c = decided(r, &eachKinds[binding])
	} else {
		c = decidedBy(r, each[binding], src)
	}
	k.word, *k.limits = c.word()|uint64(binding)<<bindingShift, ds
	*d = Decision{remaining: c.remaining, retryAfter: c.retryAfter, resetAfter: c.resetAfter, kind: k}
}

// ownKind returns a kind of its own with room for n limits' decisions, up
// to inlineLimits of them in the same allocation.
func ownKind(n int) *kind {
	o := new(struct {
		k      kind
		ds     []Decision
		inline [inlineLimits]Decision
	})
	o.ds = o.inline[:]
	if n > inlineLimits {
		o.ds = make([]Decision, n)
	}
	o.k.limits = &o.ds
	return &o.k
}
