// Package goredisstore keeps limiter state in Redis through
// github.com/redis/go-redis/v9, so that many processes share limits.
//
// Every decision is one atomic Lua script, one round trip: EVALSHA, and EVAL
// when the server has lost its script cache (after SCRIPT FLUSH, a restart
// or a failover). Peek runs the script read-only (EVALSHA_RO), so it may be
// served by replicas. Each key's state has a time to live equal to the time
// after which it would be indistinguishable from a new key, so nothing leaks.
//
// Scripts are never resent by go-redis's retry machinery: a reply lost to a
// broken connection leaves the outcome unknown, and resending would charge
// the request twice. Such a call fails with store.ErrUnavailable, and the
// Limiter's failure policy decides. Redirections (MOVED, ASK) are still
// followed, since the script did not run; so is a cluster's TRYAGAIN,
// after a short pause (redistable.TryAgainBackoff), for the same reason.
//
// With clock.Server(), scripts read Redis's TIME, so servers with skewed
// clocks share limits correctly. Requires Redis 7.0 or newer.
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
package goredisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistable"
	"github.com/go-ratelimit/ratelimit/store"
)

// Client is the part of a go-redis client the store uses. *redis.Client,
// *redis.ClusterClient, *redis.Ring and failover clients all have it.
type Client interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// DefaultPrefix is the key prefix used when none is given.
const DefaultPrefix = "ratelimit:"

// Store keeps limiter state in Redis through go-redis. Create it with [New].
type Store[K comparable] struct {
	client   Client
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
// store.DefaultKeyEncoder, which knows strings, integers and netip types).
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

// New returns a store on client. When the client's options are visible
// (*redis.Client, *redis.ClusterClient, *redis.Ring), New requires
// ContextTimeoutEnabled: without it go-redis ignores context deadlines,
// the store's own timeout (WithTimeout) among them, and a slow Redis would
// hold calls for the client's timeouts instead. Errors wrap
// algorithm.ErrInvalidConfig.
func New[K comparable](client Client, opts ...Option[K]) (*Store[K], error) {
	if client == nil {
		return nil, fmt.Errorf("%w: goredisstore: nil client", algorithm.ErrInvalidConfig)
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
	if !honoursDeadlines(client) {
		return nil, fmt.Errorf("%w: goredisstore: the client needs ContextTimeoutEnabled: true so that context deadlines bound each decision",
			algorithm.ErrInvalidConfig)
	}
	return s, nil
}

func honoursDeadlines(c Client) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Open returns a table for limits, decided together by one script. Every
// clock works: with clock.Server() the scripts read Redis's TIME. The
// table implements store.Warner; the store's first Open reads the servers'
// maxmemory-policy for it (see WithEvictionCheck).
func (s *Store[K]) Open(limits []store.Limit, clk clock.Clock) (store.Table[K], error) {
	t, err := redistable.Open(runner{s.client}, s.cfg, limits, clk)
	if err != nil {
		return nil, err // not a nil *Table in a non-nil Table
	}
	return t, nil
}

// readPolicies reads the maxmemory-policy of the server, of every master
// of a cluster, or of every shard of a ring.
func (s *Store[K]) readPolicies(ctx context.Context) ([]redistable.NodePolicy, error) {
	var (
		mu    sync.Mutex
		nodes []redistable.NodePolicy
	)
	each := func(ctx context.Context, c *redis.Client) error {
		n := readPolicy(ctx, c, c.Options().Addr)
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, n)
		return nil
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, each)
	case *redis.Ring:
		err = c.ForEachShard(ctx, each)
	case *redis.Client:
		err = each(ctx, c)
	default:
		nodes = append(nodes, readPolicy(ctx, c, ""))
	}
	return nodes, err
}

// readPolicy sends CONFIG GET maxmemory-policy to c, which names node.
func readPolicy(ctx context.Context, c Client, node string) redistable.NodePolicy {
	cmd := redis.NewMapStringStringCmd(ctx, "config", "get", "maxmemory-policy")
	if err := c.Process(ctx, cmd); err != nil {
		var reply redis.Error // the server answered: it will not say
		return redistable.NodePolicy{Node: node, Err: err, Refused: errors.As(err, &reply)}
	}
	return redistable.NodePolicy{Node: node, Policy: cmd.Val()["maxmemory-policy"]}
}

