package storetest

import (
	"testing"

	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

func TestHoldsOnMemory(t *testing.T) {
	testHolds(t, func(t *testing.T) store.Store[string] { return memorystore.New[string]() })
	st := memorystore.New[string]()
	testHoldsShared(t, st, st)
}
