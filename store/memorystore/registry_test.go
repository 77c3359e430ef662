package memorystore

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// waitReleased collects garbage until the registry holds at most want
// handles' numbers... that is, until no handle holds any number but
// those of keep (identity numbers), or fails after a deadline.
func waitIdle(t *testing.T, r *registry, keep map[uint32]bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		r.mu.Lock()
		busy := 0
		for i, s := range r.names {
			if !s.free && s.refs > 0 && !keep[uint32(i)] {
				busy++
			}
		}
		r.mu.Unlock()
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d identities still held by handles that are garbage", busy)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReclaimKeepsNumbersInUse checks that the registry recycles the
// numbers of limits no handle and no live entry holds, so that limits
// opened once each (Limiter.With with a limit per call) do not grow it
// for ever, and that it never recycles one a key's state is kept under:
// a spent key stays spent, and a state another config wrote is still read
// as that config's, after thousands of limits of other kinds have come
// and gone.
func TestReclaimKeepsNumbersInUse(t *testing.T) {
	defer func(at int) { reclaimAt = at }(reclaimAt)
	reclaimAt = 64
	ctx := context.Background()
	s := New[string](WithGrace(0), WithShards(1))
	bucket := func(c int64) algorithm.Algorithm {
		alg, err := tokenbucket.New(tokenbucket.Config{Capacity: c, Rate: 1.0 / 3600})
		if err != nil {
			t.Fatal(err)
		}
		return alg
	}
	open := func(alg algorithm.Algorithm, id string) store.Table[string] {
		tab, err := s.Open([]store.Limit{{Algorithm: alg, ID: id}}, clock.Local())
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	const t0 = 1_700_000_000_000_000
	func() { // the handles are garbage once this returns
		if r, err := open(bucket(3), "victim").Take(ctx, "k", t0, 3, nil); err != nil || !r.Allowed() {
			t.Fatalf("victim: %+v, %v", r, err)
		}
		if r, err := open(bucket(10), "carried").Take(ctx, "k", t0, 9, nil); err != nil || !r.Allowed() {
			t.Fatalf("carried: %+v, %v", r, err)
		}
	}()
	waitIdle(t, &s.reg, nil)
	// Limits of another kind, each under an ID of its own, each used once
	// on a key of its own that is fresh again a microsecond later.
	for i := range 5000 {
		alg, err := fixedwindow.New(fixedwindow.Config{Limit: int64(1 + i), Window: time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		now := int64(t0 + 10*i)
		if _, err := open(alg, "w"+string(rune('a'+i%26))+itoa(i)).Take(ctx, "other", now, 1, nil); err != nil {
			t.Fatal(err)
		}
		if i%500 == 499 {
			waitIdle(t, &s.reg, nil)
		}
	}
	// In use: an identity and a config per live key, at most twice the
	// keys a shard keeps between its sweeps (2·sweepMin), and the two
	// limits above; a sweep lets the registry grow to twice what it
	// leaves, and more numbers than that are never held.
	inUse := 2 * (2*sweepMin + 2)
	if n, bound := s.reg.numbers(), 2*max(reclaimAt, 2*inUse); n > bound {
		t.Errorf("the registry holds %d numbers after 5,000 limits used once, want at most %d", n, bound)
	}
	if r, err := open(bucket(3), "victim").Take(ctx, "k", t0+1, 1, nil); err != nil || r.Allowed() {
		t.Errorf("victim after the churn: %+v, %v; want denied: its key is spent for an hour", r, err)
	}
	// 1 of 10 left, carried as it is to a capacity of 20: 11 left.
	if r, err := open(bucket(20), "carried").Take(ctx, "k", t0+1, 1, nil); err != nil || r.Remaining != 10 {
		t.Errorf("carried after the churn: %+v, %v; want admitted with 10 left (1 of 10 left, carried to 20)", r, err)
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(b[n:])
		}
	}
}
