package redisstore

import (
	"time"

	"github.com/go-ratelimit/ratelimit/store"
)

// Option configures a Store.
type Option[K comparable] func(*Store[K])

// WithPrefix sets the prefix of every key the store writes (default
// DefaultPrefix). Limiters sharing a Redis must use different prefixes,
// and a prefix must not contain '{' or '}'.
func WithPrefix[K comparable](prefix string) Option[K] {
	return func(s *Store[K]) { s.cfg.Prefix = prefix }
}

// WithKeyEncoder sets how keys are turned into bytes (default
// store.DefaultKeyEncoder, which knows strings, integers and netip types).
func WithKeyEncoder[K comparable](encode store.KeyEncoder[K]) Option[K] {
	return func(s *Store[K]) { s.cfg.Encode = encode }
}

// WithTTLMargin keeps every key this much longer than the time after which
// its state is indistinguishable from a new key's (default 1 s; 0 keeps
// none). Keys then outlive their state by the margin, which only costs
// memory. A decision's instant is read before its script reaches Redis: a
// request that waited in a queue (a busy client, a pipeline of hundreds of
// callers) or comes from a server whose clock lags may find a key expired
// on Redis's clock that its own instant still needs, and start it afresh,
// admitting what the state would have refused (measured: 200 waiters on a
// bucket of 1 refilled every 2 ms, with no margin, had two admitted 0.6 ms
// apart). The margin must be at least that lag, or the clocks'
// disagreement; with clock.Server() the clocks cannot disagree, but a
// request's queueing still can.
func WithTTLMargin[K comparable](margin time.Duration) Option[K] {
	return func(s *Store[K]) { s.cfg.TTLMargin = margin }
}

// WithCoalescing sets how many calls for one key the store has in
// flight at once, per Limiter or Policy, before further Takes of the key
// wait and go together (default 8; 0 turns coalescing off). A Take of a
// key with fewer calls in flight goes at once, as without coalescing, so
// nothing waits at low load and there is no timer. Once inFlight are in
// flight, further Takes of the key wait in the process; when a call
// returns, those waiting go, up to 64 (16 with a sliding log), in one
// script call that decides them in arrival order, each exactly as if it
// had come alone after the ones before. A hot key then costs Redis one
// call per batch instead of one per decision. Fewer in flight make larger
// batches, so less Redis time per decision (1 is the least: worth it when
// many processes share one hot key, at the cost of some latency in each);
// more keep a key asked by a few callers at once off the line.
//
// Each caller keeps its own deadline: a batch's call runs under the
// store's own timeout (WithTimeout), a caller whose context ends while
// still waiting leaves uncharged, and one whose context ends while its
// batch is in flight gets an error with an unknown outcome, as from a
// single call. A lost reply fails every request of its batch; none is
// sent again. Bookings, cancels and refunds wait in the same line and go
// in batches of their kind; peeks and Reset always go alone. A negative
// inFlight fails New with algorithm.ErrInvalidConfig.
func WithCoalescing[K comparable](inFlight int) Option[K] {
	return func(s *Store[K]) { s.cfg.InFlight = inFlight }
}

// WithGroupCommit sets how many multi script calls (store.Multi's
// TakeAll, on one Redis) the store has in flight at once: past them,
// TakeAlls wait and go together in one call, each all-or-none, in
// arrival order (default DefaultCommitInFlight; 0 sends each alone).
// A batch's call runs under the store's own timeout (WithTimeout); its
// callers wait for it. A negative inFlight fails New with
// algorithm.ErrInvalidConfig.
func WithGroupCommit[K comparable](inFlight int) Option[K] {
	return func(s *Store[K]) { s.cfg.CommitInFlight = inFlight }
}

