package memorystore

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/keyhash"
	"github.com/go-ratelimit/ratelimit/store"
)

// table keeps a store's state: one entry per (identity, key), the state
// of one limit for one key, whichever handle (see handle) wrote it. An
// entry holds the first two words of its state (see arena for the rest),
// the number of its identity and that of the config that wrote it (see
// registry).
//
// Entries live in an arena, in the order their keys were first seen, and
// are found through an index per shard (see index), by a hash of the key
// mixed with the identity's number. Each entry carries its own lock, its
// identity, its key and the hash of both, and its state.
//
// A decision takes no shard-wide lock: it reads the shard's index without
// locking, locks the entry a word points to and checks that the entry is
// live and holds the identity and the key. The index is only a hint:
// writers (new keys, sweeps, Reset, growth), which hold the shard's mutex,
// may rewrite its words at any time, and a reader that finds nothing takes
// the shard's mutex and looks again before concluding that the key has no
// state. So nothing shared is written on the way to a decision but the
// key's own entry. Locks are taken shard first, then entry; a holder of
// several entry locks (a handle of several limits) takes them in
// increasing order of identity number and never waits for a shard's
// mutex while it holds one.
type table[K comparable] struct {
	reg      *registry
	hash     keyhash.Hasher[K]
	shards   []shard[K]
	shift    uint  // a key's hash >> shift is its shard
	shardCap int   // the most keys a shard holds
	grace    int64 // µs
	arena    arena[K]
	full     FullPolicy
	errFull  error // wraps store.ErrFull
	// stringKeys is set when K is a string kind, whose keys are at most
	// maxKeyBytes long (else errLong, which wraps store.ErrKeyTooLong).
	stringKeys  bool
	maxKeyBytes int
	errLong     error
	evicted     atomic.Uint64
	dropped     atomic.Uint64
	refused     atomic.Uint64
	census      census[K]
	// gens numbers the generations of booked states (see arena).
	gens atomic.Uint64
}

// entry is the state of one identity for one key. It is live while its
// index word is in its shard's index; a dropped entry is not live until
// it is reused. When the state expires is not kept: sweeps, which are
// rare, work it out from the state (algorithm.Expiry, under the config
// that wrote it), so that a decision writes nothing but the state.
type entry[K comparable] struct {
	mu spinlock
	// meta is liveBit and the hash of the identity and key (hashMask of
	// it) while the entry is live, 0 while it is not. It changes under
	// both the shard's lock and the entry's, so either makes it stand
	// still; readers holding neither take it as a hint. Writers find a
	// word's home from it.
	meta atomic.Uint32
	// id is the number of the entry's identity. It changes with meta;
	// readers compare it before they lock, so that a holder of several
	// entry locks locks only entries of the identity it looks for.
	id atomic.Uint32
	// cfg is the number of the config that wrote the state, under the
	// entry's lock.
	cfg uint32
	// n0 and n1 are the state's N0 and N1 (see arena for the rest), next
	// to the lock that guards them.
	n0, n1 int64
	// denial, when set, holds the key's standing denial of a cost of 1,
	// for decisions that read it without locking the entry.
	denial atomic.Pointer[standingDenial[K]]
	key    K
}

// state returns entry n's state, as a config that is wide or not keeps it.
// The caller holds e's lock, e being entry n.
func (t *table[K]) state(e *entry[K], n uint32, wide bool) algorithm.State {
	s := algorithm.State{N0: e.n0, N1: e.n1}
	if wide {
		if w := t.arena.wideOf(n); w != nil {
			s.N2, s.Log = w.n2, w.log
		}
	}
	return s
}

// keep makes s entry n's state, written by a config that is wide or not.
// The caller holds e's lock, e being entry n. A narrow algorithm's state
// is all in n0 and n1.
func (t *table[K]) keep(e *entry[K], n uint32, wide bool, s algorithm.State) {
	e.n0, e.n1 = s.N0, s.N1
	if wide {
		w := t.arena.makeWide(n)
		w.n2, w.log = s.N2, s.Log
	}
}

// An entry's meta: liveBit, and the 31 bits of the key's hash a table
// uses (for its index position and tag).
const (
	liveBit  = 1 << 31
	hashMask = liveBit - 1
)

