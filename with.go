package ratelimit

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// maxWithLimiters is how many Limiters of With a Limiter keeps for reuse.
const maxWithLimiters = 4096

// withs keeps the Limiters of With by algorithm: the interface value, so
// that finding one needs no Spec and allocates nothing.
type withs[K comparable] struct {
	m  sync.Map // algorithm.Algorithm → *Limiter[K]
	n  atomic.Int64
	mu sync.Mutex // serialises opening and dropping
}

func newWiths[K comparable]() *withs[K] { return new(withs[K]) }

// With returns a Limiter like l (of one limit) deciding with alg under l's
// quota, for limits given per call; asking again allocates nothing.
func (l *Limiter[K]) With(alg algorithm.Algorithm) (*Limiter[K], error) {
	if l.many {
		return nil, fmt.Errorf("%w: With applies to a Limiter of one limit, not to one of NewPolicy", ErrInvalidConfig)
	}
	if err := checkAlgorithm(alg); err != nil {
		return nil, err
	}
	if !reflect.TypeOf(alg).Comparable() {
		return l.openWith(alg) // not a map key: opened each time
	}
	if w, ok := l.with.m.Load(alg); ok {
		return w.(*Limiter[K]), nil
	}
	ws := l.with
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w, ok := ws.m.Load(alg); ok {
		return w.(*Limiter[K]), nil
	}
	w, err := l.openWith(alg)
	if err != nil {
		return nil, err
	}
	if ws.n.Load() >= maxWithLimiters {
		ws.m.Range(func(k, _ any) bool { // in map order: one at random
			ws.m.Delete(k)
			return false
		})
	} else {
		ws.n.Add(1)
	}
	ws.m.Store(alg, w)
	return w, nil
}

// openWith opens a Limiter of With for alg, which is not nil.
func (l *Limiter[K]) openWith(alg algorithm.Algorithm) (*Limiter[K], error) {
	lim := l.cur.Load().stored[0]
	if err := sameKind(lim, alg); err != nil {
		return nil, err
	}
	lim.Algorithm = alg
	w := &Limiter[K]{engine: l.engine, with: l.with}
	w.cur = new(atomic.Pointer[limits[K]]) // its own limits; changes of them are serialised with l's
	ls, err := w.open(nil, []store.Limit{lim})
	if err != nil {
		return nil, err
	}
	w.cur.Store(ls)
	return w, nil
}
