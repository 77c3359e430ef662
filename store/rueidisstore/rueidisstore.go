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
// Limits hold only as long as the servers keep their keys: see "Redis
// memory" in the redisstore documentation for what each maxmemory-policy
// costs, and WithEvictionCheck. The store is redisstore's, over a Runner
// made of the rueidis client: this package adds only the client's calls.
package rueidisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
)

// DefaultPrefix is the key prefix used when none is given.
const DefaultPrefix = redisstore.DefaultPrefix

// MaxLimits is the most limits of a Policy on this store (see
// redisstore.MaxLimits).
const MaxLimits = redisstore.MaxLimits

// Store keeps limiter state in Redis through rueidis: a redisstore.Store
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
// the policy from every node the client knows (the server, or the
// cluster's masters, and its replicas when the client reads from them).
func WithEvictionCheck[K comparable](check EvictionCheck) Option[K] {
	return redisstore.WithEvictionCheck[K](check)
}

// New returns a store on client, a standalone, sentinel or cluster client.
// Errors wrap algorithm.ErrInvalidConfig or store.ErrKeyType.
func New[K comparable](client rueidis.Client, opts ...Option[K]) (*Store[K], error) {
	if client == nil {
		return nil, fmt.Errorf("%w: rueidisstore: nil client", algorithm.ErrInvalidConfig)
	}
	return redisstore.New(runner{client}, opts...)
}

// runner is the rueidis client as a redisstore.Runner.
type runner struct{ client rueidis.Client }

var (
	_ redisstore.Runner       = runner{}
	_ redisstore.PolicyReader = runner{}
	_ redisstore.Sharded      = runner{}
)

// Sharded reports whether the client is a cluster client, which sends
// keys to servers by their hash tag.
func (r runner) Sharded() bool { return r.client.Mode() == rueidis.ClientModeCluster }

// ReadPolicies reads the maxmemory-policy of every node the client knows
// (the server, or the cluster's masters, and its replicas when the client
// reads from them), all at once.
func (r runner) ReadPolicies(ctx context.Context) ([]redisstore.NodePolicy, error) {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		nodes []redisstore.NodePolicy
	)
	for addr, c := range r.client.Nodes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := redisstore.NodePolicy{Node: addr}
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

// argvOnStack is how many ARGV a call keeps on its stack: rueidis copies
// the strings into its own command and keeps no slice it is given, so
// ARGV costs nothing per call up to this many (a policy of several limits
// with more goes to the heap once per call).
const argvOnStack = 24

func (r runner) Eval(ctx context.Context, s *redisstore.Script, readOnly bool, keys []string, a redisstore.Args, reply []int64) ([]int64, error) {
	var buf [argvOnStack]string
	args := buf[:0]
	if a.Batch != nil {
		args = append(args, a.Batch...)
	} else {
		args = append(args, a.Now, a.Cost)
	}
	args = append(args, a.Rest...)
	// Every call is built as an arbitrary command, which rueidis never
	// retries: it sends what rueidis.Lua.Exec sends, without a rueidis.Lua
	// per script. Peeks are not built with rueidis.NewLuaScriptReadOnly
	// either: rueidis retries commands marked read-only on network errors
	// until the context ends (forever without a deadline), and a peek at a
	// Redis that is down must fail at once for the Limiter's failure
	// policy to decide.
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

func (r runner) EvalStrings(ctx context.Context, s *redisstore.Script, keys []string, args []string) ([]string, error) {
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

func (r runner) Del(ctx context.Context, keys []string) error {
	return r.client.Do(ctx, r.client.B().Unlink().Key(keys...).Build()).Error()
}
