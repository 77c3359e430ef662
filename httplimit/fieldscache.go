package httplimit

import (
	"sync"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
)

// MaxCachedFields is how many limiters' and policies' fields a
// FieldsCache keeps. Past it the cache starts again empty: a resolver that
// builds limiters per request (Limiter.With past its own bound) costs a
// description now and then, not memory without end.
const MaxCachedFields = 4096

// FieldsCache keeps the fields of the limiters and policies a middleware
// or interceptor meets, each made once per configuration: a limit changed
// on a live limiter (ratelimit.Limiter.SetAlgorithm,
// ratelimit.Policy.SetLimit) gets fields of its own on its next request,
// so that headers advertise the limit in force. Its zero value is ready
// to use, and it is safe for concurrent use.
type FieldsCache[K comparable] struct {
	describe func(names []string, quotas []algorithm.Quota) *Fields // nil: newFields
	m        sync.Map                                               // *Limiter or *Policy → *cachedFields
	n        atomic.Int64
}

type cachedFields struct {
	quotas []algorithm.Quota // what f describes
	f      *Fields
}

// Limiter returns the fields of lim, under its name (ratelimit.WithName),
// or "default" when it has none; of a Limiter of several limits
// (ratelimit.NewPolicy), as Policy.
func (c *FieldsCache[K]) Limiter(lim *ratelimit.Limiter[K]) *Fields {
	if isPolicy(lim) {
		return c.Policy(lim)
	}
	q := algorithm.QuotaOf(lim.Limits()[0].Algorithm)
	if v, ok := c.m.Load(lim); ok {
		if cf := v.(*cachedFields); cf.quotas[0] == q {
			return cf.f
		}
	}
	return c.store(lim, []string{limiterName(lim)}, []algorithm.Quota{q}, algorithm.Holds(lim.Limits()[0].Algorithm))
}

// Policy returns the fields of p, under its limits' names.
func (c *FieldsCache[K]) Policy(p *ratelimit.Policy[K]) *Fields {
	if v, ok := c.m.Load(p); ok {
		cf := v.(*cachedFields)
		ls := p.Limits()
		same := true
		for i, q := range cf.quotas {
			same = same && algorithm.QuotaOf(ls[i].Algorithm) == q
		}
		if same {
			return cf.f
		}
	}
	names, quotas := policyQuotas(p)
	return c.store(p, names, quotas, policyHolds(p))
}

func (c *FieldsCache[K]) store(key any, names []string, quotas []algorithm.Quota, holds bool) *Fields {
	var f *Fields
	if c.describe != nil {
		f = c.describe(names, quotas)
	} else {
		f = newFields(names, quotas)
	}
	f.holds = holds
	if c.n.Add(1) > MaxCachedFields {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(key, &cachedFields{quotas: quotas, f: f})
	return f
}
