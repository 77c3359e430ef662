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
// after a short pause, for the same reason.
//
// With clock.Server(), scripts read Redis's TIME, so servers with skewed
// clocks share limits correctly. Requires Redis 7.0 or newer.
//
// Limits hold only as long as the servers keep their keys: see "Redis
// memory" in the redisstore documentation for what each maxmemory-policy
// costs, and WithEvictionCheck. The store is redisstore's, over a Runner
// made of the go-redis client: this package adds only the client's calls.
package goredisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
)

// Client is the part of a go-redis client the store uses. *redis.Client,
// *redis.ClusterClient, *redis.Ring and failover clients all have it.
type Client interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// DefaultPrefix is the key prefix used when none is given.
const DefaultPrefix = redisstore.DefaultPrefix

// MaxLimits is the most limits of a Policy on this store (see
// redisstore.MaxLimits).
const MaxLimits = redisstore.MaxLimits

// Store keeps limiter state in Redis through go-redis: a redisstore.Store
// over the client. Create it with [New].
type Store[K comparable] = redisstore.Store[K]

// Option configures a Store: the options are redisstore's.
type Option[K comparable] = redisstore.Option[K]

// EvictionCheck says what Open does when a server may evict limiter
// state (see redisstore.EvictionCheck).
type EvictionCheck = redisstore.EvictionCheck

// The eviction checks (see redisstore.EvictionWarn and the others).
const (
	EvictionWarn      = redisstore.EvictionWarn
	EvictionRefuse    = redisstore.EvictionRefuse
	EvictionUnchecked = redisstore.EvictionUnchecked
)

// WithPrefix is redisstore.WithPrefix: the prefix of every key.
func WithPrefix[K comparable](prefix string) Option[K] { return redisstore.WithPrefix[K](prefix) }

// WithKeyEncoder is redisstore.WithKeyEncoder: how keys become bytes.
func WithKeyEncoder[K comparable](encode store.KeyEncoder[K]) Option[K] {
	return redisstore.WithKeyEncoder[K](encode)
}

// WithTTLMargin is redisstore.WithTTLMargin: how long keys outlive their
// state.
func WithTTLMargin[K comparable](margin time.Duration) Option[K] {
	return redisstore.WithTTLMargin[K](margin)
}

// WithGroupCommit is redisstore.WithGroupCommit: how many TakeAll calls
// are in flight before the next ones go together in one.
func WithGroupCommit[K comparable](inFlight int) Option[K] {
	return redisstore.WithGroupCommit[K](inFlight)
}

// WithCoalescing is redisstore.WithCoalescing: how many calls per key go
// at once before the others wait and go in one batch.
func WithCoalescing[K comparable](inFlight int) Option[K] {
	return redisstore.WithCoalescing[K](inFlight)
}

// WithTimeout is redisstore.WithTimeout: the longest one script call may
// take.
func WithTimeout[K comparable](d time.Duration) Option[K] { return redisstore.WithTimeout[K](d) }

// WithMaxKeyBytes is redisstore.WithMaxKeyBytes: the longest key accepted.
func WithMaxKeyBytes[K comparable](n int) Option[K] { return redisstore.WithMaxKeyBytes[K](n) }

// WithEvictionCheck is redisstore.WithEvictionCheck: what to do about a
// server whose maxmemory-policy may evict limiter state. The store reads
// the policy from the server, every master of a cluster, or every shard
// of a ring.
func WithEvictionCheck[K comparable](check EvictionCheck) Option[K] {
	return redisstore.WithEvictionCheck[K](check)
}

