// Package redisstore holds the tests of
// github.com/go-ratelimit/ratelimit/store/redisstore that need modules the
// core must not require (Redis clients, miniredis, rapid).
package redisstore