// standingDenial is a key's standing denial of a cost of 1: from the instant it
// was decided until until, every cost is denied and nothing is charged, so
// the state cannot change, and the answer to a cost of 1 at any instant
// before until is known: nothing remains, retry at until, fresh at reset.
// (Every algorithm names instants in its RetryAfter and ResetAfter that do
// not depend on when they are asked; a clock that steps back finds the key
// no freer.) Only a Take that admits, which cannot happen before until
// unless the clock steps back, or a Reset changes that; both retire it.
//
// It lets an abusive client hammering one key be answered by reads alone:
// the entry's cache line stays shared between cores instead of bouncing
// from lock to lock. key never changes, so a reader that finds the record
// on an entry checks it holds its key without the entry's lock; the
// instants change under seq, odd while they are rewritten.
type standingDenial[K comparable] struct {
	key          K
	seq          atomic.Uint64
	until, reset atomic.Int64  // Unix µs; until is math.MinInt64 when retired
	cfg          atomic.Uint32 // the config of the handle that computed it
	id           uint32        // the entry's identity, which never changes either
}

// standing returns the answer d holds for a cost of 1 at now, for a handle
// whose config is cfg, if it holds one: ok is false when d is retired,
// past, being rewritten, or computed under another config (which may read
// the state otherwise). A denial is recorded only by the config that
// wrote the state, whose reading of it does not depend on the instant.
func (d *standingDenial[K]) standing(now int64, cfg uint32) (r algorithm.Result, ok bool) {
	seq := d.seq.Load()
	until, reset, by := d.until.Load(), d.reset.Load(), d.cfg.Load()
	if seq&1 != 0 || d.seq.Load() != seq || now >= until || by != cfg {
		return r, false
	}
	return algorithm.Result{RetryAfter: until - now, ResetAfter: reset - now}, true
}

// set makes d stand until and reset, for config cfg. The caller holds the
// entry's lock.
func (d *standingDenial[K]) set(until, reset int64, cfg uint32) {
	d.seq.Add(1)
	d.until.Store(until)
	d.reset.Store(reset)
	d.cfg.Store(cfg)
	d.seq.Add(1)
}

// deny records r, a denial of a cost of 1 for e's key at now under config
// cfg. The caller holds e's lock. The record is made on a key's first
// denial and reused for its later ones, until the entry is dropped.
func (e *entry[K]) deny(now int64, r algorithm.Result, cfg uint32) {
	d := e.denial.Load()
	if d == nil {
		d = &standingDenial[K]{key: e.key, id: e.id.Load()}
		d.until.Store(now + r.RetryAfter)
		d.reset.Store(now + r.ResetAfter)
		d.cfg.Store(cfg)
		e.denial.Store(d)
		return
	}
	d.set(now+r.RetryAfter, now+r.ResetAfter, cfg)
}

// admitted retires e's standing denial, if any, after a cost was charged
// to e. The caller holds e's lock.
func (e *entry[K]) admitted() {
	if d := e.denial.Load(); d != nil && d.until.Load() != math.MinInt64 {
		d.set(math.MinInt64, 0, 0)
	}
}

type shard[K comparable] struct {
	mu    sync.Mutex // serialises the shard's writers
	index atomic.Pointer[index]
	keys  int      // live entries
	free  []uint32 // entries this shard dropped, for its new keys
	added int      // keys added since the last sweep
	every int      // keys added from one sweep to the next
	soon  int64    // no live entry expires before this instant (Unix µs)
	_     [shardPad]byte
}

// shardPad makes a shard two cache lines long, so that shards written by
// different goroutines never share a line.
const shardPad = 128 - unsafe.Sizeof(struct {
	mu           sync.Mutex
	index        atomic.Pointer[index]
	keys         int
	free         []uint32
	added, every int
	soon         int64
}{})

// sweepMin is the fewest keys added between two sweeps of a shard, so
// small shards do not sweep on every new key.
const sweepMin = 64

