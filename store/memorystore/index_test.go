package memorystore

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestIndexModel adds and removes words at random, with hashes drawn from
// a handful of values so that runs are long, wrap around the end and merge,
// and checks after every step that the index holds exactly the model's
// words, each reachable from its home without crossing an empty word (what
// lookups rely on). Each run is seeded by its number, which a failure
// names, so that it replays.
func TestIndexModel(t *testing.T) {
	runs, steps := 500, 300
	if testing.Short() {
		runs = 50
	}
	for run := range runs {
		rng := rand.New(rand.NewPCG(uint64(run), 0x1dc5))
		ix := newIndex(minIndex)
		model := modelHashes{} // entry → hash
		next := uint32(0)
		for step := range steps {
			// Adds outnumber removals at first so that the index grows,
			// then both come alike.
			if len(model) == 0 || rng.IntN(3) > 0 && step < steps/2 || rng.IntN(2) == 0 && step >= steps/2 {
				if (len(model)+1)*4 > len(ix.words)*3 {
					ix = ix.grown(model)
				}
				hash := rng.Uint32N(41) * 0x9e3779b1 >> 3 & hashMask // a few distinct homes, some shared
				ix.add(hash, next)
				model[next] = hash
				next++
			} else {
				var live []uint32
				for pos := range ix.words {
					if w := ix.words[pos].Load(); w != 0 {
						live = append(live, uint32(pos))
					}
				}
				pos := live[rng.IntN(len(live))]
				delete(model, wordEntry(ix.words[pos].Load()))
				ix.remove(pos, model)
			}
			if err := checkIndex(ix, model); err != nil {
				t.Fatalf("run %d, step %d: %v", run, step, err)
			}
		}
	}
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
