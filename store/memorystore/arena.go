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
// An entry holds the first two words of its first limit's state, all
// that the token buckets, GCRA and the fixed window keep (see
// algorithm.Narrow). Whatever else a table keeps per key is beside the
// entry, in arrays of its page, so that a table pays only for what its
// algorithms use: the rest of the first limit's state when its algorithm
// is not narrow (wide), and the states of the other limits of a table of
// several (extra per entry).
type arena[K comparable] struct {
	mu    sync.Mutex
	pages atomic.Pointer[[]page[K]]
	next  uint32 // entries handed out
	wide  bool   // the first limit keeps N2 and Log
	extra int    // states per entry beyond the first limit's
}

// pageSize is how many entries a page holds: 1024 entries of a string key,
// 48 bytes each, make 48 KiB. Go rounds a small object that holds pointers
// up to its size class after adding an 8-byte header (a page of 24 KiB
// would take 26.6 KiB, 53 bytes per entry), while an object above 32 KiB
// is allocated in whole 8 KiB pages with no header, so a page takes
// exactly its size.
const pageSize = 1024

// page is pageSize entries, allocated alone (see pageSize), and what their
// keys keep beside them.
type page[K comparable] struct {
	entries *[pageSize]entry[K]
	wide    []wideState       // per entry, when the first limit is wide
	more    []algorithm.State // extra per entry, entry by entry
}

// wideState is the part of the first limit's state that an entry does not
// hold.
type wideState struct {
	n2  int64
	log *algorithm.Log
}

// at returns entry n, which alloc has handed out.
func (a *arena[K]) at(n uint32) *entry[K] {
	return &(*a.pages.Load())[n/pageSize].entries[n%pageSize]
}

// wideOf returns the rest of entry n's first state, in a wide arena.
func (a *arena[K]) wideOf(n uint32) *wideState {
	return &(*a.pages.Load())[n/pageSize].wide[n%pageSize]
}

// more returns the extra states of entry n.
func (a *arena[K]) more(n uint32) []algorithm.State {
	i := int(n%pageSize) * a.extra
	return (*a.pages.Load())[n/pageSize].more[i : i+a.extra : i+a.extra]
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
		p := page[K]{entries: new([pageSize]entry[K])}
		if a.wide {
			p.wide = make([]wideState, pageSize)
		}
		if a.extra > 0 {
			p.more = make([]algorithm.State, pageSize*a.extra)
		}
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