func newTable[K comparable](reg *registry, shards, maxKeys int, grace int64) *table[K] {
	t := &table[K]{
		reg:    reg,
		hash:   keyhash.New[K](),
		shards: make([]shard[K], shards),
		shift:  64,
		grace:  grace,
	}
	for n := shards; n > 1; n >>= 1 {
		t.shift--
	}
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	maxKeys = min(maxKeys, MaxKeys)
	// A shard numbers at most shardCap entries, live or free to reuse
	// (it reuses before it allocates), so the arena never numbers more
	// than MaxKeys.
	t.shardCap = maxKeys / shards
	t.census = newCensus[K](maxKeys)
	for i := range t.shards {
		sh := &t.shards[i]
		sh.index.Store(newIndex(minIndex))
		sh.soon = math.MaxInt64
		sh.every = sweepMin
	}
	t.errFull = fmt.Errorf("%w: the memory store holds its cap of %d keys (WithMaxKeys) and refuses new ones (RefuseNewKeys)",
		store.ErrFull, t.shardCap*shards)
	t.limitKeyBytes(store.DefaultMaxKeyBytes)
	return t
}

// limitKeyBytes makes max the longest string key t keeps, when K is a
// string kind.
func (t *table[K]) limitKeyBytes(max int) {
	t.stringKeys = reflect.TypeFor[K]().Kind() == reflect.String
	t.maxKeyBytes = max
	t.errLong = fmt.Errorf("%w: the memory store keeps keys of at most %d bytes (WithMaxKeyBytes)", store.ErrKeyTooLong, max)
}

// tooLong reports whether key is a string longer than t keeps. The
// string is read in place: a K whose kind is string has a string's layout.
func (t *table[K]) tooLong(key *K) bool {
	return t.stringKeys && len(*(*string)(unsafe.Pointer(key))) > t.maxKeyBytes
}

// place returns the shard of identity id's state for a key whose hash
// (keyhash) is h, and the hash an entry keeps (hashMask of it): h mixed
// with id by one multiply-xor, so that one key's identities fall in
// unrelated places.
func (t *table[K]) place(h uint64, id uint32) (*shard[K], uint32) {
	h ^= mix(id)
	return &t.shards[h>>t.shift], uint32(h) & hashMask
}

// mix is what place mixes into a key's hash for identity id.
func mix(id uint32) uint64 { return (uint64(id) + 1) * 0x9e3779b97f4a7c15 }

// lookup returns the entry of id and key, locked, and its number, or nil
// when the shard's index, read without the shard's lock, does not lead to
// it.
func (t *table[K]) lookup(sh *shard[K], id uint32, key K, hash uint32) (*entry[K], uint32) {
	e, n, _, _ := t.find(sh, id, key, hash, 0, false, 0)
	return e, n
}

// find is lookup that, when standing is set, first answers a cost of 1 at
// now from a denial that a handle of config cfg left standing on the
// entry, without locking it: answered is then set and e is nil.
func (t *table[K]) find(sh *shard[K], id uint32, key K, hash uint32, now int64, standing bool, cfg uint32) (e *entry[K], n uint32, r algorithm.Result, answered bool) {
	ix := sh.index.Load()
	tag, meta := tagOf(hash), liveBit|hash
	for i, pos := uint32(0), hash&ix.mask; i <= ix.mask; i, pos = i+1, (pos+1)&ix.mask {
		w := ix.words[pos].Load()
		if w == 0 {
			return nil, 0, r, false
		}
		if wordTag(w) != tag {
			continue
		}
		n := wordEntry(w)
		e := t.arena.at(n)
		if e.meta.Load() != meta || e.id.Load() != id {
			continue // another key's, or no key's: not worth its lock
		}
		if standing {
			if d := e.denial.Load(); d != nil && d.key == key && d.id == id {
				if r, ok := d.standing(now, cfg); ok {
					return nil, 0, r, true
				}
			}
		}
		e.mu.Lock()
		if e.meta.Load() == meta && e.id.Load() == id && e.key == key {
			return e, n, r, false
		}
		e.mu.Unlock()
	}
	return nil, 0, r, false
}

// locate returns the position of the word of id and key in sh's index.
// The caller holds sh.mu, under which the index is exact and keys do not
// change.
func (t *table[K]) locate(sh *shard[K], id uint32, key K, hash uint32) (uint32, bool) {
	ix := sh.index.Load()
	tag, meta := tagOf(hash), liveBit|hash
	for i, pos := uint32(0), hash&ix.mask; i <= ix.mask; i, pos = i+1, (pos+1)&ix.mask {
		w := ix.words[pos].Load()
		if w == 0 {
			return 0, false
		}
		if wordTag(w) != tag {
			continue
		}
		if e := t.arena.at(wordEntry(w)); e.meta.Load() == meta && e.id.Load() == id && e.key == key {
			return pos, true
		}
	}
	return 0, false
}

