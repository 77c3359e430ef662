package ratelimit_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// 10,000 limits given per call (Limiter.With), each deciding one key on
// the memory store, cost under 1 KB each beyond their keys' entries,
// though the caller keeps every Limiter With returned: about 0.8 KB for
// the Limiter and its table (853 bytes with the entry, 1,174 while the
// limits of With each claimed a default state ID of their own).
func TestWithManyLimitsCostLittle(t *testing.T) {
	if testing.Short() {
		t.Skip("heap measurements are slow")
	}
	const limits = 10_000
	ctx := context.Background()
	algs := make([]algorithm.Algorithm, limits)
	for i := range algs {
		alg, err := tokenbucket.New(tokenbucket.Config{Capacity: int64(10 + i), Rate: 1})
		if err != nil {
			t.Fatal(err)
		}
		algs[i] = alg
	}
	first, _ := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1})
	base, err := ratelimit.New[int](first, memorystore.New[int]())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := base.Allow(ctx, -1); err != nil { // the store's table, made once
		t.Fatal(err)
	}
	kept := make([]*ratelimit.Limiter[int], limits)
	before := liveHeap()
	for i, alg := range algs {
		if kept[i], err = base.With(alg); err != nil {
			t.Fatal(err)
		}
		if d, err := kept[i].Allow(ctx, i); err != nil || !d.Allowed() {
			t.Fatalf("limit %d: %v, %v", i, d, err)
		}
	}
	after := liveHeap()
	runtime.KeepAlive(kept)
	runtime.KeepAlive(algs)
	const entry = 48 + 11 // a key's entry and its index slot (memorystore's TestManyLimitsCostLittle)
	perLimit := (float64(after) - float64(before)) / limits
	t.Logf("%d limits given per call, one key each: %.0f bytes per limit, its key's entry included", limits, perLimit)
	if perLimit-entry > 1024 {
		t.Errorf("%.0f bytes per limit beyond its key's entry, want under 1 KB", perLimit-entry)
	}
}

// liveHeap returns the bytes of live heap objects after two collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
