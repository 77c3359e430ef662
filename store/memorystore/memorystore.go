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
// memory.
//
// A store holds at most [DefaultMaxKeys] states (about a million), one per
// state ID and key (see [Store]), unless told otherwise ([WithMaxKeys]),
// so that a flood of new keys cannot take
// the process's memory. At the cap, a new key costs O(1) work whatever the
// cap: its shard looks at a few keys picked at random, drops those whose
// state has expired, and if none had, makes room as [WithFullPolicy] says:
// by evicting the key whose loss admits least (the default,
// [EvictLeastHarm]: never a spent key while another has room), or by
// refusing the new key with an error wrapping store.ErrFull
// ([RefuseNewKeys]). Keys already held are decided as ever. String keys
// longer than 512 bytes ([store.DefaultMaxKeyBytes]; [WithMaxKeyBytes])
// are refused with an error wrapping store.ErrKeyTooLong. A key holds at
// most store.MaxStatesPerKey states (one per state ID, sliding logs
// included): a Take or a booking that would make one more fails with an
// error wrapping store.ErrTooManyStates. The numbers a store gives state
// IDs and configurations are recycled once no state and no open table
// uses them, so limits given per call (Limiter.With) cost memory only
// while they are in use.
package memorystore

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// Store keeps limiter state in memory. Create it with [New].
//
// A limit's state for a key is named by (state ID, key), the state ID
// being store.Limit.ID, as on the Redis stores: every Open of a limit with
// the same ID reads and writes the same state, whichever Limiter or Policy
// it serves, and limits with different IDs never share state. So Limiters
// given one name on one Store share their keys' state (package ratelimit
// gives each unnamed Limiter or Policy an ID of its own: the Store is
// store.Local), a Limiter built anew for each request under a name
// decides as a long-lived one does, and a limit reopened with other
// parameters under the same ID carries its keys' state (see
// algorithm.Inheritor). A state written by
// another algorithm under the same ID is refused with an error wrapping
// store.ErrStateMismatch, unless the limit resets on mismatch
// (store.Limit.ResetOnMismatch): it then starts from what that state had
// used (algorithm.Carry), or fresh once its writer would read it fresh.
//
// All of a Store's state is in one table; Open only numbers the limits'
// IDs and configurations (a few hundred bytes for one never seen) and
// returns a small handle on the table.
type Store[K comparable] struct {
	shards      int
	maxKeys     int
	grace       int64 // µs
	full        FullPolicy
	maxKeyBytes int

	reg registry
	mu  sync.Mutex
	tab *table[K] // made by the first Open
}

var (
	_ store.Store[string] = (*Store[string])(nil)
	_ store.Local         = (*Store[string])(nil)
)

// Local reports true: the Store's state lives in this process only
// (store.Local).
func (s *Store[K]) Local() bool { return true }

// Option configures a Store.
type Option interface{ apply(*config) }

