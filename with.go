package ratelimit

import (
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

// With returns a Limiter like l deciding with alg, for limits given per call:
// under l's state ID if l has one (alg then of l's kind), else alg's default
// (or ErrStateInUse). Kept by alg, asking again allocates nothing.
func (l *Limiter[K]) With(alg algorithm.Algorithm) (*Limiter[K], error) {
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
	if !l.named {
		lim.ID = store.DefaultID(alg.Spec())
	} else if err := sameKind(lim, alg); err != nil {
		return nil, err
	}
	lim.Algorithm = alg
	own := l.own.with()
	if !l.named {
		own = heldBy(l.store, lim.ID, own)
	}
	made, err := claimStore(l.store, own, []store.Limit{lim}, []bool{!l.named})
	if err != nil {
		return nil, err
	}
	w := &Limiter[K]{engine: l.engine, named: l.named, with: l.with}
	w.own = own
	w.cur = new(atomic.Pointer[limits[K]]) // its own limits; changes of them are serialised with l's
	ls, err := w.open(nil, []store.Limit{lim})
	if err != nil {
		unclaimAll(own, made)
		return nil, err
	}
	w.cur.Store(ls)
	return w, nil
}
