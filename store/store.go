// Package store defines where a Limiter keeps its state.
//
// This package is for implementers of stores. A [Store] is opened once per
// Limiter or Policy, for its limits (one or several algorithms) and clock;
// the [Table] it returns applies every limit's transition to one key at a
// time, atomically: a request is charged to all of a key's limits or to
// none. Stores do only
// storage and atomicity: the algorithm's math belongs to the algorithm (run
// in Go by the memory store, or as the matching Lua script by the Redis
// stores), and the instant comes from the Limiter, which reads its clock
// once per decision.
//
// The storetest package checks that a Store keeps this contract.
package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/nilness"
)

var (
	// ErrClockUnsupported reports a clock the store cannot use, such as
	// clock.Server() with a store that has no clock of its own.
	ErrClockUnsupported = errors.New("ratelimit: clock not supported by this store")

	// ErrAlgorithmUnsupported reports an algorithm the store cannot run.
	ErrAlgorithmUnsupported = errors.New("ratelimit: algorithm not supported by this store")

	// ErrUnavailable wraps every error of a remote store's backend
	// (connection refused, timeout, a script error) but a store out of room
	// (ErrFull): the decision could not be made. When the cause is a timeout, the request may still have been
	// charged; the store never retries it on its own.
	ErrUnavailable = errors.New("ratelimit: store unavailable")

	// ErrFull reports a store that refused to keep state for a key because
	// it is out of room: a memory table at its cap that refuses new keys,
	// or a Redis at maxmemory under noeviction (its OOM reply). It is no
	// outage: the store is healthy, and answers for keys it already holds.
	// A Limiter's failure policy decides the request, but the circuit
	// breaker does not count it, so that a flood of new keys cannot open
	// the breaker for everyone. It does not match ErrUnavailable.
	ErrFull = errors.New("ratelimit: store full")

	// ErrKeyTooLong reports a key longer than the store keeps (see
	// DefaultMaxKeyBytes). It is the caller's error: nothing is charged,
	// no failure policy decides, and the breaker does not count it.
	ErrKeyTooLong = errors.New("ratelimit: key too long")

	// ErrStateMismatch reports a key whose stored state was written by
	// another algorithm, or in a format this version does not read (a
	// Redis key of another type, a value out of range, user data under
	// the store's prefix): two limits configured differently share a
	// state ID, or something else writes there. The state is left as it
	// was and nothing is charged. It is no outage: no failure policy
	// decides it and the circuit breaker does not count it; the error is
	// returned as it is. It does not match ErrUnavailable.
	ErrStateMismatch = errors.New("ratelimit: the key's state was written by another algorithm or format")

	// ErrTooManyStates reports a key that holds MaxStatesPerKey states, to
	// which a Take or a booking would add another (a limit under a state
	// ID the key has no state for): limits under IDs of their own (names
	// made per request, or unnamed Limiters built anew on a memory store)
	// that change more often than the key's state expires. Nothing is
	// charged or written.
	// It is the caller's error, as ErrKeyTooLong is: no failure policy
	// decides it, and the circuit breaker does not count it. It matches
	// neither ErrUnavailable nor ErrFull.
	ErrTooManyStates = errors.New("ratelimit: the key holds the most states a store keeps for one key")

	// ErrInvalidBooking reports a booking handed to a table that did not
	// make it (a Reservation of another Limiter, or a zero one). Nothing
	// is given back.
	ErrInvalidBooking = errors.New("ratelimit: a booking this limiter did not make")

	// ErrEvicting reports a Redis whose maxmemory-policy may evict keys that
	// hold limiter state (allkeys-lru, allkeys-lfu, allkeys-random): an
	// evicted key starts afresh, so a spent client is admitted again. The
	// Redis stores warn with it (see Warner, and Reporter for a server
	// switched after Open), or, when asked to, refuse to open a table and
	// fail decisions with it. It is no outage: no failure policy decides
	// it and the circuit breaker does not count it.
	ErrEvicting = errors.New("ratelimit: the Redis eviction policy may drop limiter state")
)

