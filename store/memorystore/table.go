package memorystore

import (
	"context"
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

// table keeps its limits' state per key: the first limit's in the key's
// entry (the first two words of it; see arena for the rest), the others'
// beside it in the arena. A table of one limit, the common case, has a
// fast path of its own.
//
// Entries live in an arena, in the order their keys were first seen, and
// are found through an index per shard (see index). Each entry carries its
// own lock, its key and the key's hash, and its state.
//
// A decision takes no shard-wide lock: it reads the shard's index without
// locking, locks the entry a word points to and checks that the entry is
// live and holds the key. The index is only a hint: writers (new keys,
// sweeps, Reset, growth), which hold the shard's mutex, may rewrite its
// words at any time, and a reader that finds nothing takes the shard's
// mutex and looks again before concluding that the key has no state. So
// nothing shared is written on the way to a decision but the key's own
// entry. Locks are taken shard first, then entry.
type table[K comparable] struct {
	alg      algorithm.Algorithm   // the first limit's
	others   []algorithm.Algorithm // the other limits', nil for one limit
	narrow   []bool                // which of others are algorithm.Narrow
	limit    int64                 // the first limit's
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
}

// entry is one key's state. It is live while its index word is in its
// shard's index; a dropped entry is not live until it is reused. When the
// state expires is not kept: sweeps, which are rare, work it out from the
// state (algorithm.Expiry), so that a decision writes nothing but the
// state.
type entry[K comparable] struct {
	mu spinlock
	// meta is liveBit and the key's hash (hashMask of it) while the entry
	// is live, 0 while it is not. It changes under both the shard's lock
	// and the entry's, so either makes it stand still; readers holding
	// neither take it as a hint. Writers find a word's home from it.
	meta atomic.Uint32
	// n0 and n1 are the first limit's state's N0 and N1 (see arena for
	// the rest), next to the lock that guards them.
	n0, n1 int64
	// denial, when set, holds the key's standing denial of a cost of 1,
	// for decisions that read it without locking the entry.
	denial atomic.Pointer[denial[K]]
	key    K
}

// state returns entry n's state under the first limit. The caller holds
// e's lock, e being entry n.
func (t *table[K]) state(e *entry[K], n uint32) algorithm.State {
	s := algorithm.State{N0: e.n0, N1: e.n1}
	if t.arena.wide {
		w := t.arena.wideOf(n)
		s.N2, s.Log = w.n2, w.log
	}
	return s
}

// keep makes s entry n's state under the first limit. The caller holds
// e's lock, e being entry n. A narrow algorithm's state is all in n0 and
// n1.
func (t *table[K]) keep(e *entry[K], n uint32, s algorithm.State) {
	e.n0, e.n1 = s.N0, s.N1
	if t.arena.wide {
		w := t.arena.wideOf(n)
		w.n2, w.log = s.N2, s.Log
	}
}

// An entry's meta: liveBit, and the 31 bits of the key's hash a table
// uses (for its index position and tag).
const (
	liveBit  = 1 << 31
	hashMask = liveBit - 1
)

// denial is a key's standing denial of a cost of 1: from the instant it
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
type denial[K comparable] struct {
	key          K
	seq          atomic.Uint64
	until, reset atomic.Int64 // Unix µs; until is math.MinInt64 when retired
}

// standing returns the answer d holds for a cost of 1 at now, if it holds
// one: ok is false when d is retired, past, or being rewritten.
func (d *denial[K]) standing(now int64) (r algorithm.Result, ok bool) {
	seq := d.seq.Load()
	until, reset := d.until.Load(), d.reset.Load()
	if seq&1 != 0 || d.seq.Load() != seq || now >= until {
		return r, false
	}
	return algorithm.Result{RetryAfter: until - now, ResetAfter: reset - now}, true
}

// set makes d stand until and reset. The caller holds the entry's lock.
func (d *denial[K]) set(until, reset int64) {
	d.seq.Add(1)
	d.until.Store(until)
	d.reset.Store(reset)
	d.seq.Add(1)
}

// deny records r, a denial of a cost of 1 for e's key at now. The caller
// holds e's lock. The record is made on a key's first denial and reused
// for its later ones, until the entry is dropped.
func (e *entry[K]) deny(now int64, r algorithm.Result) {
	d := e.denial.Load()
	if d == nil {
		d = &denial[K]{key: e.key}
		d.until.Store(now + r.RetryAfter)
		d.reset.Store(now + r.ResetAfter)
		e.denial.Store(d)
		return
	}
	d.set(now+r.RetryAfter, now+r.ResetAfter)
}

// admitted retires e's standing denial, if any, after Take admitted a
// cost. The caller holds e's lock.
func (e *entry[K]) admitted() {
	if d := e.denial.Load(); d != nil && d.until.Load() != math.MinInt64 {
		d.set(math.MinInt64, 0)
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

func newTable[K comparable](algs []algorithm.Algorithm, shards, maxKeys int, grace int64) *table[K] {
	t := &table[K]{
		alg:    algs[0],
		limit:  algs[0].Limit(),
		hash:   keyhash.New[K](),
		shards: make([]shard[K], shards),
		shift:  64,
		grace:  grace,
	}
	_, narrow := algs[0].(algorithm.Narrow)
	t.arena.wide = !narrow
	if len(algs) > 1 {
		t.others = algs[1:]
		t.arena.extra = len(t.others)
		t.narrow = make([]bool, len(t.others))
		for i, alg := range t.others {
			_, t.narrow[i] = alg.(algorithm.Narrow)
		}
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
	for i := range t.shards {
		sh := &t.shards[i]
		sh.index.Store(newIndex(minIndex))
		sh.soon = math.MaxInt64
		sh.every = sweepMin
	}
	t.errFull = fmt.Errorf("%w: the memory table holds its cap of %d keys (WithMaxKeys) and refuses new ones (RefuseNewKeys)",
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

func (t *table[K]) Take(_ context.Context, key K, now, cost int64, out []algorithm.Result) (r algorithm.Result, _ error) {
	if t.tooLong(&key) {
		return r, t.errLong
	}
	h := t.hash.Sum(key)
	sh, hash := &t.shards[h>>t.shift], uint32(h)&hashMask
	if t.others != nil {
		return t.takeAll(sh, key, hash, now, cost, out)
	}
	e, n, r, answered := t.find(sh, key, hash, now, cost == 1)
	if !answered {
		if e == nil {
			if e, n = t.insert(sh, key, hash, now); e == nil {
				return r, t.errFull
			}
		}
		var s algorithm.State
		s, r = t.alg.Take(t.state(e, n), now, cost)
		t.keep(e, n, s)
		switch {
		case r.Allowed():
			e.admitted()
		case cost == 1:
			e.deny(now, r)
		}
		e.mu.Unlock()
	}
	if out != nil {
		out[0] = r
	}
	return r, nil
}

// takeAll is Take for a table of several limits: the cost is charged to
// every limit if all of them admit it, and to none otherwise.
//
// A narrow limit's Take changes nothing it is given (its state has no
// Log), so such a limit takes the cost on a copy of its state at once, and
// the copy is kept only if every limit admitted the cost. Any other limit
// first peeks (Peek admits exactly what Take would: the Algorithm
// contract), and takes only once all have admitted. When the cost is
// refused, a narrow limit that admitted it on its copy reports Peek
// instead, its state as it stands, since nothing was charged. So the
// common route, token buckets and fixed windows, decides in one pass.
func (t *table[K]) takeAll(sh *shard[K], key K, hash uint32, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	e, n, _, _ := t.find(sh, key, hash, now, false)
	if e == nil {
		if e, n = t.insert(sh, key, hash, now); e == nil {
			return algorithm.Result{}, t.errFull
		}
	}
	more := t.arena.more(n)
	var buf [4]algorithm.Result
	rs := t.results(out, buf[:])
	var copies [3]algorithm.State // the others' states charged, when narrow
	taken := copies[:]
	if len(more) > len(copies) {
		taken = make([]algorithm.State, len(more))
	}
	old := t.state(e, n)
	var first algorithm.State
	if t.arena.wide {
		rs[0] = t.alg.Peek(old, now, cost)
	} else {
		first, rs[0] = t.alg.Take(old, now, cost)
	}
	all := rs[0].Allowed()
	for i, alg := range t.others {
		if t.narrow[i] {
			taken[i], rs[i+1] = alg.Take(more[i], now, cost)
		} else {
			rs[i+1] = alg.Peek(more[i], now, cost)
		}
		all = all && rs[i+1].Allowed()
	}
	switch {
	case all:
		if t.arena.wide {
			first, rs[0] = t.alg.Take(old, now, cost)
		}
		t.keep(e, n, first)
		for i, alg := range t.others {
			if t.narrow[i] {
				more[i] = taken[i]
			} else {
				more[i], rs[i+1] = alg.Take(more[i], now, cost)
			}
		}
	default: // refused: the narrow limits that admitted it on a copy report their state
		if !t.arena.wide && rs[0].Allowed() {
			rs[0] = t.alg.Peek(old, now, cost)
		}
		for i, alg := range t.others {
			if t.narrow[i] && rs[i+1].Allowed() {
				rs[i+1] = alg.Peek(more[i], now, cost)
			}
		}
	}
	e.mu.Unlock()
	return algorithm.Combine(rs), nil
}

// results returns out, or when it is nil room for one result per limit:
// buf when it is long enough.
func (t *table[K]) results(out, buf []algorithm.Result) []algorithm.Result {
	n := 1 + len(t.others)
	if out != nil {
		return out
	}
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]algorithm.Result, n)
}

// reportDenial unlocks e, which the caller locked, and returns Peek of its
// state for a cost of 1 at now, computed under the lock so that a denial
// is also recorded on e: the next requests are answered without the lock
// until it is over.
func (t *table[K]) reportDenial(e *entry[K], n uint32, now int64) algorithm.Result {
	r := t.alg.Peek(t.state(e, n), now, 1)
	if !r.Allowed() {
		e.deny(now, r)
	}
	e.mu.Unlock()
	return r
}

func (t *table[K]) Peek(_ context.Context, key K, now int64, out []algorithm.Result) (r algorithm.Result, _ error) {
	if t.tooLong(&key) {
		return r, t.errLong
	}
	h := t.hash.Sum(key)
	sh, hash := &t.shards[h>>t.shift], uint32(h)&hashMask
	if t.others != nil {
		return t.peekAll(sh, key, hash, now, out), nil
	}
	e, n, r, answered := t.find(sh, key, hash, now, true)
	if !answered {
		if e == nil {
			sh.mu.Lock()
			e, n = t.lookup(sh, key, hash)
			sh.mu.Unlock()
		}
		if e == nil {
			r = algorithm.Fresh(t.limit)
		} else {
			r = t.reportDenial(e, n, now)
		}
	}
	if out != nil {
		out[0] = r
	}
	return r, nil
}

// peekAll is Peek for a table of several limits.
func (t *table[K]) peekAll(sh *shard[K], key K, hash uint32, now int64, out []algorithm.Result) algorithm.Result {
	e, n, _, _ := t.find(sh, key, hash, now, false)
	if e == nil {
		sh.mu.Lock()
		e, n = t.lookup(sh, key, hash)
		sh.mu.Unlock()
	}
	var buf [4]algorithm.Result
	rs := t.results(out, buf[:])
	if e == nil {
		rs[0] = algorithm.Fresh(t.limit)
		for i, alg := range t.others {
			rs[i+1] = algorithm.Fresh(alg.Limit())
		}
		return algorithm.Combine(rs)
	}
	more := t.arena.more(n)
	rs[0] = t.alg.Peek(t.state(e, n), now, 1)
	for i, alg := range t.others {
		rs[i+1] = alg.Peek(more[i], now, 1)
	}
	e.mu.Unlock()
	return algorithm.Combine(rs)
}

func (t *table[K]) Reset(_ context.Context, key K) error {
	if t.tooLong(&key) {
		return t.errLong
	}
	h := t.hash.Sum(key)
	sh, hash := &t.shards[h>>t.shift], uint32(h)&hashMask
	sh.mu.Lock()
	if pos, ok := t.locate(sh, key, hash); ok {
		t.drop(sh, pos)
	}
	sh.mu.Unlock()
	return nil
}

// lookup returns key's entry, locked, and its number, or nil when the
// shard's index, read without the shard's lock, does not lead to it.
func (t *table[K]) lookup(sh *shard[K], key K, hash uint32) (*entry[K], uint32) {
	e, n, _, _ := t.find(sh, key, hash, 0, false)
	return e, n
}

// find is lookup that, when standing is set, first answers a cost of 1 at
// now from a denial standing on key's entry, without locking it: answered
// is then set and e is nil.
func (t *table[K]) find(sh *shard[K], key K, hash uint32, now int64, standing bool) (e *entry[K], n uint32, r algorithm.Result, answered bool) {
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
		if e.meta.Load() != meta {
			continue // another key's, or no key's: not worth its lock
		}
		if standing {
			if d := e.denial.Load(); d != nil && d.key == key {
				if r, ok := d.standing(now); ok {
					return nil, 0, r, true
				}
			}
		}
		e.mu.Lock()
		if e.meta.Load() == meta && e.key == key {
			return e, n, r, false
		}
		e.mu.Unlock()
	}
	return nil, 0, r, false
}

// locate returns the position of key's word in sh's index. The caller
// holds sh.mu, under which the index is exact and keys do not change.
func (t *table[K]) locate(sh *shard[K], key K, hash uint32) (uint32, bool) {
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
		if e := t.arena.at(wordEntry(w)); e.meta.Load() == meta && e.key == key {
			return pos, true
		}
	}
	return 0, false
}

// insert returns key's entry, locked, and its number: the one another
// goroutine added meanwhile, or a new one holding fresh states at now. It
// returns nil when the shard is full and refuses new keys.
//
// A refused key counts as added for the pacing of sweeps, so that a
// table that refuses a flood still finds the keys that expire.
func (t *table[K]) insert(sh *shard[K], key K, hash uint32, now int64) (*entry[K], uint32) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, n := t.lookup(sh, key, hash); e != nil {
		return e, n
	}
	if sh.added++; sh.added >= sh.every {
		t.sweep(sh, now)
	}
	if sh.keys >= t.shardCap && !t.makeRoom(sh, now) {
		t.refused.Add(1)
		return nil, 0
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
	e.key = key
	t.keep(e, n, t.alg.Init(t.state(e, n), now))
	if t.others != nil {
		more := t.arena.more(n)
		for i, alg := range t.others {
			more[i] = alg.Init(more[i], now)
		}
	}
	sh.soon = min(sh.soon, now) // a fresh state expires at once
	ix := sh.index.Load()
	if (sh.keys+1)*4 > len(ix.words)*3 {
		ix = ix.grown(&t.arena)
		sh.index.Store(ix)
	}
	ix.add(hash, n)
	sh.keys++
	return e, n
}

// drop forgets the key whose word is at pos in sh's index. The caller
// holds sh.mu. The entry keeps its log, when that is small, for the next
// key that reuses it, so that a sliding log does not allocate again.
func (t *table[K]) drop(sh *shard[K], pos uint32) {
	ix := sh.index.Load()
	n := wordEntry(ix.words[pos].Load())
	e := t.arena.at(n)
	e.mu.Lock()
	e.meta.Store(0)
	e.denial.Store(nil)
	if t.arena.wide {
		forgetLargeLog(&t.arena.wideOf(n).log)
	}
	if t.others != nil {
		more := t.arena.more(n)
		for i := range more {
			forgetLargeLog(&more[i].Log)
		}
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

// expiry returns the instant entry n, e, is fresh under every limit (see
// algorithm.Expiry). The caller holds e's lock.
func (t *table[K]) expiry(e *entry[K], n uint32, at int64) int64 {
	x := algorithm.Expiry(t.alg, t.state(e, n), at)
	if t.others != nil {
		more := t.arena.more(n)
		for i, alg := range t.others {
			x = max(x, algorithm.Expiry(alg, more[i], at))
		}
	}
	return x
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
		e.mu.Lock()
		expires := t.expiry(e, n, cut)
		e.mu.Unlock()
		if expires <= cut {
			t.drop(sh, uint32(pos))
			continue
		}
		sh.soon = min(sh.soon, expires)
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
	var (
		expired int
		victim  uint32  // the entry to evict
		most    float64 // its room
		soonest int64   // when it is fresh again, from now
	)
	for i, n := range sample[:found] {
		e := t.arena.at(n)
		e.mu.Lock()
		room, reset := t.room(e, n, now)
		e.mu.Unlock()
		if reset <= 0 { // fresh: dropping it loses nothing
			t.dropEntry(sh, n)
			expired++
			continue
		}
		if i == expired || room > most || room == most && reset < soonest {
			victim, most, soonest = n, room, reset
		}
	}
	if expired > 0 {
		t.dropped.Add(uint64(expired))
		return true
	}
	if t.full == RefuseNewKeys {
		return false
	}
	t.dropEntry(sh, victim)
	t.evicted.Add(1)
	return true
}

// dropEntry forgets the key of entry n, live in sh. The caller holds
// sh.mu.
func (t *table[K]) dropEntry(sh *shard[K], n uint32) {
	ix := sh.index.Load()
	pos := t.arena.hashOf(n) & ix.mask
	for wordEntry(ix.words[pos].Load()) != n {
		pos = (pos + 1) & ix.mask
	}
	t.drop(sh, pos)
}

// room returns how much room entry n, e, has left at now under its
// limits, and how long from now until it is fresh under all of them (0
// when it is). Room is the least fraction of a limit left under any of
// them, so that a key spent under one limit has none, and a limit of 10
// weighs as much as a limit of a million. The caller holds e's lock.
func (t *table[K]) room(e *entry[K], n uint32, now int64) (room float64, reset int64) {
	r := t.alg.Peek(t.state(e, n), now, 1)
	room, reset = float64(r.Remaining)/float64(t.limit), r.ResetAfter
	if t.others != nil {
		more := t.arena.more(n)
		for i, alg := range t.others {
			r := alg.Peek(more[i], now, 1)
			room = min(room, float64(r.Remaining)/float64(alg.Limit()))
			reset = max(reset, r.ResetAfter)
		}
	}
	return room, reset
}