type runner struct{ c Client }

// onceCmd is a script call that go-redis must not resend on a network
// error: the script may have run, and running it again would charge twice.
type onceCmd struct{ *redis.Cmd }

func (onceCmd) NoRetry() bool { return true }

func (r runner) Eval(ctx context.Context, s *luascript.Script, readOnly bool, keys []string, args redistable.Args, _ []int64) ([]int64, error) {
	sha, src := "evalsha", "eval"
	if readOnly {
		sha, src = "evalsha_ro", "eval_ro"
	}
	call := make([]any, 0, 5+len(keys)+len(args.Batch)+len(args.RestAny))
	call = append(call, sha, s.SHA1, len(keys))
	for _, k := range keys {
		call = append(call, k)
	}
	if args.Batch != nil {
		for _, a := range args.Batch {
			call = append(call, a)
		}
	} else {
		cost := args.CostAny
		if cost == nil {
			cost = args.Cost
		}
		call = append(call, args.Now, cost)
	}
	call = append(call, args.RestAny...)
	cmd := redis.NewCmd(ctx, call...)
	err := r.c.Process(ctx, onceCmd{cmd})
	if err != nil && isNoScript(err) {
		call[0], call[1] = src, s.Source
		cmd = redis.NewCmd(ctx, call...)
		err = r.c.Process(ctx, onceCmd{cmd})
	}
	if err != nil {
		r.failed(ctx, err)
		return nil, contextError(ctx, err)
	}
	return cmd.Int64Slice()
}

func (r runner) EvalStrings(ctx context.Context, s *luascript.Script, keys []string, args []string) ([]string, error) {
	call := make([]any, 0, 3+len(keys)+len(args))
	call = append(call, "evalsha", s.SHA1, len(keys))
	for _, k := range keys {
		call = append(call, k)
	}
	for _, a := range args {
		call = append(call, a)
	}
	cmd := redis.NewCmd(ctx, call...)
	err := r.c.Process(ctx, onceCmd{cmd})
	if err != nil && isNoScript(err) {
		call[0], call[1] = "eval", s.Source
		cmd = redis.NewCmd(ctx, call...)
		err = r.c.Process(ctx, onceCmd{cmd})
	}
	if err != nil {
		r.failed(ctx, err)
		return nil, contextError(ctx, err)
	}
	return cmd.StringSlice()
}

// failed asks a cluster client to reload the cluster's topology after a
// call failed without a reply from the server (a node down, a timeout).
// go-redis reloads it on MOVED and ASK, and otherwise only every
// ClusterStateReloadInterval (a minute by default): without this, calls
// that cannot be retried, as the store's are not, would keep going to a
// dead master long after its replica has taken over. The reload runs in
// the background, at most one at a time.
func (r runner) failed(ctx context.Context, err error) {
	var reply redis.Error
	if errors.As(err, &reply) {
		return
	}
	if c, ok := r.c.(interface{ ReloadState(context.Context) }); ok {
		c.ReloadState(ctx)
	}
}

// contextError returns err, made to match the context's error when it is
// a network timeout at or after ctx's deadline: go-redis enforces the
// deadline as the connection's, and reports it as an i/o timeout.
func contextError(ctx context.Context, err error) error {
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		return err
	}
	cerr := ctx.Err()
	if deadline, ok := ctx.Deadline(); cerr == nil && ok && !time.Now().Before(deadline) {
		cerr = context.DeadlineExceeded // the deadline passed; ctx's timer has yet to fire
	}
	if cerr == nil || errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w: %w", cerr, err)
}

func isNoScript(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "NOSCRIPT")
}

func (r runner) Del(ctx context.Context, keys []string) error {
	args := make([]any, 0, 1+len(keys))
	args = append(args, "unlink")
	for _, k := range keys {
		args = append(args, k)
	}
	err := r.c.Process(ctx, onceCmd{redis.NewCmd(ctx, args...)})
	if err != nil {
		r.failed(ctx, err)
	}
	return contextError(ctx, err)
}
