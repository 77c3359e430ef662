// Package redistable holds the tests of github.com/go-ratelimit/ratelimit/internal/redistable
// that need modules the core must not require (Redis clients, miniredis,
// rapid).
package redistable
