package memorystore

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// registry numbers a store's identities (store.Limit.ID) and configs (an
// algorithm's Spec), so that an entry names the state it holds in 8
// bytes: its identity's number and the number of the config that wrote
// it. Open interns under mu; decisions, sweeps and evictions find a config
// by its number without locking, through a list published atomically, as
// arena pages are.
//
// A number is in use while a handle holds it (an open table: Open counts
// it, and a cleanup of the handle, once it is garbage, gives it back) or
// a live entry does. Numbers in use by neither are recycled: when the
// numbers handed out reach a bound, intern sweeps (reclaim), so that
// limits given per call (Limiter.With), each of which numbers an identity
// or a config, cost memory only while their handles or their keys' states
// live. Every number is given out again only once nothing names it, so a
// decision never reads a state under another config than the one that
// wrote it.
type registry struct {
	mu    sync.Mutex
	ids   map[string]uint32
	keys  map[string]uint32              // a Spec's encoding → its config number
	cfgs  atomic.Pointer[[]*limitConfig] // by number; nil where free
	names []idSlot                       // by identity number
	// freeIDs and freeCfgs are the numbers a sweep freed, for reuse.
	freeIDs, freeCfgs []uint32
	// held counts the numbers (of identities and configs) handed out and
	// not freed; intern sweeps once it reaches next.
	held, next int
	// epoch counts sweeps; a number acquired during a sweep (used ==
	// epoch) is not freed by it.
	epoch    uint64
	sweeping bool
	// scan calls mark with the numbers of every live entry of the store's
	// table, and returns how many entries it looked at (set by the table).
	scan func(mark func(id, cfg uint32)) int
}

// reclaimAt is the fewest numbers handed out at which intern sweeps
// (reclaim); a variable, for tests.
var reclaimAt = 1024

// idSlot is an identity's number's record.
type idSlot struct {
	name string
	refs int    // handles holding it
	used uint64 // the epoch of its last acquisition
	free bool
}

// limitConfig is a config a store has seen: the first algorithm opened
// with its Spec (algorithms with equal Specs decide alike), and what a
// reader of a state it wrote needs to know.
type limitConfig struct {
	alg    algorithm.Algorithm
	limit  int64
	spec   string // the Spec's name, for errors about an algorithm with no Tag
	tag    algorithm.Tag
	tagged bool
	wide   bool // not algorithm.Narrow: the state has N2 and Log
	// key, refs and used are as idSlot's name, refs and used, under the
	// registry's mu.
	key  string
	refs int
	used uint64
}

// cfg returns config n, which is in use.
func (r *registry) cfg(n uint32) *limitConfig { return (*r.cfgs.Load())[n] }

// intern returns the handle's view of l, numbering its identity and
// config if they are new to the store, and holds both numbers for the
// handle until release.
func (r *registry) intern(l store.Limit) limitRef {
	alg := l.Algorithm
	spec := alg.Spec()
	b := make([]byte, 0, len(spec.Name)+1+8*len(spec.Params))
	b = append(append(b, spec.Name...), 0) // no name is a prefix of another's bytes
	for _, p := range spec.Params {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil {
		r.ids, r.keys, r.next = map[string]uint32{}, map[string]uint32{}, reclaimAt
	}
	if r.held >= r.next {
		r.reclaim() // unlocks mu while it scans the table
	}
	id, ok := r.ids[l.ID]
	if !ok {
		slot := idSlot{name: l.ID}
		if k := len(r.freeIDs); k > 0 {
			id = r.freeIDs[k-1]
			r.freeIDs = r.freeIDs[:k-1]
			r.names[id] = slot
		} else {
			id = uint32(len(r.names))
			r.names = append(r.names, slot)
		}
		r.ids[l.ID] = id
		r.held++
	}
	r.names[id].refs++
	r.names[id].used = r.epoch
	n, ok := r.keys[string(b)]
	if !ok {
		var cfgs []*limitConfig
		if p := r.cfgs.Load(); p != nil {
			cfgs = *p
		}
		c := &limitConfig{alg: alg, limit: alg.Limit(), spec: spec.Name, key: string(b)}
		c.tag, c.tagged = algorithm.TagOf(alg)
		_, narrow := alg.(algorithm.Narrow)
		c.wide = !narrow
		if k := len(r.freeCfgs); k > 0 {
			// Nothing reads a free number's slot: no entry holds it, and
			// its next reader learns it from this call, under mu.
			n = r.freeCfgs[k-1]
			r.freeCfgs = r.freeCfgs[:k-1]
			cfgs[n] = c
		} else {
			// Within its capacity, append writes past the length every
			// reader holds, so readers of the old list never see the write.
			n = uint32(len(cfgs))
			cfgs = append(cfgs, c)
			r.cfgs.Store(&cfgs)
		}
		r.keys[string(b)] = n
		r.held++
	}
	c := r.cfg(n)
	c.refs++
	c.used = r.epoch
	ref := limitRef{
		alg: alg, limit: c.limit, id: id, cfg: n, wide: c.wide,
		name: l.ID, rule: l.Inherit, reset: l.ResetOnMismatch,
	}
	ref.inherit, _ = alg.(algorithm.Inheritor)
	return ref
}

// release gives back the numbers intern held for a handle: pairs of an
// identity's number and a config's. It is the cleanup of a handle that
// has become garbage (see Store.Open).
func (r *registry) release(pairs []uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfgs := *r.cfgs.Load()
	for i := 0; i+1 < len(pairs); i += 2 {
		r.names[pairs[i]].refs--
		cfgs[pairs[i+1]].refs--
	}
}

// pin holds config n for a cancel that may write a state under it, when n
// still numbers c, and reports whether it did; unpin gives it back.
func (r *registry) pin(n uint32, c *limitConfig) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfgs := *r.cfgs.Load()
	if int(n) >= len(cfgs) || cfgs[n] != c {
		return false
	}
	c.refs++
	c.used = r.epoch
	return true
}

