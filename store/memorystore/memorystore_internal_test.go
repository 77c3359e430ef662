package memorystore

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func TestShardSize(t *testing.T) {
	if got := unsafe.Sizeof(shard[string]{}); got != 128 {
		t.Errorf("unsafe.Sizeof(shard) = %d, want 128: two cache lines", got)
	}
}

// An entry of a string key takes 48 bytes (40 for an integer key): the
// lock, the hash, two words of state, the denial and the key. A page of
// them is allocated with no byte rounded up: a page that took an 8-byte
// malloc header on top of a size class was rounded up to the next one.
func TestEntryLayout(t *testing.T) {
	if got := unsafe.Sizeof(entry[string]{}); got != 48 {
		t.Errorf("unsafe.Sizeof(entry[string]) = %d, want 48", got)
	}
	if got := unsafe.Sizeof(entry[uint64]{}); got != 40 {
		t.Errorf("unsafe.Sizeof(entry[uint64]) = %d, want 40", got)
	}
	entries := unsafe.Sizeof([pageSize]entry[string]{})
	// TotalAlloc counts every goroutine's allocations, so the least of a
	// few measurements is the page's own.
	var took uint64
	for i := range 5 {
		var a arena[string]
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		a.alloc() // the first page, and the list of pages
		runtime.ReadMemStats(&m1)
		if d := m1.TotalAlloc - m0.TotalAlloc; i == 0 || d < took {
			took = d
		}
	}
	// The list of one page is a slice of one page (56 bytes, in the
	// 64-byte size class) and its header (24 bytes).
	if got, want := took, uint64(entries)+64+24; got != want {
		t.Errorf("the first page took %d bytes, want %d: %d for its %d entries and 88 for the list of pages", got, want, entries, pageSize)
	}
}

// A table numbers at most shardCap entries per shard, so every shard
// count and cap must keep shards × shardCap within what an index word can
// number, and give each shard room for a key.
func TestCapFitsIndexWords(t *testing.T) {
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, shards := range []int{1, 64, 1024, 1 << 16} {
		for _, maxKeys := range []int{0, shards, 1 << 20, MaxKeys, MaxKeys + 1, 1 << 40} {
			tb := newTable[string]([]algorithm.Algorithm{alg}, shards, maxKeys, 0)
			if total := tb.shardCap * shards; tb.shardCap < 1 || total > maxEntries {
				t.Errorf("%d shards, WithMaxKeys(%d): %d keys per shard, %d in all; want at least 1 per shard and at most %d in all",
					shards, maxKeys, tb.shardCap, total, maxEntries)
			}
		}
	}
}
