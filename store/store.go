// Package store defines where a Limiter keeps its state.
//
// This package is for implementers of stores. A [Store] is opened once per
// Limiter, for one algorithm and clock; the [Table] it returns applies that
// algorithm's transition to one key at a time, atomically. Stores do only
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

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
)

var (
	// ErrClockUnsupported reports a clock the store cannot use, such as
	// clock.Server() with a store that has no clock of its own.
	ErrClockUnsupported = errors.New("ratelimit: clock not supported by this store")

	// ErrAlgorithmUnsupported reports an algorithm the store cannot run.
	ErrAlgorithmUnsupported = errors.New("ratelimit: algorithm not supported by this store")

	// ErrUnavailable wraps every error of a remote store's backend
	// (connection refused, timeout, a script error): the decision could not
	// be made. When the cause is a timeout, the request may still have been
	// charged; the store never retries it on its own.
	ErrUnavailable = errors.New("ratelimit: store unavailable")
)

// Store opens tables of limiter state.
type Store[K comparable] interface {
	// Open prepares the store to keep state for alg, decided at instants
	// read from clk. It returns an error wrapping ErrClockUnsupported or
	// ErrAlgorithmUnsupported when the combination makes no sense here.
	Open(alg algorithm.Algorithm, clk clock.Clock) (Table[K], error)
}

// Table holds one algorithm's state per key. Its methods are safe for
// concurrent use; calls for one key are applied one at a time, each one
// atomically.
//
// Instants are Unix microseconds read by the Limiter. A table opened with
// clock.Server() ignores them and reads the store's own clock.
type Table[K comparable] interface {
	// Take applies the algorithm's Take to key's state at now for cost
	// (1 ≤ cost ≤ the algorithm's Limit; the Limiter checks). A key
	// without state starts from the algorithm's NewState.
	Take(ctx context.Context, key K, now, cost int64) (algorithm.Result, error)
	// Peek reports key's state at now without changing it. A key without
	// state is reported as algorithm.Fresh.
	Peek(ctx context.Context, key K, now int64) (algorithm.Result, error)
	// Reset forgets key's state, so that it is treated as never seen.
	Reset(ctx context.Context, key K) error
}
