// Package memorystore keeps limiter state in the memory of this process.
//
// Each key's state is held by value in an entry of its own, with its own
// lock, found through an index that decisions read without locking: a
// decision writes nothing but its key's entry, so decisions on different
// keys proceed in parallel, and a decision allocates nothing, whether the
// key's state is live or has expired since its last request. Keys are kept
// as they are (never encoded to strings).
//
// Memory stays bounded without a background goroutine. A key whose state
// has become indistinguishable from a new key's (a full bucket, an empty
// log, a past window) keeps it for a grace period ([WithGrace], a second
// by default), so that a key far below its limit, whose state expires
// between its requests, is not dropped and made again each time. Expired
// keys are reclaimed as new keys arrive: each shard sweeps itself once it
// has gained as many new keys as it kept at its last sweep, dropping the
// keys expired for longer than the grace period. That costs O(1) per new
// key amortised and nothing on a steady set of keys, and keeps a shard to
// about twice its live keys plus those that expired within the grace
// period, whatever stream of keys arrives. The slots of dropped keys are
// reused for new ones, so memory does not shrink below its peak, as a Go
// map's does not. Entries of new keys are laid out in the order keys were
// first seen, so that keys used in that order are read from consecutive
// memory. [WithMaxKeys] caps the number of keys; see it for what
// happens at the cap.
package memorystore

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// Store keeps limiter state in memory. Create it with [New]. Each Open
// returns a table of its own, so one Store may serve several Limiters.
type Store[K comparable] struct {
	shards  int
	maxKeys int
	grace   int64 // µs

	mu     sync.Mutex
	tables []*table[K]
}

var _ store.Store[string] = (*Store[string])(nil)

// Option configures a Store.
type Option interface{ apply(*config) }

type config struct {
	shards  int
	maxKeys int
	grace   time.Duration
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
// one window; Stats counts evictions. 0, the default, and values above
// MaxKeys mean MaxKeys.
func WithMaxKeys(n int) Option {
	return optionFunc(func(c *config) {
		if n >= 0 {
			c.maxKeys = n
		}
	})
}

// WithGrace sets how long a key's state is kept once it has expired
// (become the same as a new key's) before the key may be dropped: one
// second by default. A key asked for again within the grace period finds
// its state where it left it; one asked for less often is dropped and
// made again on its next request, from reused memory. Longer periods keep
// more idle keys; 0 drops every expired key at the next sweep. Negative
// values are ignored.
func WithGrace(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d >= 0 {
			c.grace = d
		}
	})
}

// MaxKeys is the most keys a table ever holds (2^27 - 1, about 134
// million): its index numbers entries in 27 bits, so that an index word
// takes 4 bytes. A table made without WithMaxKeys is capped at MaxKeys,
// as if given it.
const MaxKeys = maxEntries

// DefaultGrace is the grace period of a store made without WithGrace.
const DefaultGrace = time.Second

// New returns an empty in-memory store.
func New[K comparable](opts ...Option) *Store[K] {
	c := config{shards: max(64, 16*runtime.GOMAXPROCS(0)), grace: DefaultGrace}
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
	return &Store[K]{shards: shards, maxKeys: c.maxKeys, grace: c.grace.Microseconds()}
}

// Open returns a table for limits. The memory store has no clock of its
// own, so clock.Server() is rejected with store.ErrClockUnsupported. The
// limits' IDs only need to differ: each Open makes a table of its own,
// which no other shares.
func (s *Store[K]) Open(limits []store.Limit, clk clock.Clock) (store.Table[K], error) {
	if err := store.CheckLimits(limits); err != nil {
		return nil, err
	}
	if clock.IsServer(clk) {
		return nil, fmt.Errorf("%w: the memory store has no server clock; use clock.Local() or a fake clock", store.ErrClockUnsupported)
	}
	algs := make([]algorithm.Algorithm, len(limits))
	for i, l := range limits {
		algs[i] = l.Algorithm
	}
	t := newTable[K](algs, s.shards, s.maxKeys, s.grace)
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
	// Evicted counts keys dropped at the cap (WithMaxKeys, or MaxKeys)
	// before expiring.
	Evicted uint64
	// Dropped counts keys dropped after their state had expired, by sweeps
	// or at the cap.
	Dropped uint64
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
			st.Keys += sh.keys
			sh.mu.Unlock()
		}
		st.Evicted += t.evicted.Load()
		st.Dropped += t.dropped.Load()
	}
	return st
}