// insert returns the entry of l's identity and key, locked, and its
// number: the one another goroutine added meanwhile, or a new one holding
// l's fresh state at now. It returns nil and an error when the shard is
// full and refuses new keys (t.errFull), or when the key holds
// store.MaxStatesPerKey states (see census).
//
// A refused key counts as added for the pacing of sweeps, so that a
// table that refuses a flood still finds the keys that expire.
func (t *table[K]) insert(sh *shard[K], l *limitRef, key K, hash uint32, now int64) (*entry[K], uint32, error) {
	e, n, _, err := t.insertNew(sh, l, key, hash, now)
	return e, n, err
}

// insertNew is insert that also reports whether the entry is new: made by
// this call, holding l's fresh state at now.
func (t *table[K]) insertNew(sh *shard[K], l *limitRef, key K, hash uint32, now int64) (*entry[K], uint32, bool, error) {
	for {
		e, n, busy := t.held(sh, l.id, key, hash)
		if e != nil {
			return e, n, false, nil
		}
		if !busy {
			e, n, err := t.add(sh, l, key, hash, now)
			sh.mu.Unlock()
			return e, n, e != nil, err
		}
		// Another goroutine holds the entry: wait for it without the
		// shard's mutex.
		if e, n := t.lookup(sh, l.id, key, hash); e != nil {
			return e, n, false, nil
		}
	}
}

// held looks for the entry of id and key under sh.mu, exactly. It returns
// the entry, locked, and its number, with sh.mu unlocked; or nil and
// busy when the entry exists but its lock is taken, with sh.mu unlocked;
// or nil and not busy when there is no such entry, with sh.mu locked.
// The holder of a shard's mutex never waits for an entry's lock (see
// table).
func (t *table[K]) held(sh *shard[K], id uint32, key K, hash uint32) (e *entry[K], n uint32, busy bool) {
	sh.mu.Lock()
	pos, ok := t.locate(sh, id, key, hash)
	if !ok {
		return nil, 0, false
	}
	n = wordEntry(sh.index.Load().words[pos].Load())
	e = t.arena.at(n)
	if e.mu.TryLock() {
		sh.mu.Unlock()
		return e, n, false
	}
	sh.mu.Unlock()
	return nil, 0, true
}

// confirm returns the entry of id and key, locked, and its number, or nil
// when there is none: a lookup that does not take a miss of the index,
// read without the shard's mutex, for an answer.
func (t *table[K]) confirm(sh *shard[K], id uint32, key K, hash uint32) (*entry[K], uint32) {
	for {
		e, n, busy := t.held(sh, id, key, hash)
		if e != nil {
			return e, n
		}
		if !busy {
			sh.mu.Unlock()
			return nil, 0
		}
		if e, n := t.lookup(sh, id, key, hash); e != nil {
			return e, n
		}
	}
}

// add makes the entry of l's identity and key, which sh does not hold,
// and returns it, locked, and its number: nil and an error when sh is
// full and refuses new keys, or the key holds store.MaxStatesPerKey
// states. The caller holds sh.mu.
func (t *table[K]) add(sh *shard[K], l *limitRef, key K, hash uint32, now int64) (*entry[K], uint32, error) {
	if err := t.census.room(key, t.bucket(hash, l.id), func() int32 { return t.statesOf(key, t.hash.Sum(key)) }); err != nil {
		return nil, 0, err
	}
	if sh.added++; sh.added >= sh.every {
		t.sweep(sh, now)
	}
	if sh.keys >= t.shardCap && !t.makeRoom(sh, now) {
		t.refused.Add(1)
		return nil, 0, t.errFull
	}
	var n uint32
	if k := len(sh.free); k > 0 {
		n = sh.free[k-1]
		sh.free = sh.free[:k-1]
	} else {
		n = t.arena.alloc()
	}
	e := t.arena.at(n)
	e.mu.Lock()
	e.meta.Store(liveBit | hash)
	e.id.Store(l.id)
	e.cfg = l.cfg
	e.key = key
	t.arena.unnumber(n) // a state is born
	// Init may reuse the log a dropped key left in the entry.
	t.keep(e, n, l.wide, l.alg.Init(t.state(e, n, l.wide), now))
	sh.soon = min(sh.soon, now) // a fresh state expires at once
	ix := sh.index.Load()
	if (sh.keys+1)*4 > len(ix.words)*3 {
		ix = ix.grown(&t.arena)
		sh.index.Store(ix)
	}
	ix.add(hash, n)
	sh.keys++
	t.census.added(key, t.bucket(hash, l.id))
	return e, n, nil
}

