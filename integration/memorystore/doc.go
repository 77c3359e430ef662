// Package memorystore holds the memory store's tests that need modules the
// core must not require: the storetest conformance suite and rapid's
// property tests against the algorithms. The store is
// github.com/go-ratelimit/ratelimit/store/memorystore.
package memorystore
