// Package redistable is the part of the Redis stores that does not depend
// on the client library: key naming, script arguments, reply checking and
// error wrapping. The go-redis and rueidis stores supply a Runner.
package redistable

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/store"
)

// Runner runs scripts on one Redis deployment through one client library.
type Runner interface {
	// Eval runs s with KEYS = {key} and ARGV = args.All(): EVALSHA (EVALSHA_RO
	// when readOnly), then EVAL (EVAL_RO) if the server answers NOSCRIPT.
	// It returns the reply as integers. It must not resend a call that may
	// have reached the server, since a resent Take would charge twice.
	Eval(ctx context.Context, s *luascript.Script, readOnly bool, key string, args Args) ([]int64, error)
	// Del deletes key.
	Del(ctx context.Context, key string) error
}

// Args are a script call's ARGV: the two that change with every call, then
// those a table sends every time (the TTL margin and the algorithm's
// parameters), kept both as strings and boxed once for clients whose
// commands take []any, so that a call does not box them again.
type Args struct {
	Now, Cost string // ARGV[1] and ARGV[2]
	Rest      []string
	RestAny   []any // Rest, boxed
}

// All returns every argument in order.
func (a Args) All() []string {
	all := make([]string, 0, 2+len(a.Rest))
	return append(append(all, a.Now, a.Cost), a.Rest...)
}

// CheckPrefix returns an error wrapping algorithm.ErrInvalidConfig when
// prefix contains a brace: the store's own braces around the key make the
// Redis Cluster hash tag, and a brace in the prefix would take it over.
func CheckPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%w: key prefix %q must not contain '{' or '}'", algorithm.ErrInvalidConfig, prefix)
	}
	return nil
}

// Config is what a Redis store's options set.
type Config[K comparable] struct {
	// Prefix starts every key; it must not contain '{' or '}'.
	Prefix string
	// Encode turns keys into bytes; nil means store.DefaultKeyEncoder.
	Encode store.KeyEncoder[K]
	// TTLMargin is added to every key's time to live.
	TTLMargin time.Duration
}

// Check validates c, and sets Encode to store.DefaultKeyEncoder when it is
// nil. Errors wrap algorithm.ErrInvalidConfig or store.ErrKeyType.
func (c *Config[K]) Check() error {
	if err := CheckPrefix(c.Prefix); err != nil {
		return err
	}
	if c.TTLMargin < 0 || c.TTLMargin > time.Duration(algorithm.MaxDuration)*time.Microsecond {
		return fmt.Errorf("%w: TTL margin %v out of range", algorithm.ErrInvalidConfig, c.TTLMargin)
	}
	if c.Encode == nil {
		enc, err := store.DefaultKeyEncoder[K]()
		if err != nil {
			return err
		}
		c.Encode = enc
	}
	return nil
}

// Table is a store.Table kept in Redis.
type Table[K comparable] struct {
	run     Runner
	prefix  string
	encode  store.KeyEncoder[K]
	script  *luascript.Script
	rest    []string // ARGV[3…]: the TTL margin in ms, then the parameters
	restAny []any
	server  bool
	limit   int64
}

var _ store.Table[string] = (*Table[string])(nil)

// Open returns a table for alg whose keys are cfg.Prefix + "{" + encoded
// key + "}".
func Open[K comparable](run Runner, cfg Config[K], alg algorithm.Algorithm, clk clock.Clock) (*Table[K], error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	prefix, encode := cfg.Prefix, cfg.Encode
	script, params, err := luascript.For(alg.Spec())
	if err != nil {
		return nil, err
	}
	rest := append([]string{strconv.FormatInt(cfg.TTLMargin.Milliseconds(), 10)}, params...)
	restAny := make([]any, len(rest))
	for i, a := range rest {
		restAny[i] = a
	}
	return &Table[K]{
		run:     run,
		prefix:  prefix,
		encode:  encode,
		script:  script,
		rest:    rest,
		restAny: restAny,
		server:  clock.IsServer(clk),
		limit:   alg.Limit(),
	}, nil
}

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 128); return &b }}