type config struct {
	shards      int
	maxKeys     int
	grace       time.Duration
	full        FullPolicy
	maxKeyBytes int
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

// WithMaxKeys caps how many states the store holds at n: never more. A
// state is one limit's for one key (one per state ID and key: a key of a
// Policy of two limits counts twice). A store made without it holds
// DefaultMaxKeys; n above MaxKeys
// means MaxKeys, the largest cap there is, and n below 1 is ignored.
//
// The cap is split evenly over the shards, each holding at most
// ⌊n/shards⌋ (the store uses fewer shards when n is small), so a table
// may reach its cap a little before n keys when keys hash unevenly. At
// the cap, a new key makes its shard look at 16 keys picked at random,
// O(1) work whatever the cap. The keys of the sample whose state has
// expired are dropped (grace period or not); if none had, the shard
// evicts one of the sample or refuses the new key, as WithFullPolicy says.
// An evicted key starts again from a fresh state, so the cap should sit
// well above the number of keys active within one window; Stats counts
// evictions and refusals.
func WithMaxKeys(n int) Option {
	return optionFunc(func(c *config) {
		if n >= 1 {
			c.maxKeys = n
		}
	})
}

// FullPolicy is what a table at its cap (WithMaxKeys) does with a new key
// when none of the keys it sampled has expired.
type FullPolicy uint8

const (
	// EvictLeastHarm evicts, of the keys sampled, the one whose loss
	// admits least: the one with the most room (the largest part of its
	// limit left, under the limit where the least part is left, for a
	// table of several), and among those with the same room the one
	// fresh again soonest. So a key that spent its limit is never evicted
	// while a sampled key has room, and a flood of new keys that each ask
	// once, under a limit above 1, evicts only its own kind. It is the
	// default.
	//
	// Its worst case is a flood of keys that each spend their whole
	// limit (one request each, for a limit of 1) after the victim spent
	// its own: they have no more room than the victim and are fresh
	// later, so the victim is evicted whenever it is in the sample. A
	// new key samples a given key with a chance of 16 in n, for a cap
	// of n (index positions are a hash of the key, secret to the
	// process), so such a flood evicts a spent key once per about n/16
	// new keys, each of which the attacker must spend. A victim spent
	// again after that is among the last spent, and is evicted again
	// only once most keys spent before it have gone: once per about 3n/4
	// new keys (README, "Floods of new keys").
	EvictLeastHarm FullPolicy = iota
	// RefuseNewKeys refuses the new key: its Take fails with an error
	// wrapping store.ErrFull, and it gets no state. Its Peek still
	// reports a fresh key and its Reset does nothing, without error.
	// Keys the table holds are decided as ever, and keys whose state has
	// expired make room when a new key's sample finds them or a sweep
	// drops them. A flood of new keys then
	// evicts nobody, at the price of every new key, legitimate or not,
	// until keys expire: a Limiter decides such requests by its failure
	// policy.
	RefuseNewKeys
)

// WithFullPolicy sets what a table at its cap does with a new key when
// none of the keys it sampled has expired: EvictLeastHarm, the default,
// or RefuseNewKeys. Other values are ignored.
func WithFullPolicy(p FullPolicy) Option {
	return optionFunc(func(c *config) {
		if p <= RefuseNewKeys {
			c.full = p
		}
	})
}

// WithMaxKeyBytes sets the longest key a table keeps, in bytes, for keys
// whose type is a string (or has a string as its underlying type):
// Take, Peek and Reset of a longer key fail with an error wrapping
// store.ErrKeyTooLong, charge nothing and store nothing. The default is
// store.DefaultMaxKeyBytes (512); values below 1 are ignored. Keys of
// other types have a fixed size and are not checked.
func WithMaxKeyBytes(n int) Option {
	return optionFunc(func(c *config) {
		if n >= 1 {
			c.maxKeyBytes = n
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

// MaxKeys is the most keys a table can hold (2^27 - 1, about 134
// million): its index numbers entries in 27 bits, so that an index word
// takes 4 bytes. WithMaxKeys(MaxKeys) asks for it.
const MaxKeys = maxEntries

// DefaultMaxKeys is the cap of a store made without WithMaxKeys: 2^20
// states (one per state ID and key), about a million. At 64.5 bytes per
// string key (README, "Bytes per key") a full store of token buckets,
// GCRA or fixed windows takes about 68 MB, plus the keys' own bytes (a
// string's, outside the table) and 48 bytes per key that stands denied;
// of sliding-window counters about 87 MB, of sliding logs of one entry
// about 137 MB.
const DefaultMaxKeys = 1 << 20

// DefaultGrace is the grace period of a store made without WithGrace.
const DefaultGrace = time.Second

// New returns an empty in-memory store.
func New[K comparable](opts ...Option) *Store[K] {
	c := config{
		shards:      max(64, 16*runtime.GOMAXPROCS(0)),
		maxKeys:     DefaultMaxKeys,
		grace:       DefaultGrace,
		maxKeyBytes: store.DefaultMaxKeyBytes,
	}
	for _, o := range opts {
		o.apply(&c)
	}
	c.maxKeys = min(c.maxKeys, MaxKeys)
	shards := 1
	for shards < c.shards {
		shards <<= 1
	}
	for shards > c.maxKeys {
		shards >>= 1 // every shard must hold at least one key
	}
	return &Store[K]{
		shards:      shards,
		maxKeys:     c.maxKeys,
		grace:       c.grace.Microseconds(),
		full:        c.full,
		maxKeyBytes: c.maxKeyBytes,
	}
}

// Open returns a table for limits: a handle on the store's state, in
// which each limit's state for a key is named by the limit's ID (see
// Store). The memory store has no clock of its own, so clock.Server() is
// rejected with store.ErrClockUnsupported.
func (s *Store[K]) Open(limits []store.Limit, clk clock.Clock) (store.Table[K], error) {
	if err := store.CheckLimits(limits); err != nil {
		return nil, err
	}
	if clock.IsServer(clk) {
		return nil, fmt.Errorf("%w: the memory store has no server clock; use clock.Local() or a fake clock", store.ErrClockUnsupported)
	}
	t := s.table()
	refs := make([]limitRef, len(limits))
	for i, l := range limits {
		refs[i] = s.reg.intern(l)
	}
	if len(refs) == 1 {
		h := &handle[K]{t: t, l: refs[0]}
		releaseOnCleanup(&s.reg, h, refs)
		return h, nil
	}
	p := &policy[K]{t: t, limits: refs, order: make([]int, len(refs))}
	for i := range p.order {
		p.order[i] = i
	}
	slices.SortFunc(p.order, func(a, b int) int { return cmp.Compare(refs[a].id, refs[b].id) })
	releaseOnCleanup(&s.reg, p, refs)
	return p, nil
}

// table returns the store's table, made on the first call.
func (s *Store[K]) table() *table[K] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tab == nil {
		s.tab = newTable[K](&s.reg, s.shards, s.maxKeys, s.grace)
		s.tab.full = s.full
		s.tab.limitKeyBytes(s.maxKeyBytes)
		s.reg.mu.Lock()
		s.reg.scan = s.tab.liveNumbers
		s.reg.mu.Unlock()
	}
	return s.tab
}

// Stats describes a store's contents.
type Stats struct {
	// Keys is how many states the store holds now, one per state ID and
	// key ((ID, key) pairs: a key of a Policy of two limits counts twice),
	// expired ones not yet swept included.
	Keys int
	// Evicted counts states dropped at the cap (WithMaxKeys) before they
	// had expired.
	Evicted uint64
	// Dropped counts states dropped after they had expired, by sweeps or
	// at the cap.
	Dropped uint64
	// Refused counts new states whose Take failed with store.ErrFull, at
	// the cap under RefuseNewKeys.
	Refused uint64
}

// Stats returns the store's statistics. It locks each shard in turn, so
// it is meant for tests and metrics, not hot paths.
func (s *Store[K]) Stats() Stats {
	s.mu.Lock()
	t := s.tab
	s.mu.Unlock()
	var st Stats
	if t == nil {
		return st
	}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		st.Keys += sh.keys
		sh.mu.Unlock()
	}
	st.Evicted = t.evicted.Load()
	st.Dropped = t.dropped.Load()
	st.Refused = t.refused.Load()
	return st
}
