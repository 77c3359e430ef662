package memorystore

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func TestShardSize(t *testing.T) {
	if got := unsafe.Sizeof(shard[string]{}); got != 128 {
		t.Errorf("unsafe.Sizeof(shard) = %d, want 128: two cache lines", got)
	}
}

// An entry of a string key takes 56 bytes (48 for an integer key): the
// lock, the hash, the identity and config numbers, two words of state,
// the denial and the key. A page of
// them is allocated with no byte rounded up: a page that took an 8-byte
// malloc header on top of a size class was rounded up to the next one.
func TestEntryLayout(t *testing.T) {
	if got := unsafe.Sizeof(entry[string]{}); got != 56 {
		t.Errorf("unsafe.Sizeof(entry[string]) = %d, want 56", got)
	}
	if got := unsafe.Sizeof(entry[uint64]{}); got != 48 {
		t.Errorf("unsafe.Sizeof(entry[uint64]) = %d, want 48", got)
	}
	if got := unsafe.Sizeof(standingDenial[string]{}); got != 48 {
		t.Errorf("unsafe.Sizeof(standingDenial[string]) = %d, want 48: a size class of its own", got)
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
	// The list of one page is a slice of one page (24 bytes) and its
	// header (24 bytes, in the 24-byte size class); the page's two empty
	// sidecar pointers (wide states, generations) take 8 each.
	if got, want := took, uint64(entries)+24+24+8+8; got != want {
		t.Errorf("the first page took %d bytes, want %d: %d for its %d entries and 64 for the list of pages", got, want, entries, pageSize)
	}
}

// A table numbers at most shardCap entries per shard, so every shard
// count and cap must keep shards × shardCap within what an index word can
// number, and give each shard room for a key.
func TestCapFitsIndexWords(t *testing.T) {
	for _, shards := range []int{1, 64, 1024, 1 << 16} {
		for _, maxKeys := range []int{0, shards, 1 << 20, MaxKeys, MaxKeys + 1, 1 << 40} {
			tb := newTable[string](&registry{}, shards, maxKeys, 0)
			if total := tb.shardCap * shards; tb.shardCap < 1 || total > maxEntries {
				t.Errorf("%d shards, WithMaxKeys(%d): %d keys per shard, %d in all; want at least 1 per shard and at most %d in all",
					shards, maxKeys, tb.shardCap, total, maxEntries)
			}
		}
	}
}

// TestDefaultMaxKeys checks the cap of a table made without WithMaxKeys,
// and that WithMaxKeys(MaxKeys) still asks for the largest.
func TestDefaultMaxKeys(t *testing.T) {
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts []Option
		want int
	}{
		{nil, DefaultMaxKeys},
		{[]Option{WithMaxKeys(0)}, DefaultMaxKeys},
		{[]Option{WithMaxKeys(MaxKeys)}, MaxKeys},
		{[]Option{WithMaxKeys(MaxKeys + 1)}, MaxKeys},
		{[]Option{WithMaxKeys(1000)}, 1000},
	} {
		s := New[string](append(tc.opts, WithShards(8))...)
		tab, err := s.Open([]store.Limit{{Algorithm: alg}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tb := tab.(*handle[string]).t
		// ⌊want/8⌋ per shard, 8 shards.
		if got := tb.shardCap * len(tb.shards); got != tc.want/8*8 {
			t.Errorf("%d options: a table holds %d keys, want %d", len(tc.opts), got, tc.want/8*8)
		}
	}
}

// TestFloodOfSpentKeys plays the attacker that EvictLeastHarm cannot tell
// from its victim: every new key spends its whole limit (1 per hour, one
// request), after the victim did, so every key has as little room as the
// victim and expires later. The victim, spent before them all, is then
// evicted whenever it is sampled: once per about n/sampleSize new keys on
// average, for a shard of n keys. The test measures that over many
// victims. A victim that asks again as soon as it can is spent again
// after each eviction, later than most keys held: it is then evicted
// once it is among the first spent, and the test measures how often
// that happens in a long flood.
func TestFloodOfSpentKeys(t *testing.T) {
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1.0 / 3600})
	if err != nil {
		t.Fatal(err)
	}
	const (
		n       = 1024
		victims = 300
		t0      = int64(1_767_225_600_000_000)
	)
	s := New[int](WithShards(1), WithMaxKeys(n))
	tab, err := s.Open(store.LimitsOf(alg), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now, next := t0, 0
	attack := func() {
		now++
		if r, err := tab.Take(ctx, next, now, 1, nil); err != nil || !r.Allowed() {
			t.Fatalf("Take(%d) = %+v, %v; want admitted", next, r, err)
		}
		next++
	}
	for range n {
		attack()
	}
	var total int
	for v := range victims {
		victim := -1 - v
		// Spent before every key of the attacker: an instant earlier than
		// theirs, which the store takes as given.
		if r, err := tab.Take(ctx, victim, t0-1, 1, nil); err != nil || !r.Allowed() {
			t.Fatalf("victim %d: %+v, %v", v, r, err)
		}
		for k := 1; ; k++ {
			attack()
			if r, _ := tab.Peek(ctx, victim, now, nil); r.Remaining == 1 {
				total += k
				break
			}
			if k > 100*n {
				t.Fatalf("victim %d still held after %d new keys", v, k)
			}
		}
	}
	mean, want := float64(total)/victims, float64(n)/sampleSize
	t.Logf("a victim spent before a flood of spent keys was evicted after %.1f new keys on average (n/sampleSize = %.0f)", mean, want)
	if mean < 0.75*want || mean > 1.5*want {
		t.Errorf("a victim was evicted after %.1f new keys on average, want about n/sampleSize = %.0f", mean, want)
	}

	const flood = 30 * n
	admitted := 0
	for range flood {
		attack()
		if r, _ := tab.Take(ctx, -1, now, 1, nil); r.Allowed() {
			admitted++
		}
	}
	every := float64(flood) / float64(max(admitted, 1))
	t.Logf("a victim asking after every new key was admitted %d times in %d new keys: once per %.0f (n = %d)", admitted, flood, every, n)
	if every < n/4 {
		t.Errorf("a victim asking after every new key was admitted once per %.0f new keys, want once per n/4 = %d or fewer", every, n/4)
	}
}

// BenchmarkSweepFullShard times one sweep of a shard of a full table in
// which no key has expired: the pause a shard's new keys wait through
// once per cap/shards of them (BenchmarkNewKeyAtCap includes it,
// amortised). The table has 64 shards, each holding cap/64 keys, swept
// in turn so that a sweep finds its shard no more in cache than the sweep
// of a flood does.
func BenchmarkSweepFullShard(b *testing.B) {
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 10, Rate: 10.0 / 86400})
	if err != nil {
		b.Fatal(err)
	}
	const t0 = int64(1_767_225_600_000_000)
	for _, maxKeys := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("cap=%d", maxKeys), func(b *testing.B) {
			s := New[int](WithMaxKeys(maxKeys), WithShards(64), WithGrace(0))
			tab, err := s.Open(store.LimitsOf(alg), nil)
			if err != nil {
				b.Fatal(err)
			}
			for k := range maxKeys {
				tab.Take(context.Background(), k, t0+int64(k), 1, nil)
			}
			tb := tab.(*handle[int]).t
			now := t0 + int64(maxKeys)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				sh := &tb.shards[i%len(tb.shards)]
				sh.mu.Lock()
				sh.soon = 0 // as after a new key: the sweep visits every key
				tb.sweep(sh, now)
				sh.mu.Unlock()
				i++
			}
			perShard := float64(maxKeys / len(tb.shards))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/perShard, "ns/key")
		})
	}
}
