package memorystore

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// limitRef is one limit of a handle: its algorithm, and the numbers of
// its identity and config in the store's registry.
type limitRef struct {
	alg     algorithm.Algorithm
	inherit algorithm.Inheritor // alg, when it converts states of its Kind
	limit   int64
	id, cfg uint32
	wide    bool // not algorithm.Narrow
	reset   bool // store.Limit.ResetOnMismatch
	rule    algorithm.Rule
	name    string // the identity, for errors
}

// handle is the store.Table an Open of one limit returns: a few words
// naming the limit's identity and config in the store-wide table, so
// that building one per request costs little and decides as any other
// handle of the same identity does.
type handle[K comparable] struct {
	t *table[K]
	l limitRef
	// asOne is the handle as a policy of one limit, for the booking
	// operations (book.go), made on the first.
	asOne atomic.Pointer[policy[K]]
}

var _ store.Table[string] = (*handle[string])(nil)

func (h *handle[K]) Take(_ context.Context, key K, now, cost int64, out []algorithm.Result) (r algorithm.Result, _ error) {
	t, l := h.t, &h.l
	if t.tooLong(&key) {
		return r, t.errLong
	}
	sh, hash := t.place(t.hash.Sum(key), l.id)
	e, n, r, answered := t.find(sh, l.id, key, hash, now, cost == 1, l.cfg)
	if !answered {
		if e == nil {
			var err error
			if e, n, err = t.insert(sh, l, key, hash, now); e == nil {
				return r, err
			}
		}
		if e.cfg != l.cfg {
			var err error
			if r, err = t.takeOther(e, n, l, now, cost); err != nil {
				return r, err
			}
		} else {
			var s algorithm.State
			s, r = l.alg.Take(t.state(e, n, l.wide), now, cost)
			t.keep(e, n, l.wide, s)
			switch {
			case r.Allowed():
				e.admitted()
			case cost == 1:
				e.deny(now, r, l.cfg)
			}
			e.mu.Unlock()
		}
	}
	if out != nil {
		out[0] = r
	}
	return r, nil
}

// takeOther is Take on entry n, e, locked, whose state another config
// wrote: it reads the state as l's (see read), and only when l admits the
// cost writes what it left, under l's config. It unlocks e.
func (t *table[K]) takeOther(e *entry[K], n uint32, l *limitRef, now, cost int64) (r algorithm.Result, err error) {
	defer e.mu.Unlock()
	s, err := t.read(e, n, l, now)
	if err != nil {
		return r, err
	}
	if r = l.alg.Peek(s, now, cost); !r.Allowed() {
		return r, nil // no standing denial: a converted state reads otherwise at another instant
	}
	s, r = l.alg.Take(s, now, cost)
	t.write(e, n, l, s)
	return r, nil
}

// read returns entry n's state, e, as l's state at now, when e's state
// was written by another config than l's. A state of the same meaning
// (Tag) is l's as it is; one of the same Kind is converted by l's
// algorithm when it is an algorithm.Inheritor, by l's rule; one of
// another Kind is l's fresh state charged with what that state had used
// (algorithm.Carry; a fresh one when the writer would read its state
// fresh, where a Redis key's TTL drops it). Any other (a config without a
// Tag: an algorithm of no registered Kind) is an error wrapping
// store.ErrStateMismatch, or, when l resets on mismatch, l's fresh state.
// The state returned shares nothing with e's: a Log is copied, so that
// what l does with it changes e only if l writes it. The caller holds e's
// lock.
func (t *table[K]) read(e *entry[K], n uint32, l *limitRef, now int64) (algorithm.State, error) {
	w, mine := t.reg.cfg(e.cfg), t.reg.cfg(l.cfg)
	s := t.state(e, n, w.wide)
	if s.Log != nil {
		s.Log = &algorithm.Log{Entries: slices.Clone(s.Log.Entries[s.Log.Head:])}
	}
	if w.tagged && mine.tagged {
		switch {
		case w.wide == mine.wide && w.tag == mine.tag:
			return s, nil
		case w.wide == mine.wide && w.tag.Kind == mine.tag.Kind && l.inherit != nil:
			return l.inherit.Inherit(w.tag, s, now, l.rule), nil
		case w.tag.Kind != mine.tag.Kind:
			if w.alg.Peek(s, now, 1).ResetAfter > 0 {
				// Another Kind: what the state had used carries over,
				// until its writer would read it fresh.
				return algorithm.Carry(l.alg, w.tag, s, now), nil
			}
			return l.alg.Init(algorithm.State{}, now), nil
		}
	}
	if l.reset {
		return l.alg.Init(algorithm.State{}, now), nil
	}
	return s, fmt.Errorf("%w: state ID %q holds the state of %s, which this limit, %s, cannot read", store.ErrStateMismatch, l.name, w.describe(), mine.describe())
}

// write makes s, which l admitted a cost on, entry n's state under l's
// config, and retires the entry's standing denial. The caller holds e's
// lock.
func (t *table[K]) write(e *entry[K], n uint32, l *limitRef, s algorithm.State) {
	t.put(e, n, l.cfg, l.wide, s)
}

