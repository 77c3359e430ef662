package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/nilness"
	"github.com/go-ratelimit/ratelimit/store"
)

// Limit is one of a Policy's limits.
type Limit struct {
	// Name names the limit; its quota is the Policy's name (WithName), '/'
	// and Name. The default is "limit1", "limit2"… by position; no '/'.
	Name string
	// Algorithm decides for this limit.
	Algorithm algorithm.Algorithm
	// Inherit is the limit's WithInheritance.
	Inherit algorithm.Rule
	// ResetOnMismatch is the limit's WithResetOnMismatch.
	ResetOnMismatch bool
}

// PolicyDecision is the outcome of one call on a Policy.
type PolicyDecision struct {
	// Decision combines the limits': allowed only if every limit admits.
	Decision
	// Binding is the index of the limit that decided: the longest wait
	// when denied, the least left when admitted.
	Binding int

	n      int                    // limits
	inline [inlineLimits]Decision // their decisions, for up to inlineLimits
	spill  []Decision             // their decisions, for more
}

// inlineLimits is how many limits' decisions a PolicyDecision holds in
// itself, so that deciding a policy of up to that many limits allocates
// nothing; a policy of more allocates room for them on each decision.
const inlineLimits = 4

// Limits returns each limit's decision, in order, in d's own storage.
func (d *PolicyDecision) Limits() []Decision {
	if d.spill != nil {
		return d.spill
	}
	return d.inline[:d.n:d.n]
}

// DecisionOfOne returns a Limiter's decision as that of a policy of one limit.
func DecisionOfOne(d Decision) PolicyDecision {
	pd := PolicyDecision{Decision: d, n: 1}
	pd.inline[0] = d
	return pd
}

// Policy applies several limits to one key together: a request is charged to
// every limit or to none, atomically. It is safe for concurrent use.
type Policy[K comparable] struct {
	engine[K]
}

