package goredisstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func newStore(t *testing.T, target redistest.Target, prefix string) store.Store[string] {
	t.Helper()
	opts := []goredisstore.Option[string]{goredisstore.WithPrefix[string](prefix), goredisstore.WithTTLMargin[string](target.TTLMargin),
		goredisstore.WithEvictionCheck[string](goredisstore.EvictionCheck(target.Eviction))}
	if target.MaxKeyBytes != 0 {
		opts = append(opts, goredisstore.WithMaxKeyBytes[string](target.MaxKeyBytes))
	}
	if target.NoCoalescing {
		opts = append(opts, goredisstore.WithCoalescing[string](0))
	}
	if target.EvictionInterval != 0 {
		opts = append(opts, redisstore.WithEvictionCheckInterval[string](target.EvictionInterval))
	}
	st, err := goredisstore.New(redistest.GoRedis(t, target), opts...)
	if err != nil {
		t.Fatalf("goredisstore.New on %s: %v", target.Name, err)
	}
	return st
}

func TestRedis(t *testing.T) {
	redistest.RunSuite(t, newStore)
}

func TestNewRequiresContextTimeout(t *testing.T) {
	addr := redistest.Miniredis(t).Addrs[0]
	for _, c := range []struct {
		name   string
		client goredisstore.Client
		ok     bool
	}{
		{"Client", redis.NewClient(&redis.Options{Addr: addr}), false},
		{"Client with ContextTimeoutEnabled", redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}), true},
		{"ClusterClient", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}}), false},
		{"ClusterClient with ContextTimeoutEnabled", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true}), true},
		{"Ring", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}}), false},
		{"Ring with ContextTimeoutEnabled", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, ContextTimeoutEnabled: true}), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer c.client.(interface{ Close() error }).Close()
			_, err := goredisstore.New[string](c.client)
			if c.ok && err != nil {
				t.Errorf("New: %v, want no error", err)
			}
			if !c.ok && !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("New: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	client := redistest.GoRedis(t, redistest.Miniredis(t))
	if _, err := goredisstore.New[string](nil); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("New(nil): %v, want ErrInvalidConfig", err)
	}
	for _, prefix := range []string{"a{", "}", "x{y}:"} {
		if _, err := goredisstore.New(client, goredisstore.WithPrefix[string](prefix)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("New(WithPrefix(%q)): %v, want ErrInvalidConfig", prefix, err)
		}
	}
	type pair struct{ a, b int }
	if _, err := goredisstore.New[pair](client); !errors.Is(err, store.ErrKeyType) {
		t.Errorf("New[struct]: %v, want ErrKeyType", err)
	}
	for _, n := range []int{0, -1} {
		if _, err := goredisstore.New(client, goredisstore.WithMaxKeyBytes[string](n)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("New(WithMaxKeyBytes(%d)): %v, want ErrInvalidConfig", n, err)
		}
	}
	for _, check := range []goredisstore.EvictionCheck{-1, goredisstore.EvictionUnchecked + 1} {
		if _, err := goredisstore.New(client, goredisstore.WithEvictionCheck[string](check)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("New(WithEvictionCheck(%d)): %v, want ErrInvalidConfig", check, err)
		}
	}
}

// TestOutage kills Redis under 64 callers of a Limiter with a circuit
// breaker. go-redis stops dialling after PoolSize failed dials and tries
// again once a second, which the store's return may wait for.
func TestOutage(t *testing.T) {
	redistest.RunOutage(t, newStore, time.Second)
}

// TestNothingListening runs the README's Redis program with nothing
// listening at the address: its first decision, under a context of
// 100 ms, fails with ErrStoreUnavailable and says that Redis refused the
// connection, although go-redis retries the dial for longer (5 times,
// 100 ms apart) than the caller waits.
func TestNothingListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer client.Close()
	st, err := goredisstore.New(client, goredisstore.WithPrefix[string]("myapp:ratelimit:"),
		goredisstore.WithTimeout[string](200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	alg, err := tokenbucket.PerSecond(2, tokenbucket.Burst(10))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st, ratelimit.WithName("nothing-listening"), ratelimit.WithClock(clock.Server()),
		ratelimit.WithBreaker(ratelimit.Breaker{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	d, err := lim.Allow(ctx, "user:123")
	if !errors.Is(err, ratelimit.ErrStoreUnavailable) || !strings.Contains(err.Error(), "Redis refused the connection") {
		t.Fatalf("Allow with nothing listening = %+v, %v; want ErrStoreUnavailable, saying Redis refused the connection", d, err)
	}
	t.Logf("the README program would print: Redis did not decide: %v", err)
}
