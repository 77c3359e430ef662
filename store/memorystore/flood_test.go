package memorystore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// hourly returns one algorithm of each kind, each admitting limit per
// hour.
func hourly(t testing.TB, limit int64) map[string]algorithm.Algorithm {
	t.Helper()
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	return map[string]algorithm.Algorithm{
		"tokenbucket": must(tokenbucket.New(tokenbucket.Config{Capacity: limit, Rate: float64(limit) / 3600})),
		"tokenbucket-interval": must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{
			Capacity: limit, Tokens: limit, Interval: time.Hour,
		})),
		"gcra":          must(gcra.New(gcra.Config{Burst: limit, Every: time.Hour / time.Duration(limit)})),
		"fixedwindow":   must(fixedwindow.New(fixedwindow.Config{Limit: limit, Window: time.Hour})),
		"slidinglog":    must(slidinglog.New(slidinglog.Config{Limit: limit, Window: time.Hour})),
		"slidingwindow": must(slidingwindow.New(slidingwindow.Config{Limit: limit, Window: time.Hour})),
	}
}

// TestFloodSparesSpentKeys plays an attacker that floods a full table with
// new keys, each asking once, to make it forget keys that spent their
// limit: the victims, spent at the start and asked again all along, are
// never admitted, whatever the algorithm. A new key that asked once has
// room left, and a key with room is evicted before a spent one.
func TestFloodSparesSpentKeys(t *testing.T) {
	const (
		limit   = 5 // per hour
		victims = 20
		rounds  = 3 // the flood is rounds × the cap new keys
	)
	caps := []int{1_000, 100_000}
	if raceEnabled || testing.Short() {
		caps = []int{1_000, 3_000}
	}
	for _, maxKeys := range caps {
		for name, alg := range hourly(t, limit) {
			t.Run(fmt.Sprintf("%s/cap=%d", name, maxKeys), func(t *testing.T) {
				s := memorystore.New[int](memorystore.WithMaxKeys(maxKeys))
				tab := open(t, s, alg)
				now := t0
				for v := range victims {
					if r := take(t, tab, -1-v, now, limit); !r.Allowed() {
						t.Fatalf("victim %d: first request of %d denied: %+v", v, limit, r)
					}
				}
				admitted := 0
				askVictims := func() {
					for v := range victims {
						if r := take(t, tab, -1-v, now, 1); r.Allowed() {
							admitted++
						}
					}
				}
				for k := range rounds * maxKeys {
					now++ // 1µs a key: the flood lasts well under the hour
					if r := take(t, tab, k, now, 1); !r.Allowed() {
						t.Fatalf("new key %d denied: %+v", k, r)
					}
					if k%(maxKeys/10) == 0 {
						askVictims()
					}
				}
				askVictims()
				st := s.Stats()
				if admitted != 0 {
					t.Errorf("spent victims admitted %d times during a flood of %d new keys, want 0 (Stats() = %+v)", admitted, rounds*maxKeys, st)
				}
				if st.Keys > maxKeys || st.Evicted == 0 {
					t.Errorf("Stats() = %+v, want at most %d keys and evictions: the flood was meant to fill the table", st, maxKeys)
				}
			})
		}
	}
}

