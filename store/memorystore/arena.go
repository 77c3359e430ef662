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
// A table of several limits keeps its first limit's state in the entry and
// the others' beside it, extra per entry, in an array of the entry's page:
// a table of one limit pays nothing for them.
type arena[K comparable] struct {
	mu    sync.Mutex
	pages atomic.Pointer[[]page[K]]
	next  uint32 // entries handed out
	extra int    // states per entry beyond the entry's own
}

// pageSize is how many entries a page holds: 512 entries of a string key,
// 64 bytes each, make 32 KiB. Go rounds a small object that holds pointers
// up to its size class after adding an 8-byte header, so a page of 16 KiB
// took 18 KiB, 72 bytes per entry; an object above 32 KiB is allocated
// in whole 8 KiB pages with no header, so a page takes exactly its size.
const pageSize = 512

// page is pageSize entries, allocated alone (see pageSize), and the extra
// states of its entries.
type page[K comparable] struct {
	entries *[pageSize]entry[K]
	more    []algorithm.State // extra per entry, entry by entry
}

// at returns entry n, which alloc has handed out.
func (a *arena[K]) at(n uint32) *entry[K] {
	return &(*a.pages.Load())[n/pageSize].entries[n%pageSize]
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
