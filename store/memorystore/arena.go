package memorystore

import (
	"sync"
	"sync/atomic"
)

// arena holds a table's entries in pages that never move, numbered in the
// order they were handed out, so that entries made one after the other are
// neighbours in memory. Readers find a page through an atomically
// published list; only alloc, under the arena's lock, extends it.
type arena[K comparable] struct {
	mu    sync.Mutex
	pages atomic.Pointer[[]*page[K]]
	next  uint32 // entries handed out
}

const pageSize = 256

type page[K comparable] [pageSize]entry[K]

// at returns entry n, which alloc has handed out.
func (a *arena[K]) at(n uint32) *entry[K] {
	return &(*a.pages.Load())[n/pageSize][n%pageSize]
}

// alloc hands out a new entry, not live until its caller fills it.
func (a *arena[K]) alloc() uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.next
	var pages []*page[K]
	if p := a.pages.Load(); p != nil {
		pages = *p
	}
	if int(n/pageSize) == len(pages) {
		grown := append(pages[:len(pages):len(pages)], new(page[K]))
		a.pages.Store(&grown)
	}
	a.next++
	return n
}
