// Package rueidisstore keeps limiter state in Redis through
// github.com/redis/rueidis, so that many processes share limits.
//
// Every decision is one atomic Lua script, one round trip: EVALSHA, and EVAL
// when the server has lost its script cache. Peek runs the script
// read-only (EVALSHA_RO). rueidis pipelines concurrent calls on shared
// connections, which is what lets many goroutines reach Redis's own
// throughput. Scripts that charge are never retried by rueidis, so a lost
// reply is an error (store.ErrUnavailable), never a second charge; a
// cluster's TRYAGAIN, which means the script did not run, is retried after
// a short pause, as rueidis follows MOVED and ASK. Peeks
// are not retried either, so that a call to a Redis that is down fails at
// once and the Limiter's failure policy decides; they are not marked
// read-only for rueidis, so a ClientOption.SendToReplicas that routes by
// Completed.IsReadOnly sends them to the primary.
//
// With clock.Server(), scripts read Redis's TIME. Requires Redis 7.0 or
// newer.
//
// # Redis memory
//
// Every key has a time to live, but a flood of new keys can still fill a
// Redis to its maxmemory, and then its maxmemory-policy decides whether
// limits hold. An evicted key starts afresh: a client that had spent its
// limit is admitted again.
//
//   - noeviction keeps every key, so every limit holds: the only safe
//     policy. A request that would create or charge a key fails with
//     store.ErrFull (Redis's OOM reply, its text kept), charged nothing:
//     on Redis 7.0 a script without flags runs under OOM and is refused
//     at its first write, so denials of spent keys, Peek and Reset still
//     answer. ErrFull is no outage: the circuit breaker does not count
//     it; the Limiter's failure policy decides.
//   - volatile-ttl evicts keys with a TTL (every limiter key has one),
//     the soonest to expire first: for a token bucket or GCRA the key
//     closest to full, the cheapest to lose; but a flood of keys each
//     drained outlives a spent key, which is then evicted first.
//   - volatile-lru, volatile-lfu and volatile-random evict limiter keys
//     in use, as the allkeys-* policies do on a Redis of limiter keys.
//   - allkeys-lru, allkeys-lfu and allkeys-random evict limiter keys like
//     any other. The first Open reads the servers' policy (see
//     WithEvictionCheck) and, on these and the three above, the table it
//     returns reports a warning wrapping store.ErrEvicting
//     (store.Warner), or Open fails with EvictionRefuse. Decisions read
//     it again every minute: a server switched to such a policy later is
//     reported through store.Reporter, or, with EvictionRefuse, makes
//     decisions fail with store.ErrEvicting.
//
// A key whose encoding is longer than WithMaxKeyBytes (default
// store.DefaultMaxKeyBytes) fails with store.ErrKeyTooLong before anything
// is sent.
package rueidisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistable"
	"github.com/go-ratelimit/ratelimit/store"
)

// DefaultPrefix is the key prefix used when none is given.
const DefaultPrefix = "ratelimit:"

// Store keeps limiter state in Redis through rueidis. Create it with [New].
type Store[K comparable] struct {
	client   rueidis.Client
	cfg      redistable.Config[K]
	eviction EvictionCheck
}

var _ store.Store[string] = (*Store[string])(nil)

// Option configures a Store.
type Option[K comparable] func(*Store[K])

// WithPrefix sets the prefix of every key the store writes (default
// DefaultPrefix). Limiters sharing a Redis must use different prefixes,
// and a prefix must not contain '{' or '}'.
func WithPrefix[K comparable](prefix string) Option[K] {
	return func(s *Store[K]) { s.cfg.Prefix = prefix }
}

// WithKeyEncoder sets how keys are turned into bytes (default
// store.DefaultKeyEncoder).
func WithKeyEncoder[K comparable](encode store.KeyEncoder[K]) Option[K] {
	return func(s *Store[K]) { s.cfg.Encode = encode }
}

// WithTTLMargin keeps every key this much longer than the time after which
// its state is indistinguishable from a new key's (default
// redistable.DefaultTTLMargin, 1 s; 0 keeps none). Keys then outlive their
// state by the margin, which only costs memory. A decision's instant is
// read before its script reaches Redis: a request that waited in a queue
// (a busy client, a pipeline of hundreds of callers) or comes from a
// server whose clock lags may find a key expired on Redis's clock that its
// own instant still needs, and start it afresh, admitting what the state
// would have refused (measured: 200 waiters on a bucket of 1 refilled
// every 2 ms, with no margin, had two admitted 0.6 ms apart). The margin
// must be at least that lag, or the clocks' disagreement; with
// clock.Server() the clocks cannot disagree, but a request's queueing
// still can.
func WithTTLMargin[K comparable](margin time.Duration) Option[K] {
	return func(s *Store[K]) { s.cfg.TTLMargin = margin }
}

