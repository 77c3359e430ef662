package rueidisstore_test

import (
	"errors"
	"testing"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
)

func newStore(t *testing.T, target redistest.Target, prefix string) store.Store[string] {
	t.Helper()
	opts := []rueidisstore.Option[string]{rueidisstore.WithPrefix[string](prefix), rueidisstore.WithTTLMargin[string](target.TTLMargin),
		rueidisstore.WithEvictionCheck[string](rueidisstore.EvictionCheck(target.Eviction))}
	if target.MaxKeyBytes != 0 {
		opts = append(opts, rueidisstore.WithMaxKeyBytes[string](target.MaxKeyBytes))
	}
	if target.NoCoalescing {
		opts = append(opts, rueidisstore.WithCoalescing[string](0))
	}
	if target.EvictionInterval != 0 {
		opts = append(opts, redisstore.WithEvictionCheckInterval[string](target.EvictionInterval))
	}
	st, err := rueidisstore.New(redistest.Rueidis(t, target), opts...)
	if err != nil {
		t.Fatalf("rueidisstore.New on %s: %v", target.Name, err)
	}
	return st
}

// TestRedis runs the Redis stores' suite. With a real Redis configured,
// its Conformance and Differential parts do not run again on miniredis:
// the scripts are the go-redis store's, which runs them there
// (integration/goredisstore), and the real servers check this client.
func TestRedis(t *testing.T) {
	redistest.RunSuite(t, newStore, redistest.MiniredisStandIn())
}

// TestOutage kills Redis under 64 callers of a Limiter with a circuit
// breaker. rueidis dials again on the next call, at once.
func TestOutage(t *testing.T) {
	redistest.RunOutage(t, newStore, 0)
}

func TestNewValidates(t *testing.T) {
	client := redistest.Rueidis(t, redistest.Miniredis(t))
	if _, err := rueidisstore.New[string](nil); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("New(nil): %v, want ErrInvalidConfig", err)
	}
	for _, prefix := range []string{"a{", "}", "x{y}:"} {
		if _, err := rueidisstore.New(client, rueidisstore.WithPrefix[string](prefix)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("New(WithPrefix(%q)): %v, want ErrInvalidConfig", prefix, err)
		}
	}
	type pair struct{ a, b int }
	if _, err := rueidisstore.New[pair](client); !errors.Is(err, store.ErrKeyType) {
		t.Errorf("New[struct]: %v, want ErrKeyType", err)
	}
	for _, n := range []int{0, -1} {
		if _, err := rueidisstore.New(client, rueidisstore.WithMaxKeyBytes[string](n)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("New(WithMaxKeyBytes(%d)): %v, want ErrInvalidConfig", n, err)
		}
	}
	for _, check := range []rueidisstore.EvictionCheck{-1, rueidisstore.EvictionUnchecked + 1} {
		if _, err := rueidisstore.New(client, rueidisstore.WithEvictionCheck[string](check)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("New(WithEvictionCheck(%d)): %v, want ErrInvalidConfig", check, err)
		}
	}
}
