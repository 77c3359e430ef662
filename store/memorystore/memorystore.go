// Package memorystore keeps limiter state in the memory of this process.
//
// State is sharded by key hash, each shard behind its own mutex, so
// decisions on different keys proceed in parallel. Keys are kept as they
// are (never encoded to strings), and a decision on a key that already has
// state allocates nothing.
//
// Memory stays bounded: a key's state is dropped once it has become
// indistinguishable from a key never seen (a full bucket, an empty log, a
// past window). There is no background goroutine: each shard sweeps its
// expired keys itself after as many operations as the last sweep left it
// keys (at least 64), which costs O(1) per operation amortised and keeps a
// shard below about twice its live keys. [WithMaxKeys] caps the number of
// keys; see it for what happens at the cap.
package memorystore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// Store keeps limiter state in memory. Create it with [New]. Each Open
// returns a table of its own, so one Store may serve several Limiters.
type Store[K comparable] struct {
	shards  int
	maxKeys int

	mu     sync.Mutex
	tables []*table[K]
}

var _ store.Store[string] = (*Store[string])(nil)

// Option configures a Store.
type Option interface{ apply(*config) }

type config struct {
	shards  int
	maxKeys int
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithShards sets the number of shards, rounded up to a power of two. The
// default is 16 per CPU (GOMAXPROCS), at least 64. Values below 1 are
// ignored.
func WithShards(n int) Option {
	return optionFunc(func(c *config) {
		if n >= 1 {
			c.shards = n
		}
	})
}

// WithMaxKeys caps how many keys each table holds at n: never more. The
// cap is split evenly over the shards, each holding at most ⌊n/shards⌋
// (the store uses fewer shards when n is small), so a table may start to
// evict a little before n keys when keys hash unevenly. At the cap, a new key first
// makes its shard drop every expired key; if none expired, the shard evicts
// the key closest to expiry among a few sampled at random (as Redis's
// volatile-ttl policy does). An evicted key starts again from a fresh
// state, so the cap should sit well above the number of keys active within
// one window; Stats counts evictions. 0, the default, means no cap.
func WithMaxKeys(n int) Option {
	return optionFunc(func(c *config) {
		if n >= 0 {
			c.maxKeys = n
		}
	})
}

// New returns an empty in-memory store.
func New[K comparable](opts ...Option) *Store[K] {
	c := config{shards: max(64, 16*runtime.GOMAXPROCS(0))}
	for _, o := range opts {
		o.apply(&c)
	}
	shards := 1
	for shards < c.shards {
		shards <<= 1
	}
	if c.maxKeys > 0 {
		for shards > c.maxKeys {
			shards >>= 1 // every shard must hold at least one key
		}
	}
	return &Store[K]{shards: shards, maxKeys: c.maxKeys}
}

// Open returns a table for alg. The memory store has no clock of its own,
// so clock.Server() is rejected with store.ErrClockUnsupported.
func (s *Store[K]) Open(alg algorithm.Algorithm, clk clock.Clock) (store.Table[K], error) {
	if clock.IsServer(clk) {
		return nil, fmt.Errorf("%w: the memory store has no server clock; use clock.Local() or a fake clock", store.ErrClockUnsupported)
	}
	t := &table[K]{
		alg:    alg,
		limit:  alg.Limit(),
		seed:   maphash.MakeSeed(),
		shards: make([]shard[K], s.shards),
		mask:   uint64(s.shards - 1),
	}
	if s.maxKeys > 0 {
		t.shardCap = s.maxKeys / s.shards
	}
	for i := range t.shards {
		t.shards[i].keys = make(map[K]*entry)
		t.shards[i].soon = math.MaxInt64
	}
	s.mu.Lock()
	s.tables = append(s.tables, t)
	s.mu.Unlock()
	return t, nil
}

// Stats describes a store's contents.
type Stats struct {
	// Keys is how many keys hold state now, expired ones not yet swept
	// included.
	Keys int
	// Evicted counts keys dropped at the WithMaxKeys cap before expiring.
	Evicted uint64
}

// Stats returns the store's statistics, summed over its tables. It locks
// each shard in turn, so it is meant for tests and metrics, not hot paths.
func (s *Store[K]) Stats() Stats {
	s.mu.Lock()
	tables := s.tables
	s.mu.Unlock()
	var st Stats
	for _, t := range tables {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			st.Keys += len(sh.keys)
			sh.mu.Unlock()
		}
		st.Evicted += t.evicted.Load()
	}
	return st
}

