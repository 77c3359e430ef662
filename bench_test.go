package ratelimit_test

import (
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/benchkit"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// The memory store's benchmarks; integration/ratelimit runs the same on
// Redis (BenchmarkRedis, and BenchmarkPolicy there):
//
//	go test -run='^$' -bench=Memory -benchmem -benchtime=200ms .
//	go test -run='^$' -bench=Memory -benchmem -cpu=1,4 .
//	go test -run='^$' -bench=Policy -benchmem .

var memoryStore = benchkit.Store{
	Name: "memory",
	New:  func(*testing.B) store.Store[string] { return memorystore.New[string]() },
}

func BenchmarkMemory(b *testing.B) {
	benchkit.Stores(b, []benchkit.Store{memoryStore})
}

func BenchmarkPolicy(b *testing.B) {
	benchkit.Policy(b, []benchkit.Store{memoryStore})
}
