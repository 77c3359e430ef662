package memorystore

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// The booking operations (store.Booker) of a handle and of a policy: a
// handle's are its one limit's as a policy of one, since they are not on
// the hot path of a decision.

var (
	_ store.Booker[string]  = (*handle[string])(nil)
	_ store.Booker[string]  = (*policy[string])(nil)
	_ store.Settler[string] = (*handle[string])(nil)
	_ store.Settler[string] = (*policy[string])(nil)
)

// undo is a memory booking's record for Cancel, Refund and Settle: per
// limit, the generation of the state it charged, the state the booking
// (or its last Settle) left, and for an exact undo the state the booking
// replaced (a sliding log's, whose Log changes in place, is given back by
// its Undo alone: exact false). A record is never changed: a Settle
// returns a new one.
type undo struct {
	// pre is each entry's state as it was kept before the booking, under
	// the config preCfg (not converted to the booking limit's terms);
	// post is the state the booking (or its last Settle) wrote, under
	// postCfg. An undo that finds post still there, in the same
	// generation, puts pre back as it was, as a Redis store puts the value
	// back, whatever limit is in force by then.
	pre, post       []algorithm.State
	preCfg, postCfg []uint32
	// preConf and postConf are the configs preCfg and postCfg numbered
	// when the booking was made: a number no entry or handle holds any
	// more is recycled (registry), and then names another.
	preConf, postConf []*limitConfig
	// exact is whether the limit may be given back exactly while its
	// state is post: a Tagged algorithm without a Log, on a state of its
	// own kind, and no Settle found the state changed since.
	exact []bool
	made  []bool   // the booking made the key's entry: giving it back drops it, as a Redis HDEL
	gen   []uint64 // the generation of the state the booking charged (see arena)
}