// WithCoalescing sets how many calls for one key the store has in
// flight at once, per Limiter or Policy, before further Takes of the key
// wait and go together (default redistable.DefaultInFlight, 8; 0 turns
// coalescing off). A Take of a key with fewer calls in flight goes at
// once, as without coalescing, so nothing waits at low load and there is
// no timer. Once inFlight are in flight, further Takes of the key wait in
// the process; when a call returns, those waiting go, up to 64 (16 with a
// sliding log), in one script call that decides them in arrival order,
// each exactly as if it had come alone after the ones before. A hot key
// then costs Redis one call per batch instead of one per decision. Fewer
// in flight make larger batches, so less Redis time per decision (1 is
// the least: worth it when many processes share one hot key, at the cost
// of some latency in each); more keep a key asked by a few callers at
// once off the line.
//
// Each caller keeps its own deadline: a batch's call runs under the
// store's own timeout (WithTimeout), a caller whose context ends while still waiting
// leaves uncharged, and one whose context ends while its batch is in
// flight gets an error with an unknown outcome, as from a single call. A
// lost reply fails every request of its batch; none is sent again.
// Bookings, cancels and refunds wait in the same line and go in batches
// of their kind; peeks and Reset always go alone. A negative inFlight fails
// New with algorithm.ErrInvalidConfig.
func WithCoalescing[K comparable](inFlight int) Option[K] {
	return func(s *Store[K]) { s.cfg.InFlight = inFlight }
}

// WithTimeout sets the longest one script call may take, retries after
// a cluster's TRYAGAIN included (default redistable.DefaultTimeout, 3 s).
// A Limiter or Policy never passes its caller's deadline or cancellation
// to the client (store.Remote): a caller stops waiting when its own
// context ends, while its call goes on, bounded by this timeout, and
// charges what Redis charges. Only a call that fails on its own, such as
// one that times out here, is an outage that a circuit breaker counts and
// a failure policy decides. A decision for a caller whose context can
// never end (context.Background()) goes alone without this bound, which
// would cost its hot path an allocation: the client's own timeouts bound
// it. d must be more than 0; New fails with algorithm.ErrInvalidConfig
// otherwise.
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

// WithEvictionCheck sets what Open does when a server's maxmemory-policy
// may evict limiter state (default EvictionWarn). The store reads it with
// CONFIG GET maxmemory-policy (from every master of a cluster) at the
// first Open, within a second, and keeps the answer for all its tables.
// Then the first decision a minute after the last check, or a second
// after it when a decision got an OOM reply, reads it again, in a
// goroutine that ends with the check: what a later check finds is
// reported once to each table's reporter (store.Reporter: a Limiter's
// error handler), and with EvictionRefuse decisions fail with an error
// wrapping store.ErrEvicting while a server may evict.
// The check is best effort: a server that refuses CONFIG (managed
// services, an ACL without it) is taken as it is, silently; one that
// cannot be reached is asked again at an Open 10 s later or more.
func WithEvictionCheck[K comparable](check EvictionCheck) Option[K] {
	return func(s *Store[K]) { s.eviction = check }
}

// MaxLimits is the most limits of a Policy on this store: one of more is
// refused when it is made, with store.ErrAlgorithmUnsupported. Each
// decision runs every limit's part in one script; a real Policy has a
// handful of limits.
const MaxLimits = redistable.MaxLimits

// New returns a store on client, a standalone, sentinel or cluster client.
// Errors wrap algorithm.ErrInvalidConfig or store.ErrKeyType.
func New[K comparable](client rueidis.Client, opts ...Option[K]) (*Store[K], error) {
	if client == nil {
		return nil, fmt.Errorf("%w: rueidisstore: nil client", algorithm.ErrInvalidConfig)
	}
	s := &Store[K]{client: client, cfg: redistable.Config[K]{Prefix: DefaultPrefix, TTLMargin: redistable.DefaultTTLMargin, InFlight: redistable.DefaultInFlight}}
	for _, o := range opts {
		o(s)
	}
	if err := s.cfg.Check(); err != nil {
		return nil, err
	}
	check, err := redistable.NewEvictionCheck(redistable.EvictionMode(s.eviction), s.readPolicies)
	if err != nil {
		return nil, err
	}
	s.cfg.Evictions = check
	return s, nil
}