// NewPolicy returns a Policy of limits, whose state is kept in st under its name
// (WithName). Errors wrap ErrInvalidConfig, or are the store's.
func NewPolicy[K comparable](st store.Store[K], limits []Limit, opts ...Option) (*Policy[K], error) {
	if len(limits) == 0 {
		return nil, fmt.Errorf("%w: a policy needs at least one limit", ErrInvalidConfig)
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.inherit != nil || o.resetOnMismatch {
		return nil, fmt.Errorf("%w: WithInheritance and WithResetOnMismatch apply to a Limiter; a policy's limits say so in Limit.Inherit and Limit.ResetOnMismatch", ErrInvalidConfig)
	}
	if o.denialCache {
		// The limits that admit a denied request keep changing while
		// another denies it: a policy's denial is not frozen.
		return nil, fmt.Errorf("%w: WithDenialCache applies to a Limiter, not to a Policy", ErrInvalidConfig)
	}
	name, err := quotaID(st, &o, "a Policy")
	if err != nil {
		return nil, err
	}
	p := &Policy[K]{}
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
	if err := p.engine.init(st, spec, stored, o); err != nil {
		return nil, err
	}
	return p, nil
}

// Limits returns the policy's limits, with their names.
func (p *Policy[K]) Limits() []Limit { return append([]Limit(nil), p.cur.Load().spec...) }

// SetLimit makes alg decide for limit i, as Limiter.SetAlgorithm.
func (p *Policy[K]) SetLimit(i int, alg algorithm.Algorithm) error { return p.replace(i, alg) }

// Limit returns the largest cost one request may have, the least limit's.
func (p *Policy[K]) Limit() int64 { return p.cur.Load().limit }

// Quota returns limit i's quota, as Limiter.Quota.
func (p *Policy[K]) Quota(i int) algorithm.Quota { return quotaOf(p.cur.Load().spec[i].Algorithm) }

// Allow is shorthand for AllowN(ctx, key, 1).
func (p *Policy[K]) Allow(ctx context.Context, key K) (PolicyDecision, error) {
	return p.AllowN(ctx, key, 1)
}

// AllowN decides whether a request of cost n for key is admitted by every
// limit, as Limiter.AllowN.
func (p *Policy[K]) AllowN(ctx context.Context, key K, n int) (d PolicyDecision, err error) {
	// The hooks are dispatched here rather than through AllowNInto, which
	// would make AllowN small enough to be inlined: inlined, its result
	// was copied twice more in the caller (measured: 3 ns slower).
	if p.hooks.active() {
		err = p.allowNHooked(ctx, key, n, &d)
		return d, err
	}
	err = p.take(ctx, key, n, &d)
	return d, err
}

// AllowNInto is AllowN writing into d, whatever d held: a copy saved.
func (p *Policy[K]) AllowNInto(ctx context.Context, key K, n int, d *PolicyDecision) error {
	if p.hooks.active() {
		return p.allowNHooked(ctx, key, n, d)
	}
	return p.take(ctx, key, n, d)
}

// allowNHooked is take with the hooks applied around it.
func (p *Policy[K]) allowNHooked(ctx context.Context, key K, n int, d *PolicyDecision) error {
	start := p.hooks.begin(p.clock)
	err := p.take(ctx, key, n, d)
	p.end(ctx, OpAllow, key, int64(n), start, d, err)
	return err
}

// take is AllowNInto without the hooks.
func (p *Policy[K]) take(ctx context.Context, key K, n int, d *PolicyDecision) error {
	ls := p.cur.Load()
	if n < 1 || int64(n) > ls.limit {
		*d = PolicyDecision{}
		return algorithm.CheckCost(int64(n), ls.limit)
	}
	rs, buf := results(len(ls.each))
	defer release(buf)
	r, err := ls.table.Take(ctx, key, p.micros.UnixMicro(), int64(n), rs)
	if err != nil {
		return p.failed(ctx, ls, err, key, int64(n), false, rs, d)
	}
	d.set(r, rs, FromStore, ls.each)
	return nil
}

// failed makes d the failure policy's decision for key, whose store
// failed with err (peek selecting the local table's Peek), marked
// BreakerOpen when the breaker refused the call; or it zeroes d and
// returns the error. rs receives the limits' results. It is engine.failed
// for a policy.
func (p *Policy[K]) failed(ctx context.Context, ls *limits[K], err error, key K, cost int64, peek bool, rs []algorithm.Result, d *PolicyDecision) error {
	open := errors.Is(err, ErrBreakerOpen)
	r, src, err := p.fail(ctx, ls, err, key, cost, peek, rs)
	if err != nil {
		*d = PolicyDecision{}
		return err
	}
	d.set(r, rs, src, ls.each)
	d.setBreakerOpen(open)
	return nil
}

// Wait is shorthand for WaitN(ctx, key, 1).
func (p *Policy[K]) Wait(ctx context.Context, key K) (PolicyDecision, error) {
	return p.WaitN(ctx, key, 1)
}

// WaitN blocks until every limit admits n for key, as Limiter.WaitN.
func (p *Policy[K]) WaitN(ctx context.Context, key K, n int) (PolicyDecision, error) {
	if p.cur.Load().holds {
		r, err := p.waitHold(ctx, &p.hooks, key, n, func() (*Reservation[K], error) {
			return p.ReserveN(ctx, key, n, 0)
		})
		if err != nil {
			return PolicyDecision{}, err
		}
		return r.Admission(), nil
	}
	r, err := p.waitBooked(ctx, func(maxDelay time.Duration) (*Reservation[K], error) {
		return p.ReserveN(ctx, key, n, maxDelay)
	})
	if errors.Is(err, errCannotBook) {
		var d PolicyDecision
		err = p.poll(ctx, func() (Decision, error) {
			d, err = p.AllowN(ctx, key, n)
			return d.Decision, err
		})
		return d, err
	}
	if err != nil {
		if r != nil {
			return r.Limits(), err // when it would fit
		}
		return PolicyDecision{}, err
	}
	return r.Admission(), nil
}

// Peek reports key's state under every limit, as Limiter.Peek.
func (p *Policy[K]) Peek(ctx context.Context, key K) (d PolicyDecision, err error) {
	if p.hooks.active() {
		start := p.hooks.begin(p.clock)
		err = p.peek(ctx, key, &d)
		p.end(ctx, OpPeek, key, 1, start, &d, err)
		return d, err
	}
	err = p.peek(ctx, key, &d)
	return d, err
}

// end applies the policy's hooks to d: in dry-run mode a denial is
// admitted, every denying limit's decision marked DryRunDenied; the
// observer receives the policy's combined decision.
func (p *Policy[K]) end(ctx context.Context, op Op, key K, cost int64, start time.Time, d *PolicyDecision, err error) {
	end(ctx, &p.hooks, p.clock, op, key, cost, start, &d.Decision, err)
	if d.DryRunDenied() {
		limits := d.Limits()
		for i := range limits {
			limits[i] = limits[i].DryRun()
		}
	}
}

// peek is Peek without the hooks, filling in d as take does.
func (p *Policy[K]) peek(ctx context.Context, key K, d *PolicyDecision) error {
	ls := p.cur.Load()
	rs, buf := results(len(ls.each))
	defer release(buf)
	r, err := ls.table.Peek(ctx, key, p.micros.UnixMicro(), rs)
	if err != nil {
		return p.failed(ctx, ls, err, key, 1, true, rs, d)
	}
	d.set(r, rs, FromStore, ls.each)
	return nil
}

// Reset forgets key's state under every limit.
func (p *Policy[K]) Reset(ctx context.Context, key K) error { return p.reset(ctx, key) }

// resultBufs lends decisions room for their limits' results on the way
// back from the store. The results reach the store through an interface,
// so they cannot live on the caller's stack; set copies them into the
// decision at once, and the room goes back to the pool.
var resultBufs = sync.Pool{New: func() any { return new([inlineLimits]algorithm.Result) }}

// results returns room for one result per limit, and the pooled buffer it
// lies in (nil when the policy has more limits than a buffer holds), for
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

// set makes d the decision of r, the limits' results rs combined, each
// limit's Limit being in limits. It writes every field of d, which may
// hold an earlier decision (see AllowNInto).
func (d *PolicyDecision) set(r algorithm.Result, rs []algorithm.Result, src Source, limits []int64) {
	stale := min(d.n, inlineLimits) // inline decisions d holds from before
	d.Binding, d.n, d.spill = 0, len(rs), nil
	if len(rs) > inlineLimits {
		d.spill = make([]Decision, len(rs))
		clear(d.inline[:stale])
	} else if stale > len(rs) {
		clear(d.inline[len(rs):stale])
	}
	ds := d.Limits()
	for i, ri := range rs {
		ds[i] = decided(ri, limits[i], src)
		b := rs[d.Binding]
		denied := r.RetryAfter > 0
		if denied && ri.RetryAfter > b.RetryAfter ||
			!denied && (ri.Remaining < b.Remaining || ri.Remaining == b.Remaining && ri.ResetAfter > b.ResetAfter) {
			d.Binding = i
		}
	}
	d.Decision = decided(r, limits[d.Binding], src)
}