// put makes s entry n's state under config cfg, which is wide or not, and
// retires the entry's standing denial. The caller holds e's lock.
func (t *table[K]) put(e *entry[K], n uint32, cfg uint32, wide bool, s algorithm.State) {
	if e.cfg != cfg && !wide {
		if w := t.arena.wideOf(n); w != nil { // a wide state's rest, now no one's
			w.n2, w.log = 0, nil
		}
	}
	t.keep(e, n, wide, s)
	e.cfg = cfg
	e.admitted()
}

// peekOne returns Peek of entry n, e, locked, for a cost of 1 at now under
// l, and unlocks e. A denial of a state l's config wrote is recorded on e,
// so that the next requests are answered without the lock until it is
// over. One of a state another config wrote is not: its instants hold
// only for the state as l reads it at now, which may be converted
// otherwise at another instant.
func (t *table[K]) peekOne(e *entry[K], n uint32, l *limitRef, now int64) (r algorithm.Result, err error) {
	defer e.mu.Unlock()
	if e.cfg != l.cfg {
		s, err := t.read(e, n, l, now)
		if err != nil {
			return r, err
		}
		return l.alg.Peek(s, now, 1), nil
	}
	if r = l.alg.Peek(t.state(e, n, l.wide), now, 1); !r.Allowed() {
		e.deny(now, r, l.cfg)
	}
	return r, nil
}

func (h *handle[K]) Peek(_ context.Context, key K, now int64, out []algorithm.Result) (r algorithm.Result, _ error) {
	t, l := h.t, &h.l
	if t.tooLong(&key) {
		return r, t.errLong
	}
	sh, hash := t.place(t.hash.Sum(key), l.id)
	e, n, r, answered := t.find(sh, l.id, key, hash, now, true, l.cfg)
	if !answered {
		if e == nil {
			e, n = t.confirm(sh, l.id, key, hash)
		}
		if e == nil {
			r = algorithm.Fresh(l.limit)
		} else {
			var err error
			if r, err = t.peekOne(e, n, l, now); err != nil {
				return r, err
			}
		}
	}
	if out != nil {
		out[0] = r
	}
	return r, nil
}

func (h *handle[K]) Reset(_ context.Context, key K) error {
	if h.t.tooLong(&key) {
		return h.t.errLong
	}
	h.t.forget(h.t.hash.Sum(key), h.l.id, key)
	return nil
}

// forget drops the state of identity id for a key whose hash is h.
func (t *table[K]) forget(h uint64, id uint32, key K) {
	sh, hash := t.place(h, id)
	for {
		sh.mu.Lock()
		pos, ok := t.locate(sh, id, key, hash)
		if !ok {
			sh.mu.Unlock()
			return
		}
		if t.arena.at(wordEntry(sh.index.Load().words[pos].Load())).mu.TryLock() {
			t.drop(sh, pos)
			sh.mu.Unlock()
			return
		}
		sh.mu.Unlock() // a decision holds the entry: let it finish
		runtime.Gosched()
	}
}

// policy is the store.Table an Open of several limits returns: one entry
// per limit and key, locked together in increasing order of identity
// number (order), the same order for every handle of the store, so that
// handles sharing identities never wait on each other in a circle.
type policy[K comparable] struct {
	t      *table[K]
	limits []limitRef // in the order of Open
	order  []int      // indexes of limits, by identity number
	// booking is the limits' algorithms as algorithm.Bookers (book.go),
	// made on the first booking operation.
	booking atomic.Pointer[bookers]
}

var _ store.Table[string] = (*policy[string])(nil)

// held is the entries a policy's decision holds, by limit (nil for a
// limit whose key has no state: a Peek's), and their numbers.
type held[K comparable] struct {
	es []*entry[K]
	ns []uint32
	// made, when not nil, receives which entries lockAll made (the key
	// had no state under that limit): a booking's, to give back exactly.
	made []bool
}

// unlock lets go of the entries hd holds.
func (hd held[K]) unlock() {
	for i, e := range hd.es {
		if e != nil {
			e.mu.Unlock()
			hd.es[i] = nil
		}
	}
}

// lockAll locks the entries of key under every limit, in increasing order
// of identity number, making those it does not find when create is set
// (a Take's), or leaving them nil (a Peek's, which takes such a limit as
// fresh). It returns the store's refusal of a new key (store.ErrFull,
// store.ErrTooManyStates), holding nothing. Holding entries, it may wait for a shard's mutex: its holders never
// wait for an entry's lock (see table).
func (p *policy[K]) lockAll(hd held[K], key K, now int64, create bool) error {
	t := p.t
	h := t.hash.Sum(key)
	for _, i := range p.order {
		l := &p.limits[i]
		sh, hash := t.place(h, l.id)
		e, n := t.lookup(sh, l.id, key, hash)
		if e == nil {
			if create {
				var made bool
				var err error
				if e, n, made, err = t.insertNew(sh, l, key, hash, now); e == nil {
					hd.unlock()
					return err
				}
				if hd.made != nil {
					hd.made[i] = made
				}
			} else {
				e, n = t.confirm(sh, l.id, key, hash)
			}
		}
		hd.es[i], hd.ns[i] = e, n
	}
	return nil
}