// DefaultMaxKeyBytes is the longest key, in bytes, that a store keeps when
// not told otherwise: a string key's length in memory, a key's encoding in
// Redis (before the prefix and state ID). Longer keys fail with
// ErrKeyTooLong, so that a client cannot make each decision cost a
// megabyte of hashing, copying and memory.
const DefaultMaxKeyBytes = 512

// MaxStatesPerKey is the most states a store keeps for one key: one per
// state ID (a Limiter's, shared by the Limiters of its With, and each of a
// Policy's limits'). A Take or a booking that would keep one more fails
// with an error wrapping ErrTooManyStates; Peek, Refund, Cancel and Reset
// never add a state. So a client choosing its own limits cannot make one
// key hold state without bound: on Redis, a key's hash holds at most this
// many fields (about 20 KB with 8-byte IDs, by MEMORY USAGE on Redis 7.0; a
// sliding log's state is a sorted set of its own, with its own TTL, and
// is not counted), and the memory store keeps as
// many entries at most for one key. A state read as fresh still counts
// until the key (on Redis) or the entry (in memory) expires. It is far
// above the limits of any real Policy, and at least the most limits a
// Redis store decides in one Policy (300).
const MaxStatesPerKey = 512

// Warner is implemented by tables that found something wrong with their
// store when they were opened which does not stop them from deciding, such
// as a Redis that may evict limiter state. A Limiter or Policy passes each
// warning, when it is made, to its error handler (WithErrorHandler), or
// logs it with log/slog when it has none.
type Warner interface {
	// Warnings returns the problems found, each an error a caller can
	// test with errors.Is (ErrEvicting, say).
	Warnings() []error
}

// Remote is implemented by tables whose calls wait on something outside
// the process, such as a Redis round trip. A Limiter or Policy calls such
// a table, for a caller whose context can end, under a context that keeps
// the caller's values but none of its cancellation or deadline, with a
// deadline of its own instead, at most CallTimeout after the call began
// (shared by the calls that begin about the same time), so that no
// caller's deadline reaches the client library, which shares
// connections, dials and batches among callers. A caller whose deadline
// is nearer than CallTimeout stops waiting when its own context ends, and
// the call goes on to its end; other callers wait for the call. A caller
// whose context cannot end (context.Background()) is passed on as it is,
// and the table bounds such calls itself. The table's errors are then its
// own: only they reach a circuit breaker or a failure policy.
type Remote interface {
	// CallTimeout returns the longest one call of the table may take.
	CallTimeout() time.Duration
}

// Refuser is implemented by remote tables (Remote) that can tell that
// their server refuses connections while a call waits on a dial that the
// client library retries: go-redis retries a refused dial 5 times, 100 ms
// apart by default, so a caller whose deadline is nearer would see its
// own deadline end rather than the store fail. A Limiter or Policy asks
// a table that is one when a caller's context ends while its call is in
// flight: when Refused says the server refuses connections, the caller
// gets an error matching ErrUnavailable (and its context's error) rather
// than its context's error alone. The call goes on either way. The Redis
// stores' tables are Refusers, passing on what their Runner says when it
// is one (the go-redis store's is).
type Refuser interface {
	// Refused returns an error wrapping ErrUnavailable, which names the
	// refusal, when the server refused the latest connection the table's
	// client tried to make and none has been made since; else nil. It is
	// called from many goroutines at once.
	Refused() error
}

// Reporter is implemented by tables that may find something wrong with
// their store after Open, as a Warner does when it is opened: a Redis
// switched to a maxmemory-policy that may evict limiter state, say. A
// Limiter or Policy calls ReportTo once, after Open, before any decision,
// with the function that passes each problem to its error handler
// (WithErrorHandler), or logs it with log/slog when it has none. The
// table calls report from its decisions' goroutines, once per problem
// found, never while it holds a lock of its own.
type Reporter interface {
	ReportTo(report func(error))
}

