package memorystore

import "sync/atomic"

// index finds a shard's entries by key hash: an open-addressing table with
// linear probing whose words hold a key's 32-bit hash and its entry's
// number, so that readers never touch an entry that cannot match. Words
// are read and written atomically: readers use the index without the
// shard's lock, as a hint that they check against the entry itself, while
// writers, which hold it, add, remove and move words. Removal shifts the
// rest of a run back (no tombstones), so a table that gains and loses keys
// never needs rebuilding.
type index struct {
	words []atomic.Uint64 // 0: empty
	mask  uint32
}

// minIndex is the size of a new index, in words.
const minIndex = 8

func newIndex(size int) *index {
	return &index{words: make([]atomic.Uint64, size), mask: uint32(size - 1)}
}

// word makes the index word of entry n, whose key hashes to hash.
func word(hash, n uint32) uint64 { return uint64(hash)<<32 | uint64(n) + 1 }

func wordHash(w uint64) uint32  { return uint32(w >> 32) }
func wordEntry(w uint64) uint32 { return uint32(w) - 1 }

// add puts w in the first empty word of its run. The index must have an
// empty word.
func (ix *index) add(w uint64) {
	pos := wordHash(w) & ix.mask
	for ix.words[pos].Load() != 0 {
		pos = (pos + 1) & ix.mask
	}
	ix.words[pos].Store(w)
}

// remove empties the word at pos and moves back the words after it in its
// run that may not stay where they are: those whose home (the position
// their hash names) is not cyclically after the hole.
func (ix *index) remove(pos uint32) {
	hole := pos
	for next := (hole + 1) & ix.mask; ; next = (next + 1) & ix.mask {
		w := ix.words[next].Load()
		if w == 0 {
			break
		}
		home := wordHash(w) & ix.mask
		// w may stay at next if its home lies in (hole, next].
		if (hole < next && hole < home && home <= next) || (hole > next && (home > hole || home <= next)) {
			continue
		}
		ix.words[hole].Store(w)
		hole = next
	}
	ix.words[hole].Store(0)
}

// grown returns an index twice the size holding ix's words.
func (ix *index) grown() *index {
	g := newIndex(2 * len(ix.words))
	for i := range ix.words {
		if w := ix.words[i].Load(); w != 0 {
			g.add(w)
		}
	}
	return g
}
