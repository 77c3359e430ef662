// Package redisstore keeps limiter state in Redis through any Redis client
// library. It does what every Redis store shares: key naming and the key
// size limit, the scripts and their arguments, reply checking, error
// wrapping, coalescing, and the check of the servers' maxmemory-policy. A
// client library supplies a [Runner], the few calls it must make, as a
// database/sql driver supplies a connection; store/goredisstore and
// store/rueidisstore are such adapters, and a store for another client is
// one small file (see the example).
//
// Every decision is one atomic Lua script, one round trip: EVALSHA, and EVAL
// when the server has lost its script cache (after SCRIPT FLUSH, a restart
// or a failover). Peek runs the script read-only (EVALSHA_RO). The keys of
// one call share one Redis Cluster hash tag, so a cluster sends the call to
// one node. Each key's state has a time to live equal to the time after
// which it would be indistinguishable from a new key, so nothing leaks. A
// call that may have reached the server is never sent again (it would
// charge twice); a cluster's TRYAGAIN, which ran nothing, is retried after a
// short pause. With clock.Server(), scripts read Redis's TIME. Requires
// Redis 7.0 or newer.
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
package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/store"
)

// Runner is what a Redis client library does for a [Store]: run a script
// by its SHA-1, with its source as the fallback, and delete keys. It is a
// contract for implementers; users call [New] with one. All the keys of a
// call share one Redis Cluster hash tag, so a cluster client sends the
// call to the node that owns their slot (following MOVED and ASK). An
// error reply must be returned as an error whose text is the server's
// (the store tells TRYAGAIN, OOM and its scripts' refusals by it). A
// Runner must be safe for concurrent use.
type Runner interface {
	// Eval runs s with KEYS = keys and ARGV = args.All(): EVALSHA s.SHA1
	// (EVALSHA_RO when readOnly), then EVAL s.Source (EVAL_RO) if the
	// server answers NOSCRIPT. It returns the reply, an array of
	// integers, appended to reply[:0] when it can, so that a call need
	// not allocate it. It must not resend a call that may have reached
	// the server: a resent Take would charge twice.
	Eval(ctx context.Context, s *Script, readOnly bool, keys []string, args Args, reply []int64) ([]int64, error)
	// EvalStrings runs s as Eval does, not read-only, with ARGV = args,
	// and returns its reply, an array of strings (integers in it written
	// in decimal). It must not resend a call that may have reached the
	// server either.
	EvalStrings(ctx context.Context, s *Script, keys []string, args []string) ([]string, error)
	// Del deletes keys with UNLINK.
	Del(ctx context.Context, keys []string) error
}

// PolicyReader is a Runner that can read the maxmemory-policy of the
// servers it sends keys to, found by type assertion: the eviction check
// (WithEvictionCheck) asks it. ReadPolicies reads the policy of every
// server (every master of a cluster) within ctx, with CONFIG GET
// maxmemory-policy; its error means the servers could not even be listed,
// and a later Open asks again.
type PolicyReader interface {
	ReadPolicies(ctx context.Context) ([]NodePolicy, error)
}

// Script is a Lua script a Runner runs. The store makes them; a Runner
// only reads them.
type Script struct {
	// Name names what it runs: its algorithms, joined by "+", after its
	// operation, batch or conversion ("book:gcra", "batch:…").
	Name string
	// Source is the script's text, for EVAL.
	Source string
	// SHA1 is the hex SHA-1 of Source, for EVALSHA.
	SHA1 string
}

// runScripts holds each composed script as a Runner runs it, by the
// composer's: made once, read without a lock.
var runScripts sync.Map

// runScript returns s as a Runner runs it.
func runScript(s *luascript.Script) *Script {
	if r, ok := runScripts.Load(s); ok {
		return r.(*Script)
	}
	r, _ := runScripts.LoadOrStore(s, &Script{Name: s.Name, Source: s.Source, SHA1: s.SHA1})
	return r.(*Script)
}

// DefaultPrefix is the key prefix used when none is given.
const DefaultPrefix = "ratelimit:"

// Store keeps limiter state in Redis through a Runner. Create it with
// [New]; it is safe for concurrent use.
type Store[K comparable] struct {
	run           Runner
	cfg           config[K]
	commit        *committer[K] // nil without group commit
	eviction      EvictionCheck
	evictionEvery time.Duration // WithEvictionCheckInterval; 0: the default
}

var _ store.Store[string] = (*Store[string])(nil)

// New returns a store that runs its scripts through run. The eviction
// check (WithEvictionCheck) needs run to be a PolicyReader: without one,
// EvictionWarn checks nothing and EvictionRefuse is refused. Errors wrap
// algorithm.ErrInvalidConfig or store.ErrKeyType.
func New[K comparable](run Runner, opts ...Option[K]) (*Store[K], error) {
	if run == nil {
		return nil, fmt.Errorf("%w: redisstore: nil Runner", algorithm.ErrInvalidConfig)
	}
	s := &Store[K]{run: run, cfg: config[K]{
		Prefix:    DefaultPrefix,
		TTLMargin: DefaultTTLMargin,
		InFlight:  DefaultInFlight,

		CommitInFlight: DefaultCommitInFlight,
	}}
	for _, o := range opts {
		o(s)
	}
	if err := s.cfg.check(); err != nil {
		return nil, err
	}
	mode := s.eviction
	var read policyReader
	if pr, ok := run.(PolicyReader); ok {
		read = pr.ReadPolicies
	} else if mode == EvictionWarn {
		mode = EvictionUnchecked
	} else if mode == EvictionRefuse {
		return nil, fmt.Errorf("%w: redisstore: EvictionRefuse needs a Runner that reads the servers' maxmemory-policy (a PolicyReader); %T is not one",
			algorithm.ErrInvalidConfig, run)
	}
	check, err := newEvictionWatch(mode, read)
	if err != nil {
		return nil, err
	}
	switch {
	case s.evictionEvery < 0:
		return nil, fmt.Errorf("%w: redisstore: an eviction check interval must be more than 0", algorithm.ErrInvalidConfig)
	case s.evictionEvery > 0:
		check.every = s.evictionEvery
	}
	s.cfg.Evictions = check
	if s.cfg.CommitInFlight > 0 {
		s.commit = newCommitter[K](s.cfg.CommitInFlight)
	}
	return s, nil
}

// Open returns a table (a *Table[K]) for limits, decided together by one
// script. Every clock works: with clock.Server() the scripts read Redis's
// TIME. The table implements store.Warner; the store's first Open reads
// the servers' maxmemory-policy for it (see WithEvictionCheck).
func (s *Store[K]) Open(limits []store.Limit, clk clock.Clock) (store.Table[K], error) {
	t, err := open(s.run, s.cfg, limits, clk)
	if err != nil {
		return nil, err // not a nil *Table in a non-nil Table
	}
	t.home, t.commit = s, s.commit
	return t, nil
}
