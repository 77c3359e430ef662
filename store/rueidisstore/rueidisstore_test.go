package rueidisstore_test

import (
	"errors"
	"testing"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
)

func newStore(t *testing.T, target redistest.Target, prefix string) store.Store[string] {
	t.Helper()
	st, err := rueidisstore.New(redistest.Rueidis(t, target), rueidisstore.WithPrefix[string](prefix), rueidisstore.WithTTLMargin[string](target.TTLMargin))
	if err != nil {
		t.Fatalf("rueidisstore.New on %s: %v", target.Name, err)
	}
	return st
}

func TestRedis(t *testing.T) {
	redistest.RunSuite(t, newStore)
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
}