// WithTimeout sets the longest one script call may take, retries after
// a cluster's TRYAGAIN included (default 3 s). A Limiter or Policy never
// passes its caller's deadline or cancellation to the client
// (store.Remote): a caller stops waiting when its own context ends, while
// its call goes on, bounded by this timeout, and charges what Redis
// charges. Only a call that fails on its own, such as one that times out
// here, is an outage that a circuit breaker counts and a failure policy
// decides. A decision for a caller whose context can never end
// (context.Background()) goes alone without this bound, which would cost
// its hot path an allocation: the client's own timeouts bound it. d must
// be more than 0; New fails with algorithm.ErrInvalidConfig otherwise.
func WithTimeout[K comparable](d time.Duration) Option[K] {
	return func(s *Store[K]) {
		s.cfg.Timeout = d
		if d <= 0 {
			s.cfg.Timeout = -1 // refused by New (0 would mean the default)
		}
	}
}

// WithMaxKeyBytes sets the longest key the store accepts, in bytes of its
// encoding (the key encoder's output, before escaping, the prefix and the
// state ID); default store.DefaultMaxKeyBytes. Take, Peek and Reset of a
// longer key fail with store.ErrKeyTooLong before anything is sent, so
// that a client cannot make every decision copy, send and store a key of
// its choosing, however long. n must be at least 1.
func WithMaxKeyBytes[K comparable](n int) Option[K] {
	return func(s *Store[K]) {
		s.cfg.MaxKeyBytes = n
		if n < 1 {
			s.cfg.MaxKeyBytes = -1 // refused by New (0 would mean the default)
		}
	}
}

// EvictionCheck says what Open does when a Redis server's
// maxmemory-policy may evict limiter state: allkeys-lru, allkeys-lfu,
// allkeys-random, volatile-lru, volatile-lfu or volatile-random (every
// limiter key has a TTL). Such a server evicts limiter keys under memory
// pressure, and an evicted key starts afresh, so a client that has spent
// its limit is admitted again. noeviction and volatile-ttl are accepted
// (see the package documentation for what each costs).
type EvictionCheck int

const (
	// EvictionWarn, the default, opens the table and reports each server
	// that may evict as a warning: the table implements store.Warner, and
	// its Warnings return an error wrapping store.ErrEvicting that names
	// the server and its policy. A Limiter passes it to its error
	// handler, or logs it.
	EvictionWarn EvictionCheck = iota
	// EvictionRefuse makes Open fail with an error wrapping
	// store.ErrEvicting, and decisions too once a later check finds a
	// server that may evict (until one finds none).
	EvictionRefuse
	// EvictionUnchecked does not read the policy.
	EvictionUnchecked
)

// WithEvictionCheckInterval sets how long after a check of the servers'
// maxmemory-policy the first decision reads it again (default a minute):
// how soon a server switched to a policy that evicts is noticed (see
// WithEvictionCheck). d must be more than 0; New fails with
// algorithm.ErrInvalidConfig otherwise.
func WithEvictionCheckInterval[K comparable](d time.Duration) Option[K] {
	return func(s *Store[K]) {
		s.evictionEvery = d
		if d <= 0 {
			s.evictionEvery = -1 // refused by New (0 would mean the default)
		}
	}
}

// WithEvictionCheck sets what Open does when a server's maxmemory-policy
// may evict limiter state (default EvictionWarn). The store reads it
// through its Runner, which must be a PolicyReader (from every master of
// a cluster), at the first Open, within a second, and keeps the answer
// for all its tables. Then the first decision a minute after the last
// check, or a second after it when a decision got an OOM reply, reads it
// again, in a goroutine that ends with the check: what a later check
// finds is reported once to each table's reporter (store.Reporter: a
// Limiter's error handler), and with EvictionRefuse decisions fail with
// an error wrapping store.ErrEvicting while a server may evict. The check
// is best effort: a server that refuses CONFIG (managed services, an ACL
// without it) is taken as it is, silently; one that cannot be reached is
// asked again at an Open 10 s later or more.
func WithEvictionCheck[K comparable](check EvictionCheck) Option[K] {
	return func(s *Store[K]) { s.eviction = check }
}
