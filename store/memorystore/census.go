package memorystore

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit/store"
)

// census counts a table's states per key, so that no key holds more than
// store.MaxStatesPerKey (one per state ID) and a decision that would add
// one more fails with an error wrapping store.ErrTooManyStates, as on the
// Redis stores, whose key's hash holds at most that many fields.
//
// Counting each key exactly would cost every key a record. The census
// counts instead the states of all the keys whose hash falls in a
// bucket, a few keys each: a key whose bucket holds fewer states than the
// cap holds fewer itself, and no more is needed. Only a bucket that
// reaches the cap is tracked: the count of each of its keys that adds a
// state is taken once, by looking for the key under every identity in
// use (O(identities)), and kept exact from then on as its states are
// added and dropped, until the bucket falls to half the cap. Keys of any
// real use never share a bucket with so many states (a bucket holds 256
// states on average in a full table, of 2^20 by default), so a decision
// pays one atomic add per state added or dropped, on the paths that add
// and drop them, and nothing on a key's state already held.
type census[K comparable] struct {
	counts []atomic.Int32 // by bucket; trackedBit when its keys are in exact
	mask   uint32
	mu     sync.Mutex // serialises exact, and the tracking of buckets
	exact  map[K]*keyCount
	err    error // wraps store.ErrTooManyStates
}

// keyCount is a tracked key's count of states, and its bucket.
type keyCount struct {
	n int32
	b uint32
}

// trackedBit marks a bucket whose keys are counted exactly.
const trackedBit = 1 << 30

// censusSpread is how many states of a full table a bucket holds on
// average.
const censusSpread = 256

func newCensus[K comparable](maxKeys int) census[K] {
	n := 64
	for n < maxKeys/censusSpread {
		n <<= 1
	}
	return census[K]{
		counts: make([]atomic.Int32, n),
		mask:   uint32(n - 1),
		exact:  map[K]*keyCount{},
		err: fmt.Errorf("%w: the memory store keeps at most %d states (state IDs) for one key",
			store.ErrTooManyStates, store.MaxStatesPerKey),
	}
}

// bucket returns the census bucket of the key of identity id whose
// entry's hash (meta) is hash: the key's own hash, before place mixed the
// identity in, picks it, so that every identity of a key counts in one.
func (t *table[K]) bucket(hash, id uint32) uint32 {
	return (hash ^ uint32(mix(id))) & t.census.mask
}

// added counts a state of key made in bucket b. The caller holds the
// shard's mutex, after the entry's word is in the index.
func (c *census[K]) added(key K, b uint32) {
	if c.counts[b].Add(1)&trackedBit == 0 {
		return
	}
	c.mu.Lock()
	if k := c.exact[key]; k != nil {
		k.n++
	}
	c.mu.Unlock()
}

// dropped uncounts a state of key dropped from bucket b. The caller holds
// the shard's mutex, before the entry's word leaves the index.
func (c *census[K]) dropped(key K, b uint32) {
	v := c.counts[b].Add(-1)
	if v&trackedBit == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := c.exact[key]; k != nil {
		if k.n--; k.n <= 0 {
			delete(c.exact, key)
		}
	}
	if v&^trackedBit < store.MaxStatesPerKey/2 && c.counts[b].Load()&trackedBit != 0 {
		for key, k := range c.exact {
			if k.b == b {
				delete(c.exact, key)
			}
		}
		c.counts[b].And(^trackedBit)
	}
}

// room returns nil when key, in bucket b, may get one more state, or an
// error wrapping store.ErrTooManyStates. count counts key's states, for a
// bucket at the cap whose key is not tracked yet.
func (c *census[K]) room(key K, b uint32, count func() int32) error {
	if c.counts[b].Load()&^trackedBit < store.MaxStatesPerKey {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[b].Or(trackedBit)
	k := c.exact[key]
	if k == nil {
		k = &keyCount{n: count(), b: b}
		c.exact[key] = k
	}
	if k.n >= store.MaxStatesPerKey {
		return c.err
	}
	return nil
}

// statesOf counts key's states, whose hash (keyhash) is h, under every
// identity in use: census.room's count. It locks nothing but for a moment
// each entry it finds free (TryLock), to compare its key; one in use is
// taken for key's when its identity and hash are (the caller's own, in a
// Policy, are).
func (t *table[K]) statesOf(key K, h uint64) int32 {
	var n int32
	for _, id := range t.reg.liveIDs() {
		sh, hash := t.place(h, id)
		ix := sh.index.Load()
		tag, meta := tagOf(hash), liveBit|hash
		for i, pos := uint32(0), hash&ix.mask; i <= ix.mask; i, pos = i+1, (pos+1)&ix.mask {
			w := ix.words[pos].Load()
			if w == 0 {
				break
			}
			if wordTag(w) != tag {
				continue
			}
			e := t.arena.at(wordEntry(w))
			if e.meta.Load() != meta || e.id.Load() != id {
				continue
			}
			if !e.mu.TryLock() {
				n++
				break
			}
			same := e.meta.Load() == meta && e.id.Load() == id && e.key == key
			e.mu.Unlock()
			if same {
				n++
				break
			}
		}
	}
	return n
}