func (r *registry) unpin(n uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	(*r.cfgs.Load())[n].refs--
}

// reclaim frees the numbers that no handle and no live entry holds, and
// sets the next sweep at twice the numbers left held, or an eighth of the
// entries it looked at when that is more, so that its cost, a look at
// every entry of the table, is O(1) per number handed out. The caller
// holds mu; reclaim lets go of it while it looks at the table, where it
// waits for entries' locks, and takes it again.
//
// A number no handle holds when the sweep starts can only be acquired
// again through intern or pin, which mark it used in this sweep's epoch;
// otherwise no entry can come to hold it (only handles write entries), so
// the entries the scan found are all that hold it.
func (r *registry) reclaim() {
	if r.sweeping || r.scan == nil {
		return
	}
	r.sweeping = true
	r.epoch++
	start := r.epoch
	var cfgs []*limitConfig
	if p := r.cfgs.Load(); p != nil {
		cfgs = *p
	}
	nIDs, nCfgs := len(r.names), len(cfgs)
	idle := make([]bool, nIDs+nCfgs) // held by no handle at the start
	for i, s := range r.names {
		idle[i] = !s.free && s.refs == 0
	}
	for i, c := range cfgs {
		idle[nIDs+i] = c != nil && c.refs == 0
	}
	scan := r.scan
	r.mu.Unlock()
	looked := scan(func(id, cfg uint32) {
		if int(id) < nIDs {
			idle[id] = false
		}
		if int(cfg) < nCfgs {
			idle[nIDs+int(cfg)] = false
		}
	})
	r.mu.Lock()
	cfgs = *r.cfgs.Load()
	for i := range nIDs {
		if s := &r.names[i]; idle[i] && s.refs == 0 && s.used < start {
			delete(r.ids, s.name)
			*s = idSlot{free: true}
			r.freeIDs = append(r.freeIDs, uint32(i))
			r.held--
		}
	}
	for i := range nCfgs {
		if c := cfgs[i]; idle[nIDs+i] && c.refs == 0 && c.used < start {
			delete(r.keys, c.key)
			cfgs[i] = nil
			r.freeCfgs = append(r.freeCfgs, uint32(i))
			r.held--
		}
	}
	r.next = max(reclaimAt, 2*r.held, looked/8)
	r.sweeping = false
}

// liveIDs returns the identity numbers in use (not free).
func (r *registry) liveIDs() []uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]uint32, 0, len(r.ids))
	for _, id := range r.ids {
		ids = append(ids, id)
	}
	return ids
}

// numbers returns how many identity and config numbers r holds (handed
// out and not freed), for tests.
func (r *registry) numbers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// releaseOnCleanup makes the garbage collector give back the numbers of
// refs once table, a handle holding them, is garbage.
func releaseOnCleanup[T any](r *registry, table *T, refs []limitRef) {
	pairs := make([]uint32, 0, 2*len(refs))
	for _, l := range refs {
		pairs = append(pairs, l.id, l.cfg)
	}
	runtime.AddCleanup(table, r.release, pairs)
}

// describe names c's algorithm in words, for errors (algorithm.Describe).
func (c *limitConfig) describe() string {
	if c.alg != nil {
		return algorithm.Describe(c.alg)
	}
	return c.spec
}
