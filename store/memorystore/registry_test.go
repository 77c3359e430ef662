package memorystore

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
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

// TestReclaimAndCensusRace opens limits under IDs of their own from
// several goroutines, each deciding on one shared key and on keys of its
// own, and resetting, while the registry sweeps often and the shared key
// sits at its cap of states: run with -race. The shared key never holds
// more than the cap and a few (calls racing the moment it is first
// counted), and every decision is admitted or refused for the cap alone.
func TestReclaimAndCensusRace(t *testing.T) {
	defer func(at int) { reclaimAt = at }(reclaimAt)
	reclaimAt = 64
	ctx := context.Background()
	s := New[string](WithShards(4))
	const t0 = 1_700_000_000_000_000
	var wg sync.WaitGroup
	var refused atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 400 {
				alg, err := tokenbucket.New(tokenbucket.Config{Capacity: int64(2 + g*1000 + i), Rate: 1.0 / 3600})
				if err != nil {
					t.Error(err)
					return
				}
				tab, err := s.Open([]store.Limit{{Algorithm: alg, ID: "g" + itoa(g) + "-" + itoa(i)}}, clock.Local())
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := tab.Take(ctx, "shared", t0, 1, nil); errors.Is(err, store.ErrTooManyStates) {
					refused.Add(1)
				} else if err != nil {
					t.Errorf("shared key: %v", err)
					return
				}
				if _, err := tab.Take(ctx, "own"+itoa(g), t0, 1, nil); err != nil {
					t.Errorf("a key of its own: %v", err)
					return
				}
				if i%7 == 0 {
					if err := tab.Reset(ctx, "shared"); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if refused.Load() == 0 {
		t.Errorf("no Take on the shared key was refused: the test did not reach the cap")
	}
	if n := s.table().statesOf("shared", s.table().hash.Sum("shared")); n > store.MaxStatesPerKey+4 {
		t.Errorf("the shared key holds %d states, want at most %d", n, store.MaxStatesPerKey+4)
	}
}