// clone returns a copy of u that a Settle may change.
func (u *undo) clone() *undo {
	return &undo{pre: u.pre, preCfg: u.preCfg, preConf: u.preConf, made: u.made,
		post: slices.Clone(u.post), postCfg: slices.Clone(u.postCfg), postConf: slices.Clone(u.postConf),
		exact: slices.Clone(u.exact), gen: slices.Clone(u.gen)}
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

func (h *handle[K]) Undo(ctx context.Context, key K, now int64, b store.Booking) (int64, error) {
	return h.one().Undo(ctx, key, now, b)
}

func (h *handle[K]) Settle(ctx context.Context, key K, now int64, b store.Booking, n int64) (store.Booking, error) {
	return h.one().Settle(ctx, key, now, b, n)
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
		preConf: make([]*limitConfig, len(bs)), postConf: make([]*limitConfig, len(bs)), gen: make([]uint64, len(bs))}
	for i, b := range bs {
		l, e, n := &p.limits[i], hd.es[i], hd.ns[i]
		u.gen[i] = t.arena.numbered(n, t.nextGen)
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
	_, err := p.giveBack(key, now, b, false)
	return err
}

func (p *policy[K]) Undo(_ context.Context, key K, now int64, b store.Booking) (int64, error) {
	return p.giveBack(key, now, b, true)
}

// noGen is a generation no state has: a booking that records it gives
// nothing back to that limit.
const noGen = math.MaxUint64

// nextGen numbers a new generation (see arena).
func (t *table[K]) nextGen() uint64 { return t.gens.Add(1) }

// record returns b's record, or an error wrapping store.ErrInvalidBooking
// when this table did not make it.
func (p *policy[K]) record(b store.Booking) (*undo, error) {
	u, ok := b.Undo.(*undo)
	if !ok || len(u.pre) != len(p.limits) {
		return nil, fmt.Errorf("%w: a booking not made by this memory table", store.ErrInvalidBooking)
	}
	return u, nil
}

// pinPre holds the configs the states before the booking were written
// under, while a give-back may write them back: those recycled since (no
// entry and no handle held them) are not written back. It returns which it
// holds, for unpinPre.
func (t *table[K]) pinPre(u *undo) []bool {
	pinned := make([]bool, len(u.pre))
	for i := range u.pre {
		if u.exact[i] && !u.made[i] && u.preConf[i] != nil {
			pinned[i] = t.reg.pin(u.preCfg[i], u.preConf[i])
		}
	}
	return pinned
}

func (t *table[K]) unpinPre(u *undo, pinned []bool) {
	for i, ok := range pinned {
		if ok {
			t.reg.unpin(u.preCfg[i])
		}
	}
}

// ownState reports how entry n, e, locked, stands to a booking's limit i
// (record u): mine is whether it holds the generation the booking charged,
// in a state written under the limit's own Tag (not converted from other
// parameters or carried from another kind: a give-back in the booking's
// terms written over it would erase what it holds beyond them); exact
// whether it still holds the state the booking (or its last Settle) left,
// which an undo may then give back exactly.
func (p *policy[K]) ownState(u *undo, i int, e *entry[K], n uint32) (mine, exact bool) {
	t, l := p.t, &p.limits[i]
	if e == nil || t.arena.genOf(n) != u.gen[i] || !t.sameTag(e.cfg, l.cfg) {
		return false, false
	}
	if !u.exact[i] || !t.sameTag(e.cfg, u.postCfg[i]) || t.reg.cfg(u.postCfg[i]) != u.postConf[i] {
		return true, false
	}
	raw := t.state(e, n, t.reg.cfg(e.cfg).wide)
	return true, raw.N0 == u.post[i].N0 && raw.N1 == u.post[i].N1 && raw.N2 == u.post[i].N2
}

// sameTag reports whether configs a and b write states that mean the
// same (one Tag; the same config when either has none), as a Redis script
// tells them apart by their header.
func (t *table[K]) sameTag(a, b uint32) bool {
	if a == b {
		return true
	}
	x, y := t.reg.cfg(a), t.reg.cfg(b)
	return x.tagged && y.tagged && x.tag == y.tag
}

// giveBack is Cancel, or with refund Undo (a Reservation's Refund): a
// booking given back at now, and the least any limit gave back. A limit
// whose state is of another generation, or carried from another kind,
// gets nothing back; one whose state is still the one the booking left
// gets the state before it back, exactly; any other gets what the
// algorithm's Undo gives (before the booking is due, its Unused). Cancel
// gives nothing back once the booking is due.
func (p *policy[K]) giveBack(key K, now int64, b store.Booking, refund bool) (int64, error) {
	t := p.t
	if t.tooLong(&key) {
		return 0, t.errLong
	}
	u, err := p.record(b)
	if err != nil {
		return 0, err
	}
	if b.Act <= now && !refund || b.Cost < 1 {
		return 0, nil // due: used; or settled to nothing
	}
	bs, _, err := p.bookers()
	if err != nil {
		return 0, err
	}
	pinned := t.pinPre(u)
	defer t.unpinPre(u, pinned)
	hd, states, err := p.lockStates(key, now, false)
	if err != nil {
		return 0, err
	}
	defer hd.unlock()
	least := b.Cost
	for i, bk := range bs {
		l, e, n := &p.limits[i], hd.es[i], hd.ns[i]
		if !b.Gives(l.alg) {
			continue // a release: charged for good, as a request that happened
		}
		mine, exact := p.ownState(u, i, e, n)
		if !mine {
			least = 0 // forgotten or born again since, or carried: nothing to give back
			continue
		}
		s := states[i]
		given := int64(0)
		if exact && (u.made[i] || pinned[i]) {
			// What it gives back is what the algorithm's exact undo
			// would (nothing once the admission no longer counts); the
			// state written is the one before the booking.
			if ud, ok := bk.(algorithm.Undoer); ok {
				_, given, _ = ud.Undo(algorithm.CloneState(s), now, b.Act, b.Cost, b.Cost, true)
			} else {
				given = b.Cost
			}
			if u.made[i] {
				t.dropLocked(key, l.id, e) // the key had no state: it has none again
				hd.es[i] = nil
			} else {
				t.put(e, n, u.preCfg[i], t.reg.cfg(u.preCfg[i]).wide, u.pre[i])
			}
			least = min(least, given)
			continue
		}
		var next algorithm.State
		if ud, ok := bk.(algorithm.Undoer); ok {
			next, given, _ = ud.Undo(s, now, b.Act, b.Cost, b.Cost, exact)
		} else if b.Act > now {
			if give := bk.Unused(s, now, b.Act, b.Cost); give > 0 {
				next, _ = bk.Refund(s, now, give)
				if changed(next, s) {
					given = give
				}
			}
		}
		if given > 0 && changed(next, s) {
			t.write(e, n, l, next)
		}
		least = min(least, given)
	}
	return least, nil
}

// Settle makes b's cost n (see store.Settler): each limit gives back
// b.Cost − n as giveBack does (exactly, to the state before the booking,
// when n is 0), or owes n − b.Cost (algorithm.Settler.Owe), charged to the
// key's state as it is now. The booking it returns is b at its new cost,
// with a record that an undo gives back exactly only while each limit's
// state is the one this Settle left, and only if it was the one the
// booking left.
func (p *policy[K]) Settle(_ context.Context, key K, now int64, b store.Booking, n int64) (store.Booking, error) {
	t := p.t
	if t.tooLong(&key) {
		return b, t.errLong
	}
	u, err := p.record(b)
	if err != nil {
		return b, err
	}
	if n < 0 || n > algorithm.MaxLimit {
		return b, fmt.Errorf("%w: settle to %d", algorithm.ErrInvalidCost, n)
	}
	if n == b.Cost {
		return b, nil
	}
	bs, _, err := p.bookers()
	if err != nil {
		return b, err
	}
	up := n > b.Cost
	settlers, undoers, err := p.settlers(bs, up)
	if err != nil {
		return b, err
	}
	if n == 0 && b.Cost > 0 {
		if _, err := p.giveBack(key, now, b, true); err != nil {
			return b, err
		}
		b.Cost = 0
		return b, nil
	}
	pinned := t.pinPre(u)
	defer t.unpinPre(u, pinned)
	hd, states, err := p.lockStates(key, now, up)
	if err != nil {
		return b, err
	}
	defer hd.unlock()
	v := u.clone()
	for i := range bs {
		l, e, en := &p.limits[i], hd.es[i], hd.ns[i]
		mine, exact := p.ownState(u, i, e, en)
		if !exact {
			v.exact[i] = false
		}
		if up {
			if e == nil {
				continue // not made: lockStates makes every entry when up
			}
			if !mine {
				// Reset or expired since, or written under other
				// parameters or by another kind: the shortfall is charged
				// to the key as it is now, read in the booking's terms as
				// a decision reads it, and nothing of it comes back. A
				// state that reads full in those terms is left as it is:
				// written back in them, what it holds past the booking's
				// limit would be cut.
				v.gen[i] = noGen
				if p.limits[i].alg.Peek(states[i], now, 1).Remaining == 0 && !t.sameTag(e.cfg, l.cfg) {
					continue
				}
			}
			next, _ := settlers[i].Owe(states[i], now, b.Act, n-b.Cost)
			t.write(e, en, l, next)
			v.post[i], v.postCfg[i], v.postConf[i] = next, l.cfg, t.reg.cfg(l.cfg)
			continue
		}
		if !mine {
			continue // nothing of it left to give back
		}
		next, given, _ := undoers[i].Undo(states[i], now, b.Act, b.Cost, b.Cost-n, exact)
		if given > 0 && changed(next, states[i]) {
			t.write(e, en, l, next)
			v.post[i], v.postCfg[i], v.postConf[i] = next, l.cfg, t.reg.cfg(l.cfg)
		}
	}
	b.Cost, b.Undo = n, v
	return b, nil
}

// settlers returns the limits' algorithms as algorithm.Settlers (up) or
// algorithm.Undoers, or an error wrapping store.ErrAlgorithmUnsupported.
func (p *policy[K]) settlers(bs []algorithm.Booker, up bool) ([]algorithm.Settler, []algorithm.Undoer, error) {
	settlers := make([]algorithm.Settler, len(bs))
	undoers := make([]algorithm.Undoer, len(bs))
	for i, bk := range bs {
		// Settled either way only by a Settler, as on Redis (a body
		// without --@owe settles neither way): the in-flight limit's
		// holds are released, not settled.
		var ok bool
		settlers[i], ok = bk.(algorithm.Settler)
		if ok && !up {
			undoers[i], ok = bk.(algorithm.Undoer)
		}
		if !ok {
			return nil, nil, fmt.Errorf("%w: %v cannot be settled (algorithm.Settler)", store.ErrAlgorithmUnsupported, p.limits[i].alg)
		}
	}
	return settlers, undoers, nil
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
		if !t.sameTag(e.cfg, l.cfg) {
			// Written under other parameters or by another kind, read
			// converted: nothing is given back, and that state stays.
			// Given back in this limit's terms and written so, it would
			// lose what it holds beyond them (a limit raised since, and
			// used past this one).
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