// New returns a store on client. When the client's options are visible
// (*redis.Client, *redis.ClusterClient, *redis.Ring), New requires
// ContextTimeoutEnabled: without it go-redis ignores context deadlines,
// the store's own timeout (WithTimeout) among them, and a slow Redis would
// hold calls for the client's timeouts instead. Errors wrap
// algorithm.ErrInvalidConfig.
//
// On a *redis.Client, New adds a hook (AddHook) that notes the dials the
// server refuses, and nothing else: go-redis retries a refused dial, 5
// times 100 ms apart by default, so a Limiter's caller whose context ends
// first is told that Redis refuses connections (an error matching
// store.ErrUnavailable, see store.Refuser) rather than that its context
// ended.
func New[K comparable](client Client, opts ...Option[K]) (*Store[K], error) {
	if client == nil {
		return nil, fmt.Errorf("%w: goredisstore: nil client", algorithm.ErrInvalidConfig)
	}
	run := runner{c: client}
	if c, ok := client.(*redis.Client); ok {
		run.refusals = new(refusals)
		c.AddHook(run.refusals)
	}
	s, err := redisstore.New(run, opts...)
	if err != nil {
		return nil, err
	}
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

// runner is the go-redis client as a redisstore.Runner.
type runner struct {
	c        Client
	refusals *refusals // a *redis.Client's refused dials; nil for other clients
}

var _ redisstore.Sharded = runner{}

// Sharded reports whether the client spreads keys over servers by their
// hash tag: a *redis.ClusterClient or a *redis.Ring.
func (r runner) Sharded() bool {
	switch r.c.(type) {
	case *redis.ClusterClient, *redis.Ring:
		return true
	}
	return false
}

var (
	_ redisstore.Runner       = runner{}
	_ redisstore.PolicyReader = runner{}
	_ store.Refuser           = runner{}
)

// Refused returns an error wrapping store.ErrUnavailable when the latest
// dial of a *redis.Client was refused, and none has connected since; nil
// for other clients, whose nodes' dials the store does not see. go-redis
// retries a refused dial (Options.DialerRetries, 5 by default, 100 ms
// apart), so a call to a Redis that is not there waits longer than many
// callers do: the Limiter asks this when a caller's context ends first.
func (r runner) Refused() error {
	if f := r.refused(); f != nil {
		return fmt.Errorf("%w: %v", store.ErrUnavailable, f)
	}
	return nil
}

// refused returns the latest dial's refusal, or nil.
func (r runner) refused() *refusal {
	if r.refusals == nil {
		return nil
	}
	return r.refusals.last.Load()
}

// explain adds to err, a call's error, that the server refuses
// connections, when it does: a call whose deadline ended while go-redis
// retried a refused dial then says why.
func (r runner) explain(err error) error {
	if f := r.refused(); f != nil && !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w; %v", err, f)
	}
	return err
}

// refusals is a go-redis hook that notes the dials the server refused.
// It adds nothing to the commands' path: its process hooks are the next
// ones.
type refusals struct {
	last atomic.Pointer[refusal] // the latest dial's refusal; nil once a dial connects
}

// refusal is a dial the server refused.
type refusal struct {
	addr string
	err  error
}

func (f *refusal) String() string {
	return "Redis refused the connection: is it running at " + f.addr + "? (" + f.err.Error() + ")"
}

func (h *refusals) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		switch {
		case err == nil:
			if h.last.Load() != nil {
				h.last.Store(nil)
			}
		case errors.Is(err, syscall.ECONNREFUSED):
			h.last.Store(&refusal{addr: addr, err: err})
		}
		return conn, err
	}
}

func (h *refusals) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *refusals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ReadPolicies reads the maxmemory-policy of the server, of every master
// of a cluster, or of every shard of a ring.
func (r runner) ReadPolicies(ctx context.Context) ([]redisstore.NodePolicy, error) {
	var (
		mu    sync.Mutex
		nodes []redisstore.NodePolicy
	)
	each := func(ctx context.Context, c *redis.Client) error {
		n := readPolicy(ctx, c, c.Options().Addr)
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, n)
		return nil
	}
	var err error
	switch c := r.c.(type) {
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
func readPolicy(ctx context.Context, c Client, node string) redisstore.NodePolicy {
	cmd := redis.NewMapStringStringCmd(ctx, "config", "get", "maxmemory-policy")
	if err := c.Process(ctx, cmd); err != nil {
		var reply redis.Error // the server answered: it will not say
		return redisstore.NodePolicy{Node: node, Err: err, Refused: errors.As(err, &reply)}
	}
	return redisstore.NodePolicy{Node: node, Policy: cmd.Val()["maxmemory-policy"]}
}

// onceCmd is a script call that go-redis must not resend on a network
// error: the script may have run, and running it again would charge twice.
type onceCmd struct{ *redis.Cmd }

func (onceCmd) NoRetry() bool { return true }

func (r runner) Eval(ctx context.Context, s *redisstore.Script, readOnly bool, keys []string, args redisstore.Args, _ []int64) ([]int64, error) {
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
		return nil, r.explain(contextError(ctx, err))
	}
	return cmd.Int64Slice()
}

func (r runner) EvalStrings(ctx context.Context, s *redisstore.Script, keys []string, args []string) ([]string, error) {
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
		return nil, r.explain(contextError(ctx, err))
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
		return r.explain(contextError(ctx, err))
	}
	return nil
}