// TestMaxKeysEvictsMostRoom checks the order in which a full shard evicts
// keys that have not expired: the one with the most room first, whatever
// their expiry. A shard of 4 keys is sampled whole.
func TestMaxKeysEvictsMostRoom(t *testing.T) {
	log, err := slidinglog.New(slidinglog.Config{Limit: 10, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := memorystore.New[string](memorystore.WithShards(1), memorystore.WithMaxKeys(4))
	tab := open(t, s, log)
	take(t, tab, "spent", t0, 10)       // room 0, fresh again at t0+1s: the soonest
	take(t, tab, "half", t0+100_000, 5) // room 5
	take(t, tab, "most", t0+500_000, 1) // room 9, fresh again at t0+1.5s: the latest
	take(t, tab, "some", t0+200_000, 8) // room 2
	take(t, tab, "new", t0+600_000, 1)  // the key being added
	if got := s.Stats(); got.Keys != 4 || got.Evicted != 1 {
		t.Fatalf("Stats() = %+v, want 4 keys, 1 evicted", got)
	}
	now := t0 + 600_000
	for key, want := range map[string]int64{"spent": 0, "half": 5, "most": 10, "some": 2, "new": 9} {
		if r := peek(t, tab, key, now); r.Remaining != want {
			t.Errorf("Peek(%s).Remaining = %d, want %d", key, r.Remaining, want)
		}
	}
}

// TestMaxKeysBreaksTiesBySoonestExpiry checks that among keys with the
// same room a full shard evicts the one that will be fresh again first:
// the one that loses least.
func TestMaxKeysBreaksTiesBySoonestExpiry(t *testing.T) {
	s := memorystore.New[string](memorystore.WithShards(1), memorystore.WithMaxKeys(3))
	tab := open(t, s, mustLog(t, 2)) // 2 per second
	take(t, tab, "b", t0+200_000, 2)
	take(t, tab, "a", t0+100_000, 2) // spent first: fresh again first
	take(t, tab, "c", t0+300_000, 2)
	take(t, tab, "new", t0+400_000, 1)
	now := t0 + 400_000
	for key, want := range map[string]int64{"a": 2, "b": 0, "c": 0, "new": 1} {
		if r := peek(t, tab, key, now); r.Remaining != want {
			t.Errorf("Peek(%s).Remaining = %d, want %d", key, r.Remaining, want)
		}
	}
}

// TestMaxKeysWeighsEveryLimit checks eviction in a table of two limits,
// whose states are kept one per limit and key, each counting against the
// cap: a state with no room left is spared while another has room, and
// room is a fraction of each limit: a key that used four fifths of a
// large limit keeps that state before one that used half of a small one,
// though more of the large limit remains than of the small.
func TestMaxKeysWeighsEveryLimit(t *testing.T) {
	slow := mustBucket(t, 100, 100.0/3600) // 100 per hour
	fast := mustBucket(t, 10, 10)          // 10 per second
	s := memorystore.New[string](memorystore.WithShards(1), memorystore.WithMaxKeys(6))
	tab, err := s.Open(store.LimitsOf(slow, fast), nil)
	if err != nil {
		t.Fatal(err)
	}
	takeBoth := func(key string, now, cost int64) {
		t.Helper()
		if r, err := tab.Take(ctx, key, now, cost, nil); err != nil || !r.Allowed() {
			t.Fatalf("Take(%s, %d) = %+v, %v; want admitted", key, cost, r, err)
		}
	}
	for i := range int64(8) { // 80 of the slow limit, the fast one full again each second
		takeBoth("used-large", t0+i*1_000_000, 10)
	}
	now := t0 + 8_000_000
	takeBoth("used-small", now, 5)  // 95% of the slow limit left, 50% of the fast
	takeBoth("spent-fast", now, 10) // 90% of the slow limit left, none of the fast
	// The new key's two states take the places of used-large's fast one,
	// fresh again, and of the state with the most room: used-small's slow
	// one, with 95% left.
	takeBoth("new", now, 1)
	out := make([]algorithm.Result, 2)
	for key, want := range map[string][2]int64{
		"used-large": {20, 10}, // 20%: kept; the fast one fresh
		"used-small": {100, 5}, // the slow one evicted; 50% of the fast one kept
		"spent-fast": {90, 0},
		"new":        {99, 9},
	} {
		if _, err := tab.Peek(ctx, key, now, out); err != nil {
			t.Fatal(err)
		}
		if got := [2]int64{out[0].Remaining, out[1].Remaining}; got != want {
			t.Errorf("Peek(%s): %v left under the two limits, want %v", key, got, want)
		}
	}
}

// TestRefuseNewKeys checks a full table that refuses new keys: their Take
// fails with ErrFull and stores nothing, their Peek reports a fresh key
// and their Reset does nothing, while the keys it holds are decided as
// ever, and keys whose state has expired make room.
func TestRefuseNewKeys(t *testing.T) {
	const maxKeys = 10
	s := memorystore.New[string](memorystore.WithShards(1), memorystore.WithMaxKeys(maxKeys),
		memorystore.WithFullPolicy(memorystore.RefuseNewKeys))
	tab := open(t, s, mustBucket(t, 10, 10)) // a token refills in 100ms
	for i := range maxKeys {
		take(t, tab, fmt.Sprint("k", i), t0, 1+int64(i)) // k0 full again at t0+100ms, k9 at t0+1s
	}
	now := t0 + 50_000
	for i := range 3 {
		r, err := tab.Take(ctx, fmt.Sprint("new", i), now, 1, nil)
		if !errors.Is(err, store.ErrFull) || errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Take(new%d) at the cap: %+v, %v; want an error wrapping ErrFull, not ErrUnavailable", i, r, err)
		}
	}
	if r := peek(t, tab, "new0", now); r != algorithm.Fresh(10) {
		t.Errorf("Peek(new0) at the cap = %+v, want %+v", r, algorithm.Fresh(10))
	}
	if err := tab.Reset(ctx, "new0"); err != nil {
		t.Errorf("Reset(new0) at the cap = %v, want nil", err)
	}
	if got, want := s.Stats(), (memorystore.Stats{Keys: maxKeys, Refused: 3}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	// Held keys are decided as ever, admitted and denied.
	if r := take(t, tab, "k0", now, 9); !r.Allowed() || r.Remaining != 0 {
		t.Errorf("Take(k0, 9) = %+v, want admitted with nothing left", r)
	}
	if r := take(t, tab, "k9", now, 1); r.Allowed() {
		t.Errorf("Take(k9, 1) = %+v, want denied: it took its 10", r)
	}
	// k1 is full again at t0+200ms: its slot goes to the next new key.
	now = t0 + 200_000
	if r, err := tab.Take(ctx, "new0", now, 1, nil); err != nil || !r.Allowed() {
		t.Fatalf("Take(new0) once k1 has expired = %+v, %v; want admitted", r, err)
	}
	if _, err := tab.Take(ctx, "new1", now, 1, nil); !errors.Is(err, store.ErrFull) {
		t.Errorf("Take(new1) with nothing else expired = %v, want ErrFull", err)
	}
	if got, want := s.Stats(), (memorystore.Stats{Keys: maxKeys, Dropped: 1, Refused: 4}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

// TestRefuseNewKeysOfSeveralLimits checks RefuseNewKeys on a table of two
// limits, whose decisions take a path of their own.
func TestRefuseNewKeysOfSeveralLimits(t *testing.T) {
	s := memorystore.New[int](memorystore.WithShards(1), memorystore.WithMaxKeys(4), // 2 keys of 2 limits
		memorystore.WithFullPolicy(memorystore.RefuseNewKeys))
	tab, err := s.Open(store.LimitsOf(mustBucket(t, 5, 1), mustWindow(t, 3)), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]algorithm.Result, 2)
	for k := range 2 {
		if r, err := tab.Take(ctx, k, t0, 1, out); err != nil || !r.Allowed() {
			t.Fatalf("Take(%d) = %+v, %v; want admitted", k, r, err)
		}
	}
	out[0], out[1] = algorithm.Result{Remaining: -1}, algorithm.Result{Remaining: -1}
	if _, err := tab.Take(ctx, 2, t0, 1, out); !errors.Is(err, store.ErrFull) {
		t.Errorf("Take(2) at the cap = %v, want ErrFull", err)
	}
	if r, err := tab.Take(ctx, 0, t0, 2, out); err != nil || !r.Allowed() || r.Remaining != 0 || out[0].Remaining != 2 {
		t.Errorf("Take(0, 2) = %+v, %v, %+v; want admitted, 2 tokens and no window left", r, err, out)
	}
	if r, err := tab.Peek(ctx, 2, t0, nil); err != nil || r != algorithm.Fresh(3) {
		t.Errorf("Peek(2) at the cap = %+v, %v; want %+v", r, err, algorithm.Fresh(3))
	}
}

// TestPeekAtTheCapStoresNothing checks that Peek of keys a full table
// does not hold neither fails nor evicts, under either policy.
func TestPeekAtTheCapStoresNothing(t *testing.T) {
	for _, policy := range []memorystore.FullPolicy{memorystore.EvictLeastHarm, memorystore.RefuseNewKeys} {
		s := memorystore.New[int](memorystore.WithShards(1), memorystore.WithMaxKeys(10), memorystore.WithFullPolicy(policy))
		tab := open(t, s, mustBucket(t, 2, 1.0/3600))
		for k := range 10 {
			take(t, tab, k, t0, 2)
		}
		for k := 10; k < 1000; k++ {
			if r := peek(t, tab, k, t0); r != algorithm.Fresh(2) {
				t.Fatalf("policy %d: Peek(%d) at the cap = %+v, want %+v", policy, k, r, algorithm.Fresh(2))
			}
		}
		if got, want := s.Stats(), (memorystore.Stats{Keys: 10}); got != want {
			t.Errorf("policy %d: Stats() after peeks = %+v, want %+v", policy, got, want)
		}
	}
}
