// Package ratelimit holds the tests and benchmarks of the root package
// github.com/go-ratelimit/ratelimit that need modules the core must not
// require: the Redis stores' benchmarks, and rapid's property tests.
package ratelimit
