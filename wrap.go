package ratelimit

import (
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// wrapTable puts the tables the options ask for in front of the store's:
// the denial cache first, since its answers need no store, then the
// circuit breaker, which guards the store's. micros is the Limiter's clock.
func wrapTable[K comparable](t store.Table[K], o *options, micros clock.Micros) (store.Table[K], error) {
	if o.breaker != nil {
		b, err := o.breaker.check()
		if err != nil {
			return nil, err
		}
		t = &breakerTable[K]{next: t, b: newBreaker(b), micros: micros}
	}
	if o.denialCache {
		c, err := newDenialCache[K](o.denials)
		if err != nil {
			return nil, err
		}
		t = &denialTable[K]{next: t, cache: c}
	}
	return t, nil
}