// Local is implemented by stores whose state lives in this process's
// memory only, where no other process and no other store value can read
// it, such as the memory store. Package ratelimit asks it of the store a
// Limiter or Policy is built on: on a store whose Local returns true, a
// limit given no name is a quota of its own, under an ID unique in the
// process that no name can equal (it starts with a byte no name may
// hold); on any other store an unnamed limit is refused, since other
// processes or store values sharing the backend could not tell which
// quota it is. A store that keeps state elsewhere (Redis, a database, a
// file) must not return true; one wrapping another returns what the
// wrapped store says.
type Local interface {
	// Local reports whether every state the store keeps lives in this
	// process's memory only.
	Local() bool
}

// Limit is one limit a table keeps state for.
type Limit struct {
	// Algorithm decides.
	Algorithm algorithm.Algorithm
	// ID names the limit's state among those kept for one key: limits
	// with the same ID share state (on Redis under the same prefix, from
	// any process; in memory on the same Store, from any Open), limits
	// with different IDs never do. Package ratelimit passes a limit's
	// name (ratelimit.WithName), or on a Local store an ID of its own
	// for an unnamed limit; "" is an ID like any other (on Redis, the
	// field "" of the key's hash).
	ID string
	// Inherit is how a state written under this ID by the same algorithm
	// with other parameters (see algorithm.Tag) is carried: AsIs, the
	// zero value, or Proportional.
	Inherit algorithm.Rule
	// ResetOnMismatch reads a key whose state under this ID no algorithm
	// of this module can read (a format this version does not read, a
	// Redis key of another type, an algorithm of no registered Kind) as
	// fresh, instead of failing with ErrStateMismatch. A state another
	// Kind of algorithm wrote is read, either way, as this algorithm's
	// fresh state charged with what that state had used at the decision's
	// instant (algorithm.Carry, at most the limit): switching algorithms
	// never hands out a fresh quota. Such a state is replaced only when a
	// request is admitted (a denial's RetryAfter is computed from the
	// carried usage, and a Peek reports it); a Refund or Cancel gives
	// nothing of it back. User data under a store's prefix is never
	// overwritten without it.
	ResetOnMismatch bool
}

// DefaultID returns an ID for callers of Open that name a limit by its
// configuration: a fingerprint of the algorithm's name and parameters, 8
// hex digits of their FNV-1a hash, such as "1a2b3c4d". Two limits that
// differ in algorithm or parameters get different IDs (but for a chance of
// 2^-32), so they never read each other's state; two configured alike
// share it. Package ratelimit does not use it: a limit's name is its ID.
func DefaultID(spec algorithm.Spec) string {
	h := fnv.New32a()
	h.Write([]byte(spec.Name))
	var b [8]byte // a NUL ends the name: no name is a prefix of another's bytes
	h.Write(b[:1])
	for _, p := range spec.Params {
		bits := math.Float64bits(p)
		for i := range b {
			b[i] = byte(bits >> (8 * i))
		}
		h.Write(b[:])
	}
	return fmt.Sprintf("%08x", h.Sum32())
}

