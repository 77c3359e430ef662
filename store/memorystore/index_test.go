package memorystore

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// TestIndexModel adds and removes words at random, with hashes drawn from
// a handful of values so that runs are long, wrap around the end and merge,
// and checks after every step that the index holds exactly the model's
// words, each reachable from its home without crossing an empty word (what
// lookups rely on).
func TestIndexModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ix := newIndex(minIndex)
		model := modelHashes{} // entry → hash
		next := uint32(0)
		t.Repeat(map[string]func(*rapid.T){
			"add": func(t *rapid.T) {
				if (len(model)+1)*4 > len(ix.words)*3 {
					ix = ix.grown(model)
				}
				hash := rapid.Uint32Range(0, 40).Draw(t, "hash") * 0x9e3779b1 >> 3 & hashMask // a few distinct homes, some shared
				ix.add(hash, next)
				model[next] = hash
				next++
			},
			"remove": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				var live []uint32
				for pos := range ix.words {
					if w := ix.words[pos].Load(); w != 0 {
						live = append(live, uint32(pos))
					}
				}
				pos := rapid.SampledFrom(live).Draw(t, "position")
				delete(model, wordEntry(ix.words[pos].Load()))
				ix.remove(pos, model)
			},
			"": func(t *rapid.T) {
				if err := checkIndex(ix, model); err != nil {
					t.Fatal(err)
				}
			},
		})
	})
}

// modelHashes is the hash of each entry a test's index holds.
type modelHashes map[uint32]uint32

func (m modelHashes) hashOf(n uint32) uint32 { return m[n] }

// checkIndex returns what is wrong with ix given the words it must hold.
func checkIndex(ix *index, model modelHashes) error {
	seen := map[uint32]bool{}
	for pos := range ix.words {
		w := ix.words[pos].Load()
		if w == 0 {
			continue
		}
		n := wordEntry(w)
		hash, ok := model[n]
		if !ok {
			return fmt.Errorf("word %#x at %d: entry %d, which the index must not hold", w, pos, n)
		}
		if wordTag(w) != tagOf(hash) {
			return fmt.Errorf("word %#x at %d: tag %#x, want %#x for entry %d's hash %#x", w, pos, wordTag(w), tagOf(hash), n, hash)
		}
		if seen[n] {
			return fmt.Errorf("entry %d appears twice", n)
		}
		seen[n] = true
		for p := hash & ix.mask; p != uint32(pos); p = (p + 1) & ix.mask {
			if ix.words[p].Load() == 0 {
				return fmt.Errorf("entry %d at %d: empty word at %d between its home %d and it", n, pos, p, hash&ix.mask)
			}
		}
	}
	if len(seen) != len(model) {
		return fmt.Errorf("%d words, want %d", len(seen), len(model))
	}
	return nil
}