// drop forgets the key whose word is at pos in sh's index. The caller
// holds sh.mu and the entry's lock, which drop unlocks. The entry keeps its log, when that is small, for the next
// key that reuses it, so that a sliding log does not allocate again.
func (t *table[K]) drop(sh *shard[K], pos uint32) {
	ix := sh.index.Load()
	n := wordEntry(ix.words[pos].Load())
	e := t.arena.at(n)
	t.census.dropped(e.key, t.bucket(e.meta.Load()&hashMask, e.id.Load()))
	e.meta.Store(0)
	e.denial.Store(nil)
	if w := t.arena.wideOf(n); w != nil {
		forgetLargeLog(&w.log)
	}
	var zero K
	e.key = zero // holds no memory of the key
	e.mu.Unlock()
	ix.remove(pos, &t.arena)
	sh.free = append(sh.free, n)
	sh.keys--
}

// keptLog is the most entries a dropped key's log may hold for reuse.
const keptLog = 64

// forgetLargeLog lets go of *log when it holds more than keptLog.
func forgetLargeLog(log **algorithm.Log) {
	if *log != nil && cap((*log).Entries) > keptLog {
		*log = nil
	}
}

// expiry returns the instant entry n, e, is fresh (see algorithm.Expiry),
// under the config that wrote its state: a bucket's expiry depends on its
// rate, which its Tag does not hold. The caller holds e's lock.
func (t *table[K]) expiry(e *entry[K], n uint32, at int64) int64 {
	c := t.reg.cfg(e.cfg)
	return algorithm.Expiry(c.alg, t.state(e, n, c.wide), at)
}

// sweep drops the keys whose state expired at least the grace period ago.
// A shard sweeps itself once it has gained as many new keys as it kept at
// its last sweep (at least sweepMin): memory is reclaimed as the shard
// grows, a sweep visits at most as many keys as were added since the last
// (O(1) per new key, amortised), and a steady set of keys is never swept.
// No key is visited while none can qualify.
func (t *table[K]) sweep(sh *shard[K], now int64) {
	sh.added = 0
	if cut := now - t.grace; sh.soon <= cut {
		t.dropExpired(sh, cut)
	}
	sh.every = max(sweepMin, sh.keys)
}

// dropExpired drops the keys of sh whose state expired at or before cut.
// The caller holds sh.mu.
func (t *table[K]) dropExpired(sh *shard[K], cut int64) {
	ix := sh.index.Load()
	kept := sh.keys
	sh.soon = math.MaxInt64
	// Removing a word shifts later words of its run back into its place,
	// so the position is examined again rather than passed. The entries
	// of the next words are read ahead, without their locks, so that the
	// reads of entries scattered over memory overlap (see makeRoom).
	ahead := 0
	for pos := 0; pos < len(ix.words); {
		if pos >= ahead {
			for ahead = pos; ahead < min(pos+sampleSize, len(ix.words)); ahead++ {
				if w := ix.words[ahead].Load(); w != 0 {
					t.arena.at(wordEntry(w)).meta.Load()
				}
			}
		}
		w := ix.words[pos].Load()
		if w == 0 {
			pos++
			continue
		}
		n := wordEntry(w)
		e := t.arena.at(n)
		if !e.mu.TryLock() { // in use: not to be dropped now
			sh.soon = min(sh.soon, cut)
			pos++
			continue
		}
		if expires := t.expiry(e, n, cut); expires <= cut {
			t.drop(sh, uint32(pos))
			continue
		} else {
			sh.soon = min(sh.soon, expires)
		}
		e.mu.Unlock()
		pos++
	}
	t.dropped.Add(uint64(kept - sh.keys))
}

// sampleSize is how many live keys a full shard looks at to make room
// for a new key.
const sampleSize = 16