// CheckLimits returns an error wrapping algorithm.ErrInvalidConfig when
// limits is empty or has more than MaxStatesPerKey limits, holds a nil
// algorithm (a typed nil too) or one whose Limit is outside 1 to
// algorithm.MaxLimit (a zero value, which admits nothing), names one state
// twice (two limits of one table would write the same state), or asks a
// rule the algorithm has not (algorithm.CheckRule).
func CheckLimits(limits []Limit) error {
	if len(limits) == 0 {
		return fmt.Errorf("%w: no limits", algorithm.ErrInvalidConfig)
	}
	if len(limits) > MaxStatesPerKey {
		return fmt.Errorf("%w: %d limits; a key keeps at most %d states (MaxStatesPerKey)", algorithm.ErrInvalidConfig, len(limits), MaxStatesPerKey)
	}
	for i, l := range limits {
		if nilness.Is(l.Algorithm) {
			return fmt.Errorf("%w: limit %d has a nil algorithm", algorithm.ErrInvalidConfig, i)
		}
		if err := CheckAlgorithm(l.Algorithm); err != nil {
			return fmt.Errorf("limit %d: %w", i, err)
		}
		if err := algorithm.CheckRule(l.Algorithm, l.Inherit); err != nil {
			return fmt.Errorf("limit %d: %w", i, err)
		}
		for j := range i {
			if limits[j].ID == l.ID {
				return fmt.Errorf("%w: limits %d and %d have the same state ID %q (two limits configured alike need IDs of their own)", algorithm.ErrInvalidConfig, j, i, l.ID)
			}
		}
	}
	return nil
}

// CheckAlgorithm returns an error wrapping algorithm.ErrInvalidConfig when
// alg, not nil, can never admit a request: its Limit is outside 1 to
// algorithm.MaxLimit, as an algorithm's zero value (a tokenbucket.Bucket{}
// rather than one from tokenbucket.New) has.
func CheckAlgorithm(alg algorithm.Algorithm) error {
	if n := alg.Limit(); n < 1 || n > algorithm.MaxLimit {
		return fmt.Errorf("%w: %T has a limit of %d, so it admits nothing: build it with its package's New, Per or PerSecond, not as a zero value", algorithm.ErrInvalidConfig, alg, n)
	}
	return nil
}

// Store opens tables of limiter state.
type Store[K comparable] interface {
	// Open prepares the store to keep state for limits (at least one;
	// their IDs differ), decided at instants read from clk. It returns an
	// error wrapping ErrClockUnsupported or ErrAlgorithmUnsupported when
	// the combination makes no sense here.
	Open(limits []Limit, clk clock.Clock) (Table[K], error)
}

// Table holds its limits' state per key. Its methods are safe for
// concurrent use; calls for one key are applied one at a time, each one
// atomically.
//
// Instants are Unix microseconds read by the caller. A table opened with
// clock.Server() ignores them and reads the store's own clock.
//
// Take and Peek return the limits' results combined by algorithm.Combine.
// When out is not nil it has one element per limit, in the order the
// limits were opened, and receives each limit's own result; a table of one
// limit is called with out nil on the hot path.
type Table[K comparable] interface {
	// Take decides cost at now for key (1 ≤ cost ≤ every limit's Limit;
	// the caller checks): when every limit admits it, each is charged it
	// and reports the state it left (RetryAfter 0); otherwise nothing is
	// charged and each reports what Peek would for that cost. A key
	// without state starts from each algorithm's Init.
	Take(ctx context.Context, key K, now, cost int64, out []algorithm.Result) (algorithm.Result, error)
	// Peek reports key's state at now for a cost of 1 without changing
	// it. A key without state is reported as algorithm.Fresh.
	Peek(ctx context.Context, key K, now int64, out []algorithm.Result) (algorithm.Result, error)
	// Reset forgets key's state under every limit, so that it is treated
	// as never seen.
	Reset(ctx context.Context, key K) error
}

// LimitsOf returns limits of algs, each with its DefaultID.
func LimitsOf(algs ...algorithm.Algorithm) []Limit {
	out := make([]Limit, len(algs))
	for i, alg := range algs {
		out[i] = Limit{Algorithm: alg}
		if alg != nil {
			out[i].ID = DefaultID(alg.Spec())
		}
	}
	return out
}

