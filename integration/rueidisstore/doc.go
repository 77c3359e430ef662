// Package rueidisstore holds the conformance tests of
// github.com/go-ratelimit/ratelimit/store/rueidisstore, which need the test kits
// (storetest, redistest) that the store's own module does not require.
package rueidisstore
