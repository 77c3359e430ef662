package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/keyhash"
	"github.com/go-ratelimit/ratelimit/store"
)

// maxDenialCacheKeys is the largest size WithDenialCache accepts.
const maxDenialCacheKeys = 1 << 24

// WithDenialCache answers a cost of 1 on up to maxKeys (1 to 2^24) keys the
// store denied as the store would until their RetryAfter, never admitting.
func WithDenialCache(maxKeys int) Option {
	return optionFunc(func(o *options) { o.denials = maxKeys; o.denialCache = true })
}

// denialWays is how many denials a set of the cache holds: the number of
// candidates for eviction when a new denial arrives at a full set.
const denialWays = 8

// denialCache holds denials of a cost of 1 by key, in sets of up to
// denialWays slots chosen by the key's hash. Readers take no lock: they
// load the slots of the key's set and read records that never change once
// published. Writers lock the set.
type denialCache[K comparable] struct {
	hash keyhash.Hasher[K]
	ways int
	sets []denialSet[K]
}

type denialSet[K comparable] struct {
	mu sync.Mutex
	// gen counts the Resets of keys of this set. A denial is recorded only
	// if no Reset happened since its request was sent: it may predate the
	// Reset.
	gen   atomic.Uint64
	slots [denialWays]atomic.Pointer[denial[K]]
}

// denial is a key's standing denial of a cost of 1: until until (Unix µs),
// nothing is admitted, and the key is fresh at reset. Published records
// are never written.
type denial[K comparable] struct {
	hash         uint64
	key          K
	until, reset int64
}

func newDenialCache[K comparable](maxKeys int) (*denialCache[K], error) {
	if maxKeys < 1 || maxKeys > maxDenialCacheKeys {
		return nil, fmt.Errorf("%w: WithDenialCache(%d): the size must be in [1, %d]", ErrInvalidConfig, maxKeys, maxDenialCacheKeys)
	}
	ways := min(denialWays, maxKeys)
	return &denialCache[K]{hash: keyhash.New[K](), ways: ways, sets: make([]denialSet[K], maxKeys/ways)}, nil
}

// set returns the set of a key whose hash is h.
func (c *denialCache[K]) set(h uint64) *denialSet[K] {
	// Lemire's multiply-shift maps the hash's top half onto [0, len).
	return &c.sets[(h>>32)*uint64(len(c.sets))>>32]
}

// find returns the slot holding key's denial and the denial, or nil.
func (c *denialCache[K]) find(s *denialSet[K], h uint64, key K) (*atomic.Pointer[denial[K]], *denial[K]) {
	for i := range c.ways {
		if d := s.slots[i].Load(); d != nil && d.hash == h && d.key == key {
			return &s.slots[i], d
		}
	}
	return nil, nil
}

// standing returns the answer key's cached denial gives at now, if any.
func (c *denialCache[K]) standing(s *denialSet[K], h uint64, key K, now int64) (algorithm.Result, bool) {
	if _, d := c.find(s, h, key); d != nil && now < d.until {
		return algorithm.Result{RetryAfter: d.until - now, ResetAfter: d.reset - now}, true
	}
	return algorithm.Result{}, false
}

// record remembers r, the store's denial of a cost of 1 for key at now,
// unless a key of the set was reset since gen was read.
func (c *denialCache[K]) record(s *denialSet[K], h uint64, key K, now int64, r algorithm.Result, gen uint64) {
	d := &denial[K]{hash: h, key: key, until: now + r.RetryAfter, reset: now + r.ResetAfter}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen.Load() != gen {
		return
	}
	if slot, _ := c.find(s, h, key); slot != nil {
		slot.Store(d)
		return
	}
	// An empty slot, else the denial that ends first, a past one included.
	victim, end := 0, int64(0)
	for i := range c.ways {
		old := s.slots[i].Load()
		if old == nil {
			victim = i
			break
		}
		if i == 0 || old.until < end {
			victim, end = i, old.until
		}
	}
	s.slots[victim].Store(d)
}

// settle keeps the cache true to a decision of cost at now the store
// made: an admission forgets a denial recorded meanwhile (only a Reset
// makes room before a denial's end, but a denial recorded by a request
// sent earlier may have arrived), a denial of cost 1 is recorded.
func (c *denialCache[K]) settle(s *denialSet[K], h uint64, key K, now, cost int64, r algorithm.Result, gen uint64) {
	switch {
	case r.Allowed():
		if slot, _ := c.find(s, h, key); slot != nil {
			c.forget(s, h, key, false)
		}
	case cost == 1:
		c.record(s, h, key, now, r, gen)
	}
}

// forget drops key's denial, if any. With reset set, denials of the set's
// keys whose requests are in flight are not recorded when they return.
func (c *denialCache[K]) forget(s *denialSet[K], h uint64, key K, reset bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if reset {
		s.gen.Add(1)
	}
	if slot, _ := c.find(s, h, key); slot != nil {
		slot.Store(nil)
	}
}

