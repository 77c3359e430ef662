package memorystore

import (
	"sync"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// arena holds a table's entries in pages that never move, numbered in the
// order they were handed out, so that entries made one after the other are
// neighbours in memory. Readers find a page through an atomically
// published list; only alloc, under the arena's lock, extends it.
//
// An entry holds the first two words of its state, all that the token
// buckets, GCRA and the fixed window keep (see algorithm.Narrow). The rest
// of a wide state (N2 and the Log: the sliding window and the sliding log)
// is beside the entry, in a sidecar of its page that the page gets when
// one of its entries first holds a wide state, so that a store of narrow
// limits pays nothing for it.
type arena[K comparable] struct {
	mu    sync.Mutex
	pages atomic.Pointer[[]page[K]]
	next  uint32 // entries handed out
}

// pageSize is how many entries a page holds: 1024 entries of a string key,
// 56 bytes each, make 56 KiB. Go rounds a small object that holds pointers
// up to its size class after adding an 8-byte header, while an object
// above 32 KiB is allocated in whole 8 KiB pages with no header, so a page
// takes exactly its size (7 pages of 8 KiB; 6 for an integer key's).
const pageSize = 1024

// page is pageSize entries, allocated alone (see pageSize), the wide
// part of their states, once one of them is wide, and their states'
// generations, once one of them is booked.
type page[K comparable] struct {
	entries *[pageSize]entry[K]
	wide    *atomic.Pointer[[pageSize]wideState]
	gens    *atomic.Pointer[[pageSize]uint64]
}

// wideState is the part of a wide state that an entry does not hold.
type wideState struct {
	n2  int64
	log *algorithm.Log
}

// at returns entry n, which alloc has handed out.
func (a *arena[K]) at(n uint32) *entry[K] {
	return &(*a.pages.Load())[n/pageSize].entries[n%pageSize]
}

// wideOf returns the rest of entry n's state, or nil when no entry of its
// page has held a wide state.
func (a *arena[K]) wideOf(n uint32) *wideState {
	w := (*a.pages.Load())[n/pageSize].wide.Load()
	if w == nil {
		return nil
	}
	return &w[n%pageSize]
}

// makeWide returns the rest of entry n's state, giving its page a sidecar
// when it has none.
func (a *arena[K]) makeWide(n uint32) *wideState {
	if w := a.wideOf(n); w != nil {
		return w
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p := (*a.pages.Load())[n/pageSize].wide
	if p.Load() == nil {
		p.Store(new([pageSize]wideState))
	}
	return &p.Load()[n%pageSize]
}

// A state's generation tells it from a state born later in its place
// (after Reset, an expiry or an eviction dropped it, and a decision made
// its key anew): a booking records it, and gives back nothing into a state
// of another generation. It is numbered from the store's counter when a
// state is first booked (a state only decided has none, and costs
// nothing), kept by every write to the entry (conversions included), and
// forgotten when a state is born in the entry (add): a generation never
// numbers two states. A page gets its sidecar of generations with its
// first booking, so that a store that never books pays nothing for it.

// genOf returns entry n's generation, 0 when it has none. The caller holds
// the entry's lock.
func (a *arena[K]) genOf(n uint32) uint64 {
	g := (*a.pages.Load())[n/pageSize].gens.Load()
	if g == nil {
		return 0
	}
	return g[n%pageSize]
}

// numbered returns entry n's generation, numbering it with next() when it
// has none. The caller holds the entry's lock.
func (a *arena[K]) numbered(n uint32, next func() uint64) uint64 {
	p := (*a.pages.Load())[n/pageSize].gens
	if p.Load() == nil {
		a.mu.Lock()
		if p.Load() == nil {
			p.Store(new([pageSize]uint64))
		}
		a.mu.Unlock()
	}
	g := &p.Load()[n%pageSize]
	if *g == 0 {
		*g = next()
	}
	return *g
}

// unnumber forgets entry n's generation: a state is born in it. The
// caller holds the entry's lock.
func (a *arena[K]) unnumber(n uint32) {
	if g := (*a.pages.Load())[n/pageSize].gens.Load(); g != nil {
		g[n%pageSize] = 0
	}
}

// alloc hands out a new entry, not live until its caller fills it.
func (a *arena[K]) alloc() uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.next
	var pages []page[K]
	if p := a.pages.Load(); p != nil {
		pages = *p
	}
	if int(n/pageSize) == len(pages) {
		p := page[K]{entries: new([pageSize]entry[K]), wide: new(atomic.Pointer[[pageSize]wideState]),
			gens: new(atomic.Pointer[[pageSize]uint64])}
		grown := append(pages[:len(pages):len(pages)], p)
		a.pages.Store(&grown)
	}
	a.next++
	return n
}

// hashOf returns the hash of the key of entry n (see index). The caller
// holds the lock of the shard whose index holds n.
func (a *arena[K]) hashOf(n uint32) uint32 {
	return a.at(n).meta.Load() & hashMask
}
