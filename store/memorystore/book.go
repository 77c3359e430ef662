package memorystore

import (
	"context"
	"fmt"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// The booking operations (store.Booker) of a handle and of a policy: a
// handle's are its one limit's as a policy of one, since they are not on
// the hot path of a decision.

var (
	_ store.Booker[string] = (*handle[string])(nil)
	_ store.Booker[string] = (*policy[string])(nil)
)

// undo is a memory booking's record for Cancel: per limit, the state the
// booking replaced and the one it left (a sliding log's, whose Log
// changes in place, is given back by its Unused instead: exact false).
type undo struct {
	// pre is each entry's state as it was kept before the booking, under
	// the config preCfg (not converted to the booking limit's terms);
	// post is the state the booking wrote, under postCfg. A cancel that
	// finds post still there puts pre back as it was, as a Redis store
	// puts the value back, whatever limit is in force by then.
	pre, post       []algorithm.State
	preCfg, postCfg []uint32
	// preConf and postConf are the configs preCfg and postCfg numbered
	// when the booking was made: a number no entry or handle holds any
	// more is recycled (registry), and then names another.
	preConf, postConf []*limitConfig
	exact             []bool
	made              []bool // the booking made the key's entry: giving it back drops it, as a Redis HDEL
}

func (h *handle[K]) one() *policy[K] {
	if p := h.asOne.Load(); p != nil {
		return p
	}
	p := &policy[K]{t: h.t, limits: []limitRef{h.l}, order: []int{0}}
	h.asOne.CompareAndSwap(nil, p)
	return h.asOne.Load()
}

func (h *handle[K]) Book(ctx context.Context, key K, now, cost, maxDelay int64, out []algorithm.Result) (algorithm.Result, store.Booking, bool, error) {
	return h.one().Book(ctx, key, now, cost, maxDelay, out)
}

func (h *handle[K]) Cancel(ctx context.Context, key K, now int64, b store.Booking) error {
	return h.one().Cancel(ctx, key, now, b)
}

func (h *handle[K]) Undo(ctx context.Context, key K, now int64, b store.Booking) error {
	return h.one().Undo(ctx, key, now, b)
}

func (h *handle[K]) Refund(ctx context.Context, key K, now, n int64, out []algorithm.Result) (algorithm.Result, error) {
	return h.one().Refund(ctx, key, now, n, out)
}

// bookers is a policy's limits' algorithms as algorithm.Bookers, and as
// Algorithms, or why they are not.
type bookers struct {
	bs  []algorithm.Booker
	as  []algorithm.Algorithm
	err error // wraps store.ErrAlgorithmUnsupported
}

// bookers returns the limits' algorithms as algorithm.Bookers, or an error
// wrapping store.ErrAlgorithmUnsupported.
func (p *policy[K]) bookers() ([]algorithm.Booker, []algorithm.Algorithm, error) {
	if b := p.booking.Load(); b != nil {
		return b.bs, b.as, b.err
	}
	b := &bookers{bs: make([]algorithm.Booker, len(p.limits)), as: make([]algorithm.Algorithm, len(p.limits))}
	for i := range p.limits {
		bk, ok := p.limits[i].alg.(algorithm.Booker)
		if !ok {
			b.err = fmt.Errorf("%w: %v does not book (algorithm.Booker)", store.ErrAlgorithmUnsupported, p.limits[i].alg)
			break
		}
		b.bs[i], b.as[i] = bk, bk
	}
	p.booking.Store(b)
	return b.bs, b.as, b.err
}

// lockStates locks key's entries under every limit (making them when
// create is set) and returns them with each limit's state as it reads it
// (nil entry: no state, when create is not set). On an error it holds
// nothing.
func (p *policy[K]) lockStates(key K, now int64, create bool) (held[K], []algorithm.State, error) {
	t := p.t
	hd := held[K]{make([]*entry[K], len(p.limits)), make([]uint32, len(p.limits)), make([]bool, len(p.limits))}
	if err := p.lockAll(hd, key, now, create); err != nil {
		return hd, nil, err
	}
	states := make([]algorithm.State, len(p.limits))
	for i := range p.limits {
		l, e, n := &p.limits[i], hd.es[i], hd.ns[i]
		switch {
		case e == nil:
		case e.cfg == l.cfg:
			states[i] = t.state(e, n, l.wide)
		default:
			var err error
			if states[i], err = t.read(e, n, l, now); err != nil {
				hd.unlock()
				return hd, nil, err
			}
		}
	}
	return hd, states, nil
}

func (p *policy[K]) Book(_ context.Context, key K, now, cost, maxDelay int64, out []algorithm.Result) (algorithm.Result, store.Booking, bool, error) {
	t := p.t
	if t.tooLong(&key) {
		return algorithm.Result{}, store.Booking{}, false, t.errLong
	}
	bs, as, err := p.bookers()
	if err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	hd, states, err := p.lockStates(key, now, true)
	if err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	defer hd.unlock()
	rs := results(out, nil, len(p.limits))
	act, ok := algorithm.EarliestAll(as, states, now, algorithm.BookingDeadline(now, maxDelay), cost)
	if !ok {
		for i, b := range bs {
			rs[i] = b.Peek(states[i], now, cost)
			if hd.made[i] {
				// Nothing booked: the key has no state, as before (a state
				// made now would read otherwise after a clock's step back).
				t.dropLocked(key, p.limits[i].id, hd.es[i])
				hd.es[i] = nil
			}
		}
		r := algorithm.Combine(rs)
		r.RetryAfter = max(r.RetryAfter, act-now)
		return r, store.Booking{}, false, nil
	}
	u := &undo{pre: make([]algorithm.State, len(bs)), post: make([]algorithm.State, len(bs)),
		preCfg: make([]uint32, len(bs)), postCfg: make([]uint32, len(bs)), exact: make([]bool, len(bs)), made: hd.made,
		preConf: make([]*limitConfig, len(bs)), postConf: make([]*limitConfig, len(bs))}
	for i, b := range bs {
		l, e, n := &p.limits[i], hd.es[i], hd.ns[i]
		// Booked on another kind's state (carried): not undone exactly, as
		// the scripts cannot put back a log's sorted set.
		u.exact[i] = algorithm.ExactUndo(l.alg) && !t.otherKind(e, l)
		if u.exact[i] && !hd.made[i] {
			u.pre[i], u.preCfg[i], u.preConf[i] = t.state(e, n, t.reg.cfg(e.cfg).wide), e.cfg, t.reg.cfg(e.cfg)
		}
		u.postCfg[i], u.postConf[i] = l.cfg, t.reg.cfg(l.cfg)
		var next algorithm.State
		next, rs[i] = b.Book(states[i], now, act, cost)
		u.post[i] = next
		t.write(e, n, l, next)
	}
	return algorithm.Combine(rs), store.Booking{Act: act, Cost: cost, Undo: u}, true, nil
}

func (p *policy[K]) Cancel(_ context.Context, key K, now int64, b store.Booking) error {
	return p.giveBack(key, now, b, false)
}

func (p *policy[K]) Undo(_ context.Context, key K, now int64, b store.Booking) error {
	return p.giveBack(key, now, b, true)
}

// giveBack is Cancel, or with refund Undo (a Reservation's Refund): a
// booking given back at now, exactly where each limit's state is still
// the one it left, otherwise by the algorithm's Undo (before the booking
// is due, its Unused). Cancel gives nothing back once the booking is due.
func (p *policy[K]) giveBack(key K, now int64, b store.Booking, refund bool) error {
	t := p.t
	if t.tooLong(&key) {
		return t.errLong
	}
	u, ok := b.Undo.(*undo)
	if !ok || len(u.pre) != len(p.limits) {
		return fmt.Errorf("%w: a booking not made by this memory table", store.ErrInvalidBooking)
	}
	if b.Act <= now && !refund {
		return nil // due: used
	}
	bs, _, err := p.bookers()
	if err != nil {
		return err
	}
	// The configs the states before the booking were written under, held
	// while the cancel may write them back: those recycled since (no
	// entry and no handle held them) are not written back.
	pinned := make([]bool, len(bs))
	for i := range bs {
		if u.exact[i] && !u.made[i] && u.preConf[i] != nil {
			pinned[i] = t.reg.pin(u.preCfg[i], u.preConf[i])
		}
	}
	defer func() {
		for i, ok := range pinned {
			if ok {
				t.reg.unpin(u.preCfg[i])
			}
		}
	}()
	hd, states, err := p.lockStates(key, now, false)
	if err != nil {
		return err
	}
	defer hd.unlock()
	for i, bk := range bs {
		l, e, n := &p.limits[i], hd.es[i], hd.ns[i]
		if e == nil || b.HoldsOnly && !algorithm.Holds(l.alg) {
			continue // forgotten since, or charged for good: nothing to give back
		}
		s := states[i]
		if t.otherKind(e, l) {
			continue // carried from another kind's state: nothing to give back
		}
		if u.exact[i] && e.cfg == u.postCfg[i] && t.reg.cfg(e.cfg) == u.postConf[i] && (u.made[i] || pinned[i]) {
			if raw := t.state(e, n, t.reg.cfg(e.cfg).wide); raw.N0 == u.post[i].N0 && raw.N1 == u.post[i].N1 && raw.N2 == u.post[i].N2 {
				if u.made[i] {
					t.dropLocked(key, l.id, e) // the key had no state: it has none again
					hd.es[i] = nil
				} else {
					t.put(e, n, u.preCfg[i], t.reg.cfg(u.preCfg[i]).wide, u.pre[i])
				}
				continue
			}
		}
		if ud, ok := bk.(algorithm.Undoer); ok {
			if next, _ := ud.Undo(s, now, b.Act, b.Cost); changed(next, s) {
				t.write(e, n, l, next)
			}
		} else if b.Act > now {
			if give := bk.Unused(s, now, b.Act, b.Cost); give > 0 {
				if next, _ := bk.Refund(s, now, give); changed(next, s) {
					t.write(e, n, l, next)
				}
			}
		}
	}
	return nil
}

func (p *policy[K]) Refund(_ context.Context, key K, now, n int64, out []algorithm.Result) (algorithm.Result, error) {
	t := p.t
	if t.tooLong(&key) {
		return algorithm.Result{}, t.errLong
	}
	bs, _, err := p.bookers()
	if err != nil {
		return algorithm.Result{}, err
	}
	hd, states, err := p.lockStates(key, now, false)
	if err != nil {
		return algorithm.Result{}, err
	}
	defer hd.unlock()
	rs := results(out, nil, len(p.limits))
	for i, b := range bs {
		l, e, en := &p.limits[i], hd.es[i], hd.ns[i]
		if e == nil {
			rs[i] = algorithm.Fresh(l.limit)
			continue
		}
		if t.otherKind(e, l) {
			// Carried from another kind's state: nothing is given back,
			// and that state stays.
			rs[i] = b.Peek(states[i], now, 1)
			continue
		}
		var next algorithm.State
		next, rs[i] = b.Refund(states[i], now, n)
		if changed(next, states[i]) {
			t.write(e, en, l, next)
		}
	}
	return algorithm.Combine(rs), nil
}

// otherKind reports whether entry e, locked, holds a state another Kind
// of algorithm than l's wrote, which l reads carried (algorithm.Carry):
// a refund or a cancel gives nothing of it back, and writes nothing, as
// the scripts do.
func (t *table[K]) otherKind(e *entry[K], l *limitRef) bool {
	if e.cfg == l.cfg {
		return false
	}
	w, mine := t.reg.cfg(e.cfg), t.reg.cfg(l.cfg)
	return w.tagged && mine.tagged && w.tag.Kind != mine.tag.Kind
}

// dropLocked forgets the state of identity id for key, whose entry e the
// caller holds locked; it unlocks e. Holding an entry, it may wait for the
// shard's mutex (see table).
func (t *table[K]) dropLocked(key K, id uint32, e *entry[K]) {
	sh, hash := t.place(t.hash.Sum(key), id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if pos, ok := t.locate(sh, id, key, hash); ok && t.arena.at(wordEntry(sh.index.Load().words[pos].Load())) == e {
		t.drop(sh, pos)
		return
	}
	e.mu.Unlock()
}

// changed reports whether a Refund gave something back: it returns the
// state it was given as it is when there is nothing to give back. Only
// then is the state written, as the scripts write it. A state with nothing
// to give back stays as its writer left it: converted to the limit in
// force and written, it would read otherwise once the limit changes
// again. (A state another kind of algorithm wrote, read carried by a
// limiter that resets on mismatch, is never refunded: otherKind.)
func changed(next, s algorithm.State) bool {
	return next.N0 != s.N0 || next.N1 != s.N1 || next.N2 != s.N2 || next.Log != s.Log
}