// Key returns the Redis key holding key's state: the prefix, then the
// encoded key in braces, so that it is its own Redis Cluster hash tag.
// Inside the braces '\' becomes `\\` and '}' becomes `\)`, so no user key
// can end the tag early, and different keys never share a name.
func (t *Table[K]) Key(key K) string {
	bp := buffers.Get().(*[]byte)
	raw := t.encode((*bp)[:0], key)
	b := make([]byte, 0, len(t.prefix)+len(raw)+8)
	b = append(b, t.prefix...)
	b = append(b, '{')
	for _, c := range raw {
		switch c {
		case '\\':
			b = append(b, '\\', '\\')
		case '}':
			b = append(b, '\\', ')')
		default:
			b = append(b, c)
		}
	}
	b = append(b, '}')
	*bp = raw
	buffers.Put(bp)
	return string(b)
}

func (t *Table[K]) args(now, cost int64) Args {
	a := Args{Cost: strconv.FormatInt(cost, 10), Rest: t.rest, RestAny: t.restAny}
	if !t.server {
		a.Now = strconv.FormatInt(now, 10)
	}
	return a
}

// Take runs the script for key at now (ignored with the server clock).
func (t *Table[K]) Take(ctx context.Context, key K, now, cost int64) (algorithm.Result, error) {
	return t.eval(ctx, key, false, t.args(now, cost))
}

// Peek runs the script in its read-only mode.
func (t *Table[K]) Peek(ctx context.Context, key K, now int64) (algorithm.Result, error) {
	return t.eval(ctx, key, true, t.args(now, 0))
}

// Reset deletes key's state.
func (t *Table[K]) Reset(ctx context.Context, key K) error {
	if err := t.run.Del(ctx, t.Key(key)); err != nil {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return nil
}

func (t *Table[K]) eval(ctx context.Context, key K, readOnly bool, args Args) (algorithm.Result, error) {
	name := t.Key(key)
	for attempt := 0; ; attempt++ {
		reply, err := t.run.Eval(ctx, t.script, readOnly, name, args)
		if err == nil {
			return t.result(reply)
		}
		if !IsTryAgain(err) || attempt == len(TryAgainBackoff) {
			return algorithm.Result{}, fmt.Errorf("%w: %s script: %w", store.ErrUnavailable, t.script.Name, err)
		}
		pause := time.NewTimer(TryAgainBackoff[attempt])
		select {
		case <-ctx.Done():
			pause.Stop()
			return algorithm.Result{}, fmt.Errorf("%w: %s script: %w (%w while waiting to retry)", store.ErrUnavailable, t.script.Name, err, ctx.Err())
		case <-pause.C:
		}
	}
}

// TryAgainBackoff are the pauses before each retry of a script that a
// Redis Cluster answered TRYAGAIN: it did not run the script (its keys
// were split by a slot migration in progress), so retrying charges once.
// After the last, the error is returned. They add up to 63 ms.
var TryAgainBackoff = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond,
	8 * time.Millisecond, 16 * time.Millisecond, 32 * time.Millisecond,
}

// IsTryAgain reports whether err is a TRYAGAIN reply, as either client
// library returns it: the error's text is the server's.
func IsTryAgain(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "TRYAGAIN")
}

// result checks a script's reply, {remaining, retry after, reset after},
// and turns it into a Result: the cost was admitted exactly when retry
// after is 0. A reply out of shape (a foreign script under the same SHA, a
// key of another type under this prefix) is an error, never a wrong
// decision.
func (t *Table[K]) result(reply []int64) (algorithm.Result, error) {
	if len(reply) != 3 {
		return algorithm.Result{}, fmt.Errorf("%w: %s script replied %d values, want 3", store.ErrUnavailable, t.script.Name, len(reply))
	}
	r := algorithm.Result{
		Remaining:  reply[0],
		RetryAfter: reply[1],
		ResetAfter: reply[2],
	}
	if r.Remaining < 0 || r.Remaining > t.limit || r.RetryAfter < 0 || r.ResetAfter < 0 {
		return algorithm.Result{}, fmt.Errorf("%w: %s script replied %v, out of range", store.ErrUnavailable, t.script.Name, reply)
	}
	return r, nil
}
