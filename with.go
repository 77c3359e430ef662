package ratelimit

import (
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// MaxWithLimiters is how many Limiters of With a Limiter keeps for reuse.
// Past it, a new algorithm drops one kept at random: a limit asked again
// after that is opened anew (about a microsecond and a few allocations),
// with the same state, since the state is named by its ID, not by the
// Limiter.
const MaxWithLimiters = 4096

// withs keeps the Limiters of With by algorithm: the interface value, so
// that finding one needs no Spec and allocates nothing.
type withs[K comparable] struct {
	m  sync.Map // algorithm.Algorithm → *Limiter[K]
	n  atomic.Int64
	mu sync.Mutex // serialises opening and dropping
}

func newWiths[K comparable]() *withs[K] { return new(withs[K]) }

// With returns a Limiter deciding with alg in place of l's algorithm, on
// l's store, with l's clock, failure policy, circuit breaker (one for the
// store), observer, dry run and rule: for limits given per call or per
// key, such as a limit per customer read from a database.
//
// Its state ID is the one l was given with WithStateID, when it was: then
// every algorithm l is given With shares each key's state with l and
// with each other, converting it by l's rule (WithInheritance) when the
// key's limit changes, as SetAlgorithm does; alg must be of the same kind
// as l's (or l built WithResetOnMismatch). Otherwise it is
// store.DefaultID(alg.Spec()): keys decided with equal limits share
// state, keys decided with other limits do not; a limit that another
// Limiter or Policy built apart from l uses by default is refused with
// ErrStateInUse, as New refuses it.
//
// The Limiter is kept, by alg: asking again with the same algorithm value
// returns it, allocating nothing, so hold on to one algorithm per limit
// (a map from plan to algorithm, say) rather than building one per call.
// At most MaxWithLimiters are kept. Each has a denial cache of its own
// when l has one (WithDenialCache: maxKeys·8 bytes each, since a denial
// holds only for the limit that made it): size it for that. A Limiter built anew for the same
// limit decides exactly as the kept one. It returns an error wrapping
// ErrInvalidConfig for a nil alg, ErrStateInUse, or the store's error
// opening it.
//
// What limits given per call keep is bounded, whoever picks them: a key
// holds at most store.MaxStatesPerKey states, one per state ID (here, per
// distinct limit unless l has a state ID), and a decision that would add
// one more fails with ErrTooManyStates; the memory store keeps the
// numbers of IDs and configurations only while a state or an open
// Limiter uses them.
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
	if ws.n.Load() >= MaxWithLimiters {
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
	w := &Limiter[K]{engine: l.engine, named: l.named, hooks: l.hooks, with: l.with}
	w.own = own
	w.cur = new(atomic.Pointer[limits[K]]) // its own limits; changes of them are serialised with l's
	ls, err := w.open(nil, []store.Limit{lim})
	if err != nil {
		unclaimAll(own, made)
		return nil, err
	}
	w.cur.Store(ls)
	w.hooked = newHooked(w, l.hooks)
	return w, nil
}