// Open returns a table for limits, decided together by one script. Every
// clock works: with clock.Server() the scripts read Redis's TIME. The
// table implements store.Warner; the store's first Open reads the servers'
// maxmemory-policy for it (see WithEvictionCheck).
func (s *Store[K]) Open(limits []store.Limit, clk clock.Clock) (store.Table[K], error) {
	r := &runner{client: s.client}
	t, err := redistable.Open(r, s.cfg, limits, clk)
	if err != nil {
		return nil, err
	}
	r.take = rueidis.NewLuaScript(t.Script().Source)
	r.script = t.Script()
	return t, nil
}

// readPolicies reads the maxmemory-policy of every node the client knows
// (the server, or the cluster's masters, and its replicas when the client
// reads from them), all at once.
func (s *Store[K]) readPolicies(ctx context.Context) ([]redistable.NodePolicy, error) {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		nodes []redistable.NodePolicy
	)
	for addr, c := range s.client.Nodes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := redistable.NodePolicy{Node: addr}
			m, err := c.Do(ctx, c.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
			if err != nil {
				_, n.Refused = rueidis.IsRedisErr(err) // the server answered: it will not say
				n.Err = err
			} else {
				n.Policy = m["maxmemory-policy"]
			}
			mu.Lock()
			defer mu.Unlock()
			nodes = append(nodes, n)
		}()
	}
	wg.Wait()
	return nodes, nil
}

type runner struct {
	client rueidis.Client
	take   *rueidis.Lua // the table's script
	script *luascript.Script
}

// argvOnStack is how many ARGV a call keeps on its stack: rueidis copies
// the strings into its own command and keeps no slice it is given, so
// ARGV costs nothing per call up to this many (a policy of several limits
// with more goes to the heap once per call).
const argvOnStack = 24

func (r *runner) Eval(ctx context.Context, s *luascript.Script, readOnly bool, keys []string, a redistable.Args, reply []int64) ([]int64, error) {
	var buf [argvOnStack]string
	args := buf[:0]
	if a.Batch != nil {
		args = append(args, a.Batch...)
	} else {
		args = append(args, a.Now, a.Cost)
	}
	args = append(args, a.Rest...)
	if !readOnly && s == r.script {
		return intSlice(r.take.Exec(ctx, r.client, keys, args), reply)
	}
	// Peeks are built as arbitrary commands rather than with
	// rueidis.NewLuaScriptReadOnly: rueidis retries commands marked
	// read-only on network errors until the context ends (forever without
	// a deadline), and a peek at a Redis that is down must fail at once
	// for the Limiter's failure policy to decide.
	// Another script (the table's Reset) goes the same way, unmarked.
	n := strconv.Itoa(len(keys))
	sha, src := "EVALSHA", "EVAL"
	if readOnly {
		sha, src = "EVALSHA_RO", "EVAL_RO"
	}
	resp := r.client.Do(ctx, r.client.B().Arbitrary(sha, s.SHA1, n).Keys(keys...).Args(args...).Build())
	if err, ok := rueidis.IsRedisErr(resp.Error()); ok && err.IsNoScript() {
		resp = r.client.Do(ctx, r.client.B().Arbitrary(src, s.Source, n).Keys(keys...).Args(args...).Build())
	}
	return intSlice(resp, reply)
}

func (r *runner) EvalStrings(ctx context.Context, s *luascript.Script, keys []string, args []string) ([]string, error) {
	n := strconv.Itoa(len(keys))
	resp := r.client.Do(ctx, r.client.B().Arbitrary("EVALSHA", s.SHA1, n).Keys(keys...).Args(args...).Build())
	if err, ok := rueidis.IsRedisErr(resp.Error()); ok && err.IsNoScript() {
		resp = r.client.Do(ctx, r.client.B().Arbitrary("EVAL", s.Source, n).Keys(keys...).Args(args...).Build())
	}
	return resp.AsStrSlice()
}

// intSlice is resp.AsIntSlice appended to dst[:0], so that a reply of
// integers, the scripts' only reply, allocates nothing. Any other reply
// is left to AsIntSlice, whose values and errors are the same.
func intSlice(resp rueidis.RedisResult, dst []int64) ([]int64, error) {
	values, err := resp.ToArray()
	if err != nil {
		return resp.AsIntSlice()
	}
	dst = dst[:0]
	for i := range values {
		if !values[i].IsInt64() {
			return resp.AsIntSlice()
		}
		v, _ := values[i].AsInt64()
		dst = append(dst, v)
	}
	return dst, nil
}

func (r *runner) Del(ctx context.Context, keys []string) error {
	return r.client.Do(ctx, r.client.B().Unlink().Key(keys...).Build()).Error()
}
