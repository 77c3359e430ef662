package memorystore

import "sync/atomic"

// index finds a shard's entries by key hash: an open-addressing table with
// linear probing of 4-byte words, each holding an entry's number and a tag
// of a few bits of its key's hash, so that readers almost never touch an
// entry that cannot match. Words are read and written atomically: readers
// use the index without the shard's lock, as a hint that they check
// against the entry itself, while writers, which hold it, add, remove and
// move words. Removal shifts the rest of a run back (no tombstones), so a
// table that gains and loses keys never needs rebuilding.
//
// A word is too small for the hash that names its home position, so
// writers find it in the entry (see hashes); readers, which only walk
// forward from a home they computed, never need it.
type index struct {
	words []atomic.Uint32 // 0: empty
	mask  uint32
}

// A word is tag<<entryBits | n+1 for entry n, whose hash's top tagBits
// bits (of the 31 an entry keeps, see hashMask) are tag.
const (
	entryBits = 27
	tagBits   = 32 - entryBits
	entryMask = 1<<entryBits - 1

	// maxEntries is the most entries a table can number: every number
	// below it, plus one, fits in entryBits.
	maxEntries = entryMask
)

// minIndex is the size of a new index, in words.
const minIndex = 8

// hashes tells writers the hash of an entry's key (31 bits, see hashMask).
type hashes interface {
	hashOf(n uint32) uint32
}

func newIndex(size int) *index {
	return &index{words: make([]atomic.Uint32, size), mask: uint32(size - 1)}
}

// tagOf is the tag of a key whose hash is hash.
func tagOf(hash uint32) uint32 { return hash >> (31 - tagBits) & (1<<tagBits - 1) }

// word makes the index word of entry n, whose key hashes to hash.
func word(hash, n uint32) uint32 { return tagOf(hash)<<entryBits | (n + 1) }

func wordTag(w uint32) uint32   { return w >> entryBits }
func wordEntry(w uint32) uint32 { return w&entryMask - 1 }

// add puts the word of entry n, whose key hashes to hash, in the first
// empty word of its run. The index must have an empty word.
func (ix *index) add(hash, n uint32) {
	pos := hash & ix.mask
	for ix.words[pos].Load() != 0 {
		pos = (pos + 1) & ix.mask
	}
	ix.words[pos].Store(word(hash, n))
}

// remove empties the word at pos and moves back the words after it in its
// run that may not stay where they are: those whose home (the position
// their hash names) is not cyclically after the hole.
func (ix *index) remove(pos uint32, hs hashes) {
	hole := pos
	for next := (hole + 1) & ix.mask; ; next = (next + 1) & ix.mask {
		w := ix.words[next].Load()
		if w == 0 {
			break
		}
		home := hs.hashOf(wordEntry(w)) & ix.mask
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
func (ix *index) grown(hs hashes) *index {
	g := newIndex(2 * len(ix.words))
	for i := range ix.words {
		if w := ix.words[i].Load(); w != 0 {
			n := wordEntry(w)
			g.add(hs.hashOf(n), n)
		}
	}
	return g
}