// Take charges the cost to every limit if all of them admit it, and to
// none otherwise.
//
// A narrow limit's Take changes nothing it is given (its state has no
// Log), so such a limit takes the cost on a copy of its state at once, and
// the copy is kept only if every limit admitted the cost. Any other limit
// first peeks (Peek admits exactly what Take would: the Algorithm
// contract), and takes only once all have admitted. When the cost is
// refused, a narrow limit that admitted it on its copy reports Peek
// instead, its state as it stands, since nothing was charged. So the
// common route, token buckets and fixed windows, decides in one pass.
func (p *policy[K]) Take(_ context.Context, key K, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	t := p.t
	if t.tooLong(&key) {
		return algorithm.Result{}, t.errLong
	}
	var ebuf [4]*entry[K]
	var nbuf [4]uint32
	var mbuf [4]bool
	hd := held[K]{ebuf[:], nbuf[:], mbuf[:]}
	if len(p.limits) > len(ebuf) {
		hd = held[K]{make([]*entry[K], len(p.limits)), make([]uint32, len(p.limits)), make([]bool, len(p.limits))}
	}
	hd.es, hd.ns, hd.made = hd.es[:len(p.limits)], hd.ns[:len(p.limits)], hd.made[:len(p.limits)]
	if err := p.lockAll(hd, key, now, true); err != nil {
		return algorithm.Result{}, err
	}
	var buf [4]algorithm.Result
	rs := results(out, buf[:], len(p.limits))
	var sbuf, tbuf [4]algorithm.State
	states, taken := sbuf[:], tbuf[:] // each limit's state as it reads it; the narrow ones' charged
	if len(p.limits) > len(sbuf) {
		states, taken = make([]algorithm.State, len(p.limits)), make([]algorithm.State, len(p.limits))
	}
	all := true
	for i := range p.limits {
		l, e, n := &p.limits[i], hd.es[i], hd.ns[i]
		if e.cfg == l.cfg {
			states[i] = t.state(e, n, l.wide)
		} else {
			var err error
			if states[i], err = t.read(e, n, l, now); err != nil {
				hd.unlock()
				return algorithm.Result{}, err
			}
		}
		if l.wide {
			rs[i] = l.alg.Peek(states[i], now, cost)
		} else {
			taken[i], rs[i] = l.alg.Take(states[i], now, cost)
		}
		all = all && rs[i].Allowed()
	}
	for i := range p.limits {
		l, e, n := &p.limits[i], hd.es[i], hd.ns[i]
		switch {
		case all:
			if l.wide {
				taken[i], rs[i] = l.alg.Take(states[i], now, cost)
			}
			t.write(e, n, l, taken[i])
		case !l.wide && rs[i].Allowed(): // refused: it admitted on a copy, so it reports its state
			rs[i] = l.alg.Peek(states[i], now, cost)
		}
		if !all && hd.made[i] {
			// Refused: the key has no state under this limit, as before (a
			// state made now would read otherwise after a clock's step
			// back, and a Redis script writes nothing).
			t.dropLocked(key, l.id, e)
			continue
		}
		e.mu.Unlock()
	}
	return algorithm.Combine(rs), nil
}

// results returns out, or when it is nil room for n results: buf when it
// is long enough.
func results(out, buf []algorithm.Result, n int) []algorithm.Result {
	if out != nil {
		return out
	}
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]algorithm.Result, n)
}

func (p *policy[K]) Peek(_ context.Context, key K, now int64, out []algorithm.Result) (algorithm.Result, error) {
	t := p.t
	if t.tooLong(&key) {
		return algorithm.Result{}, t.errLong
	}
	var ebuf [4]*entry[K]
	var nbuf [4]uint32
	hd := held[K]{ebuf[:], nbuf[:], nil}
	if len(p.limits) > len(ebuf) {
		hd = held[K]{make([]*entry[K], len(p.limits)), make([]uint32, len(p.limits)), nil}
	}
	hd.es, hd.ns = hd.es[:len(p.limits)], hd.ns[:len(p.limits)]
	p.lockAll(hd, key, now, false)
	defer hd.unlock()
	var buf [4]algorithm.Result
	rs := results(out, buf[:], len(p.limits))
	for i := range p.limits {
		l, e, n := &p.limits[i], hd.es[i], hd.ns[i]
		switch {
		case e == nil:
			rs[i] = algorithm.Fresh(l.limit)
		case e.cfg == l.cfg:
			rs[i] = l.alg.Peek(t.state(e, n, l.wide), now, 1)
		default:
			s, err := t.read(e, n, l, now)
			if err != nil {
				return algorithm.Result{}, err
			}
			rs[i] = l.alg.Peek(s, now, 1)
		}
	}
	return algorithm.Combine(rs), nil
}

func (p *policy[K]) Reset(_ context.Context, key K) error {
	t := p.t
	if t.tooLong(&key) {
		return t.errLong
	}
	h := t.hash.Sum(key)
	for i := range p.limits {
		t.forget(h, p.limits[i].id, key)
	}
	return nil
}