// table is one algorithm's state, sharded by key hash.
type table[K comparable] struct {
	alg      algorithm.Algorithm
	limit    int64
	seed     maphash.Seed
	shards   []shard[K]
	mask     uint64
	shardCap int // 0: no cap
	evicted  atomic.Uint64
}

// entry is one key's state and the instant (Unix µs) from which it equals
// a fresh state and may be dropped.
type entry struct {
	state   algorithm.State
	expires int64
}

type shard[K comparable] struct {
	mu   sync.Mutex
	keys map[K]*entry
	ops  int      // operations since the last sweep
	due  int      // keys the last sweep left: operations until the next one
	soon int64    // no key expires before this instant (Unix µs)
	_    [24]byte // keep neighbouring shards' mutexes on separate cache lines
}

// sweepMin is the fewest operations between two sweeps of a shard, so
// small shards do not sweep on every call.
const sweepMin = 64

func (t *table[K]) shard(key K) *shard[K] {
	return &t.shards[maphash.Comparable(t.seed, key)&t.mask]
}

func (t *table[K]) Take(_ context.Context, key K, now, cost int64) (algorithm.Result, error) {
	sh := t.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.tick(now)
	e := sh.keys[key]
	if e == nil {
		t.makeRoom(sh, now)
		e = &entry{state: t.alg.NewState(now)}
		sh.keys[key] = e
	}
	r := e.state.Take(now, cost)
	e.expires = now + r.ResetAfter
	sh.soon = min(sh.soon, e.expires)
	return r, nil
}

func (t *table[K]) Peek(_ context.Context, key K, now int64) (algorithm.Result, error) {
	sh := t.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.tick(now)
	e := sh.keys[key]
	if e == nil {
		return algorithm.Fresh(t.limit), nil
	}
	return e.state.Peek(now), nil
}

func (t *table[K]) Reset(_ context.Context, key K) error {
	sh := t.shard(key)
	sh.mu.Lock()
	delete(sh.keys, key)
	sh.mu.Unlock()
	return nil
}

// tick counts an operation and sweeps the shard once the count reaches
// the number of keys the last sweep left, unless no key can have expired
// yet (soon, the earliest expiry, is still ahead). The count is measured against
// that number, not the current size: a stream of new keys grows the size
// as fast as the count, which would then never catch up. A sweep thus
// visits at most twice the operations since the last one, O(1) amortised.
func (sh *shard[K]) tick(now int64) {
	sh.ops++
	if sh.ops < max(sh.due, sweepMin) {
		return
	}
	if now < sh.soon {
		sh.ops = 0 // nothing can have expired yet: skip this sweep
		return
	}
	sh.sweep(now)
}

// sweep drops every key whose state has expired at now.
func (sh *shard[K]) sweep(now int64) {
	sh.ops = 0
	sh.soon = math.MaxInt64
	for k, e := range sh.keys {
		if e.expires <= now {
			delete(sh.keys, k)
		} else {
			sh.soon = min(sh.soon, e.expires)
		}
	}
	sh.due = len(sh.keys)
}

// evictSample is how many keys a full shard samples to pick one to evict.
const evictSample = 8

// makeRoom ensures sh can take one more key under the cap.
func (t *table[K]) makeRoom(sh *shard[K], now int64) {
	if t.shardCap == 0 || len(sh.keys) < t.shardCap {
		return
	}
	sh.sweep(now)
	for len(sh.keys) >= t.shardCap {
		var victim K
		var soonest *entry
		n := 0
		for k, e := range sh.keys { // map iteration starts at a random key
			if soonest == nil || e.expires < soonest.expires {
				victim, soonest = k, e
			}
			if n++; n == evictSample {
				break
			}
		}
		delete(sh.keys, victim)
		t.evicted.Add(1)
	}
}
