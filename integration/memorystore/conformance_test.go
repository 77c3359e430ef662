package memorystore_test

import (
	"testing"

	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store[string] {
		return memorystore.New[string]()
	})
}

// TestNames checks the rule that a limit's name is its quota: the memory
// store's backend is the Store value, so it is both of Names' stores.
func TestNames(t *testing.T) {
	storetest.Names(t, func(t *testing.T) (a, b store.Store[string]) {
		s := memorystore.New[string]()
		return s, s
	})
}

// TestDifferential checks the memory store against itself, with a
// different sharding: decisions must not depend on the layout or on
// anything random, such as map order or hash seeds.
func TestDifferential(t *testing.T) {
	storetest.Differential(t,
		func(t *testing.T) store.Store[string] { return memorystore.New[string]() },
		func(t *testing.T) store.Store[string] { return memorystore.New[string](memorystore.WithShards(1)) },
	)
}