// denialTable answers requests of cost 1 on keys with a standing denial
// from its cache, and passes everything else to next.
type denialTable[K comparable] struct {
	next  store.Table[K]
	cache *denialCache[K]
}

func (t *denialTable[K]) Take(ctx context.Context, key K, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	if out != nil {
		// A policy's decision: the limits that would admit it report
		// states that change while another limit denies, so it is not
		// frozen; NewPolicy refuses the cache, and nothing is cached here.
		return t.next.Take(ctx, key, now, cost, out)
	}
	c := t.cache
	h := c.hash.Sum(key)
	s := c.set(h)
	if cost == 1 {
		if r, ok := c.standing(s, h, key, now); ok {
			return r, nil
		}
	}
	gen := s.gen.Load()
	r, err := t.next.Take(ctx, key, now, cost, nil)
	if err != nil {
		return r, err
	}
	c.settle(s, h, key, now, cost, r, gen)
	return r, nil
}

func (t *denialTable[K]) Peek(ctx context.Context, key K, now int64, out []algorithm.Result) (algorithm.Result, error) {
	if out != nil {
		return t.next.Peek(ctx, key, now, out)
	}
	c := t.cache
	h := c.hash.Sum(key)
	s := c.set(h)
	if r, ok := c.standing(s, h, key, now); ok {
		return r, nil
	}
	gen := s.gen.Load()
	r, err := t.next.Peek(ctx, key, now, nil)
	if err == nil && !r.Allowed() {
		c.record(s, h, key, now, r, gen)
	}
	return r, err
}

// Reset resets key in the store, then forgets its denial, whether the
// store's Reset succeeded or not: a denial the store's Reset may have
// undone is not kept.
func (t *denialTable[K]) Reset(ctx context.Context, key K) error {
	err := t.next.Reset(ctx, key)
	h := t.cache.hash.Sum(key)
	t.cache.forget(t.cache.set(h), h, key, true)
	return err
}

// Book passes a booking to the store. A booking at now (maxDelay 0, the
// refundable admission of ReserveN(ctx, key, n, 0)) is a decision, which
// the cache answers and records as Take's; one that may wait is not: a
// booked cost only makes a standing denial longer, which the store tells
// the next request after it ends.
func (t *denialTable[K]) Book(ctx context.Context, key K, now, cost, maxDelay int64, out []algorithm.Result) (algorithm.Result, store.Booking, bool, error) {
	b, err := bookerOf(t.next)
	if err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	if maxDelay != 0 || len(out) > 1 {
		return b.Book(ctx, key, now, cost, maxDelay, out) // a Policy's: NewPolicy refuses the cache
	}
	c := t.cache
	h := c.hash.Sum(key)
	s := c.set(h)
	if cost == 1 {
		if r, ok := c.standing(s, h, key, now); ok {
			if len(out) == 1 {
				out[0] = r
			}
			return r, store.Booking{}, false, nil
		}
	}
	gen := s.gen.Load()
	r, bk, ok, err := b.Book(ctx, key, now, cost, 0, out)
	if err != nil {
		return r, bk, ok, err
	}
	c.settle(s, h, key, now, cost, r, gen)
	return r, bk, ok, nil
}

// Cancel, Undo, Settle and Refund change what the key holds: its cached
// denial, which may no longer stand (or no longer say until when), is
// forgotten, whether the store's call succeeded or not (as Reset's).
func (t *denialTable[K]) Cancel(ctx context.Context, key K, now int64, bk store.Booking) error {
	b, err := bookerOf(t.next)
	if err != nil {
		return err
	}
	err = b.Cancel(ctx, key, now, bk)
	t.forget(key)
	return err
}

func (t *denialTable[K]) Undo(ctx context.Context, key K, now int64, bk store.Booking) (int64, error) {
	b, err := bookerOf(t.next)
	if err != nil {
		return 0, err
	}
	given, err := b.Undo(ctx, key, now, bk)
	t.forget(key)
	return given, err
}

func (t *denialTable[K]) Settle(ctx context.Context, key K, now int64, bk store.Booking, n int64) (store.Booking, error) {
	s, err := settlerOf(t.next)
	if err != nil {
		return bk, err
	}
	next, err := s.Settle(ctx, key, now, bk, n)
	t.forget(key)
	return next, err
}

func (t *denialTable[K]) Refund(ctx context.Context, key K, now, n int64, out []algorithm.Result) (algorithm.Result, error) {
	b, err := bookerOf(t.next)
	if err != nil {
		return algorithm.Result{}, err
	}
	r, err := b.Refund(ctx, key, now, n, out)
	t.forget(key)
	return r, err
}

// forget forgets key's denial, and any being recorded by a request sent
// before.
func (t *denialTable[K]) forget(key K) {
	h := t.cache.hash.Sum(key)
	t.cache.forget(t.cache.set(h), h, key, true)
}
