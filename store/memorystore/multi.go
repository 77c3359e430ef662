package memorystore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

var (
	_ store.Multi[string] = (*handle[string])(nil)
	_ store.Multi[string] = (*policy[string])(nil)
)

// multiSlot is one limit of one request of a TakeAll: the entry it
// decides on, locked in the order of (key hash, identity number).
type multiSlot[K comparable] struct {
	req   int
	limit int // the limit's place among its table's, for Out
	l     *limitRef
	h     uint64 // the key's hash (keyhash)
	e     *entry[K]
	n     uint32
	made  bool // the entry was made by this TakeAll
	state algorithm.State
	taken algorithm.State
	r     algorithm.Result
}

// multiTies serialises the TakeAlls that lock entries of different keys
// whose hashes and identities are equal, for which the order of
// (hash, identity) says nothing: at most one such TakeAll locks at a time.
var multiTies sync.Mutex

func (h *handle[K]) TakeAll(ctx context.Context, reqs []store.Request[K]) (bool, error) {
	return takeAll(h.t, reqs)
}

func (p *policy[K]) TakeAll(ctx context.Context, reqs []store.Request[K]) (bool, error) {
	return takeAll(p.t, reqs)
}

// limitsOf returns the limits of tb, a table of t, or false.
func limitsOf[K comparable](t *table[K], tb store.Table[K]) ([]limitRef, bool) {
	switch x := tb.(type) {
	case *handle[K]:
		return []limitRef{x.l}, x.t == t
	case *policy[K]:
		return x.limits, x.t == t
	}
	return nil, false
}

// takeAll is TakeAll on t: every entry of every request is locked, in
// increasing order of (key hash, identity number), which agrees with the
// order a policy locks one key's entries in; then every limit decides as
// a policy's Take does, and the states are written only when all admit.
func takeAll[K comparable](t *table[K], reqs []store.Request[K]) (bool, error) {
	slots, ties, err := slotsOf(t, reqs)
	if err != nil {
		return false, err
	}
	if ties {
		multiTies.Lock()
		defer multiTies.Unlock()
	}
	for i := range slots {
		s := &slots[i]
		key, now := reqs[s.req].Key, reqs[s.req].Now
		sh, hash := t.place(s.h, s.l.id)
		e, n := t.lookup(sh, s.l.id, key, hash)
		if e == nil {
			var err error
			if e, n, s.made, err = t.insertNew(sh, s.l, key, hash, now); e == nil {
				unlockSlots(t, reqs, slots[:i], true)
				return false, &store.RequestError{Index: s.req, Err: err}
			}
		}
		s.e, s.n = e, n
	}
	all, err := decideSlots(t, reqs, slots)
	unlockSlots(t, reqs, slots, !all || err != nil)
	if err != nil {
		return false, err
	}
	// Each request's results, combined.
	var buf [4]algorithm.Result
	for i := range reqs {
		rq := &reqs[i]
		ls, _ := limitsOf(t, rq.Table)
		rs := results(rq.Out, buf[:], len(ls))
		for j := range slots {
			if slots[j].req == i {
				rs[slots[j].limit] = slots[j].r
			}
		}
		rq.Result = algorithm.Combine(rs)
	}
	return all, nil
}

// slotsOf checks reqs and returns their limits' slots in the order they
// are locked in, and whether two of them, of different keys, tie in it.
func slotsOf[K comparable](t *table[K], reqs []store.Request[K]) ([]multiSlot[K], bool, error) {
	var slots []multiSlot[K]
	for i := range reqs {
		rq := &reqs[i]
		ls, ok := limitsOf(t, rq.Table)
		if !ok {
			return nil, false, &store.RequestError{Index: i, Err: fmt.Errorf("%w: %T", store.ErrForeignTable, rq.Table)}
		}
		if t.tooLong(&rq.Key) {
			return nil, false, &store.RequestError{Index: i, Err: t.errLong}
		}
		least := ls[0].limit
		for j := range ls {
			least = min(least, ls[j].limit)
		}
		if err := algorithm.CheckCost(rq.Cost, least); err != nil {
			return nil, false, &store.RequestError{Index: i, Err: err}
		}
		if rq.Out != nil && len(rq.Out) != len(ls) {
			return nil, false, &store.RequestError{Index: i, Err: fmt.Errorf("%w: out has %d results for %d limits", algorithm.ErrInvalidConfig, len(rq.Out), len(ls))}
		}
		h := t.hash.Sum(rq.Key)
		for j := range ls {
			slots = append(slots, multiSlot[K]{req: i, limit: j, l: &ls[j], h: h})
		}
	}
	slices.SortFunc(slots, func(a, b multiSlot[K]) int {
		if c := cmp.Compare(a.h, b.h); c != 0 {
			return c
		}
		return cmp.Compare(a.l.id, b.l.id)
	})
	ties := false
	for i := 1; i < len(slots); i++ {
		a, b := &slots[i-1], &slots[i]
		if a.h == b.h && a.l.id == b.l.id {
			if reqs[a.req].Key == reqs[b.req].Key {
				return nil, false, fmt.Errorf("%w: requests %d and %d", store.ErrSameState, min(a.req, b.req), max(a.req, b.req))
			}
			ties = true
		}
	}
	return slots, ties, nil
}

// decideSlots decides every locked slot, and writes their states when
// all admit; a slot that admitted on a copy of its state while another
// refused reports Peek. It reports whether all admitted.
func decideSlots[K comparable](t *table[K], reqs []store.Request[K], slots []multiSlot[K]) (bool, error) {
	all := true
	for i := range slots {
		s := &slots[i]
		rq := &reqs[s.req]
		if s.e.cfg == s.l.cfg {
			s.state = t.state(s.e, s.n, s.l.wide)
		} else {
			var err error
			if s.state, err = t.read(s.e, s.n, s.l, rq.Now); err != nil {
				return false, &store.RequestError{Index: s.req, Err: err}
			}
		}
		if s.l.wide {
			s.r = s.l.alg.Peek(s.state, rq.Now, rq.Cost)
		} else {
			s.taken, s.r = s.l.alg.Take(s.state, rq.Now, rq.Cost)
		}
		all = all && s.r.Allowed()
	}
	for i := range slots {
		s := &slots[i]
		rq := &reqs[s.req]
		switch {
		case all:
			if s.l.wide {
				s.taken, s.r = s.l.alg.Take(s.state, rq.Now, rq.Cost)
			}
			t.write(s.e, s.n, s.l, s.taken)
			s.e.admitted()
		case !s.l.wide && s.r.Allowed(): // refused: it admitted on a copy
			s.r = s.l.alg.Peek(s.state, rq.Now, rq.Cost)
		}
	}
	return all, nil
}

// unlockSlots lets go of the slots' entries, dropping those this TakeAll
// made when drop is set (nothing was charged: the key has no state under
// that limit, as before).
func unlockSlots[K comparable](t *table[K], reqs []store.Request[K], slots []multiSlot[K], drop bool) {
	for i := range slots {
		s := &slots[i]
		if s.e == nil {
			continue
		}
		if drop && s.made {
			t.dropLocked(reqs[s.req].Key, s.l.id, s.e)
		} else {
			s.e.mu.Unlock()
		}
		s.e = nil
	}
}