// makeRoom makes room in sh, at its cap, for one more key, in O(1): it
// looks at the keys of sampleSize consecutive live words of the index from
// a random position (positions are a hash of the key, secret to the
// process, so the sample is random), drops those whose state has expired,
// and if none had, evicts the sampled key whose loss admits least, or,
// under RefuseNewKeys, returns false. The caller holds sh.mu.
func (t *table[K]) makeRoom(sh *shard[K], now int64) bool {
	// A sample whose every entry is in use (locked) has no victim: look
	// at another few times before refusing the key.
	for range 4 {
		if room, tried := t.makeRoomOnce(sh, now); tried {
			return room
		}
	}
	return false
}

// makeRoomOnce is one try of makeRoom: tried is false when every entry it
// sampled was in use.
func (t *table[K]) makeRoomOnce(sh *shard[K], now int64) (room, tried bool) {
	// First the entries' numbers, each entry read once without its lock:
	// the reads of entries scattered over memory then overlap, where the
	// locks, each a fence, would wait for them one at a time.
	var sample [sampleSize]uint32
	ix := sh.index.Load()
	found := 0
	for i, pos := uint32(0), rand.Uint32()&ix.mask; i <= ix.mask && found < sampleSize; i, pos = i+1, (pos+1)&ix.mask {
		if w := ix.words[pos].Load(); w != 0 {
			sample[found] = wordEntry(w)
			t.arena.at(sample[found]).meta.Load()
			found++
		}
	}
	// Entries whose lock is taken are in use, and left out. The victim
	// stays locked until it is evicted or a better one is found.
	var (
		expired int
		victim  *entry[K] // the entry to evict, locked
		vn      uint32    // its number
		most    float64   // its room
		soonest int64     // when it is fresh again, from now
	)
	for _, n := range sample[:found] {
		e := t.arena.at(n)
		if !e.mu.TryLock() {
			continue
		}
		room, reset := t.room(e, n, now)
		if reset <= 0 { // fresh: dropping it loses nothing
			t.dropEntry(sh, n)
			expired++
			continue
		}
		if victim == nil || room > most || room == most && reset < soonest {
			if victim != nil {
				victim.mu.Unlock()
			}
			victim, vn, most, soonest = e, n, room, reset
			continue
		}
		e.mu.Unlock()
	}
	if expired > 0 || victim == nil || t.full == RefuseNewKeys {
		if victim != nil {
			victim.mu.Unlock()
		}
		t.dropped.Add(uint64(expired))
		return expired > 0, expired > 0 || victim != nil
	}
	t.dropEntry(sh, vn)
	t.evicted.Add(1)
	return true, true
}

// dropEntry forgets the key of entry n, live in sh. The caller holds
// sh.mu and the entry's lock, which dropEntry unlocks.
func (t *table[K]) dropEntry(sh *shard[K], n uint32) {
	ix := sh.index.Load()
	pos := t.arena.hashOf(n) & ix.mask
	for wordEntry(ix.words[pos].Load()) != n {
		pos = (pos + 1) & ix.mask
	}
	t.drop(sh, pos)
}

// room returns how much room entry n, e, has left at now, as the fraction
// of its limit left, so that a limit of 10 weighs as much as a limit of a
// million, and how long from now until it is fresh (0 when it is), under
// the config that wrote its state. The caller holds e's lock.
func (t *table[K]) room(e *entry[K], n uint32, now int64) (room float64, reset int64) {
	c := t.reg.cfg(e.cfg)
	r := c.alg.Peek(t.state(e, n, c.wide), now, 1)
	return float64(r.Remaining) / float64(c.limit), r.ResetAfter
}

// liveNumbers calls mark with the identity and config numbers of every
// live entry, each read under the entry's lock, and returns how many
// entries it looked at: the registry's reclaim. The caller holds no lock:
// it waits for each entry's.
func (t *table[K]) liveNumbers(mark func(id, cfg uint32)) int {
	p := t.arena.pages.Load()
	if p == nil {
		return 0
	}
	pages := *p
	for _, pg := range pages {
		for i := range pg.entries {
			e := &pg.entries[i]
			if e.meta.Load() == 0 {
				continue // not live; one made meanwhile is its handle's
			}
			e.mu.Lock()
			if e.meta.Load() != 0 {
				mark(e.id.Load(), e.cfg)
			}
			e.mu.Unlock()
		}
	}
	return len(pages) * pageSize
}