// Booking is what a table's Book returns for Cancel, Undo and Settle:
// the booked instant and cost, and what the table needs to tell the
// key's state the booking charged from any other (a generation per
// limit) and to give the booking back exactly.
type Booking struct {
	// Act is the instant (Unix µs, on the table's clock) the booking is
	// due at.
	Act int64
	// Cost is what was booked.
	Cost int64
	// Undo is the table's own record of the states the booking left and
	// replaced, and of their generations, per limit; only the table that
	// made it reads it.
	Undo any
	// Release, set by the caller of Booker.Undo, gives the booking back
	// to the limits whose algorithm holds (algorithm.Holder) alone, and
	// leaves every other limit charged: a Reservation's Release, the end
	// of a request that happened. Gives says which limits give back.
	Release bool
}

// Gives reports whether Booker.Undo of b gives anything back to a limit
// of algorithm alg: every limit, except for a Release, which frees the
// holds (algorithm.Holder) alone.
func (b Booking) Gives(alg algorithm.Algorithm) bool {
	return !b.Release || algorithm.Holds(alg)
}

// Settler is implemented by tables that change a booking's cost after it
// is made (every table of this module's stores): a Reservation's Settle.
// Its method is safe for concurrent use, and atomic per key as Take is.
type Settler[K comparable] interface {
	// Settle makes b's cost n (0 ≤ n ≤ algorithm.MaxLimit), at now, and
	// returns the booking at its new cost, for later calls to give back
	// or settle again. Below b.Cost, every limit gives back b.Cost − n as
	// Undo gives back (algorithm.Undoer, a partial undo; n = 0 is Undo);
	// above it, every limit is charged n − b.Cost even past its limit
	// (algorithm.Settler.Owe), a debt later requests wait out, in the
	// key's state as it is now. It returns an error wrapping
	// ErrAlgorithmUnsupported, changing nothing, when a limit's algorithm
	// cannot be charged so (not an algorithm.Settler), and one wrapping
	// algorithm.ErrInvalidCost for an n out of range.
	Settle(ctx context.Context, key K, now int64, b Booking, n int64) (Booking, error)
}

// Booker is implemented by tables that book admissions ahead of their
// instant, give bookings back and refund charges (every table of this
// module's stores). Its methods are safe for concurrent use, and
// atomic per key as Take is.
type Booker[K comparable] interface {
	// Book books cost (1 ≤ cost ≤ every limit's Limit) for key at the
	// earliest instant at or after now at which every limit admits it
	// (algorithm.EarliestAll), when that instant is at most maxDelay µs
	// after now: every limit is charged (algorithm.Booker.Book) and
	// reports its result (RetryAfter the delay), and ok is true.
	// Otherwise nothing is charged, each limit reports Peek for cost, as
	// a denied Take does, and the combined result's RetryAfter is at
	// least the instant the search reached, less now.
	Book(ctx context.Context, key K, now, cost, maxDelay int64, out []algorithm.Result) (r algorithm.Result, b Booking, ok bool, err error)
	// Cancel gives b back, at now, as Undo does before b is due. Nothing
	// once b is due (b.Act ≤ now).
	Cancel(ctx context.Context, key K, now int64, b Booking) error
	// Undo gives b back, at now, as a Reservation's Refund does, and
	// returns what it gave back: the least any limit gave back, in units
	// of b.Cost (algorithm.Undoer). A limit whose state is of another
	// generation than the one b charged (forgotten by Reset, expired or
	// evicted, and made again since), or carried from another kind, or
	// gone, gets nothing back; one whose state is still the one b left
	// (the same generation, config and numbers) gets the state before b
	// back, exactly; any other gets what the algorithm's Undo gives in the
	// state as it is now (before b is due, its Unused): never more than
	// the key would hold had b never been made, never a later charge.
	// With b.Release, only the limits b.Gives to give anything back, and
	// what it returns is the least of theirs.
	Undo(ctx context.Context, key K, now int64, b Booking) (int64, error)
	// Refund gives back up to n (n ≥ 1) of what every limit charged key
	// (algorithm.Booker.Refund), and reports each limit's state for a
	// cost of 1. A key without state is left without.
	Refund(ctx context.Context, key K, now, n int64, out []algorithm.Result) (algorithm.Result, error)
}
