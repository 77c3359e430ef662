package storetest_test

import (
	"testing"

	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/store/storetest"
)

// A store's own tests run the suite with a fresh store for each test. This
// is the body of a TestConformance(t *testing.T) in the store's _test.go
// file; it is not run here, since it needs a *testing.T.
func ExampleRun() {
	testConformance := func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store[string] {
			return memorystore.New[string]()
		})
	}
	_ = testConformance
}
