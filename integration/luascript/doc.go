// Package luascript holds the tests of github.com/go-ratelimit/ratelimit/internal/luascript
// that need modules the core must not require (Redis clients, miniredis,
// rapid).
package luascript
