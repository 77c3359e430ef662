package ratelimit_test

import (
	"fmt"
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/benchkit"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
)

// redisStores are both clients' stores on a real Redis at
// $RATELIMIT_REDIS_ADDR (the benchmarks skip when it is unset).
func redisStores(b *testing.B) []benchkit.Store {
	return redisStoresCoalescing(b, redisstore.DefaultInFlight)
}

// redisStoresCoalescing is redisStores with WithCoalescing(inFlight);
// the stores' names end in "-single" with coalescing off (0), in
// "-inflight1" with 1.
func redisStoresCoalescing(b *testing.B, inFlight int) []benchkit.Store {
	target := redistest.Standalone(b)
	suffix := ""
	switch inFlight {
	case 0:
		suffix = "-single"
	case redisstore.DefaultInFlight:
	default:
		suffix = fmt.Sprint("-inflight", inFlight)
	}
	return []benchkit.Store{
		{Name: "goredis" + suffix, Remote: true, New: func(b *testing.B) store.Store[string] {
			st, err := goredisstore.New[string](redistest.GoRedis(b, target), goredisstore.WithPrefix[string](redistest.Prefix(b)), goredisstore.WithCoalescing[string](inFlight))
			if err != nil {
				b.Fatal(err)
			}
			return st
		}},
		{Name: "rueidis" + suffix, Remote: true, New: func(b *testing.B) store.Store[string] {
			st, err := rueidisstore.New[string](redistest.Rueidis(b, target), rueidisstore.WithPrefix[string](redistest.Prefix(b)), rueidisstore.WithCoalescing[string](inFlight))
			if err != nil {
				b.Fatal(err)
			}
			return st
		}},
	}
}

// BenchmarkRedis runs the core module's BenchmarkMemory matrix on a real
// Redis, through both clients. The parallel runs use
// benchkit.RedisCallers concurrent callers and report p50 and p99 latency
// besides decisions/s:
//
//	RATELIMIT_REDIS_ADDR=127.0.0.1:16379 go test -run='^$' -bench=Redis -benchmem ./ratelimit
func BenchmarkRedis(b *testing.B) {
	benchkit.Stores(b, redisStores(b))
}

// BenchmarkPolicy is the core module's BenchmarkPolicy on Redis:
//
//	RATELIMIT_REDIS_ADDR=127.0.0.1:16379 go test -run='^$' -bench=Policy -benchmem ./ratelimit
func BenchmarkPolicy(b *testing.B) {
	benchkit.Policy(b, redisStores(b))
}
