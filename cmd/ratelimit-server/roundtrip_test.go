package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// scriptCalls returns how many script calls (EVALSHA and EVAL) the Redis
// at addr has run, by INFO commandstats.
func scriptCalls(t *testing.T, addr string) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for line := range strings.Lines(info) {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
				v, err := strconv.ParseInt(calls, 10, 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				n += v
			}
		}
	}
	return n
}

// TestOneCallPerRequest: a request of two descriptors is one script call,
// admitted or denied; with -denial-cache-keys, a request whose
// descriptors are all denied from the cache makes none. Counted by the
// real Redis's INFO commandstats (no other client of this test's keys
// runs meanwhile; other tests' calls on the same server would only add).
func TestOneCallPerRequest(t *testing.T) {
	addr := os.Getenv(envRedis)
	if addr == "" {
		t.Skipf("no real Redis: set %s=host:port to run this test", envRedis)
	}
	tg := target{name: "redis", store: "redis", addrs: func(*testing.T) string { return addr }}
	s := startServer(t, tg, exampleConfig, func(o *options) { o.service.denials = 64 })
	fooBar := desc("foo", "a", "bar", "b")         // 3 a minute
	baz := desc("foo", "a", "baz", "not-so-shady") // 3 a minute
	s.ask(t, "rl", fooBar, baz)                    // loads the script
	before := scriptCalls(t, addr)
	s.expectCodes(t, "rl", descs(fooBar, baz), ok, ok, over)
	if n := scriptCalls(t, addr) - before; n != 3 {
		t.Errorf("3 requests of 2 descriptors made %d script calls, want 3", n)
	}
	// The last denial is cached: the same request again asks nothing.
	before = scriptCalls(t, addr)
	s.expectCodes(t, "rl", descs(fooBar, baz), over, over)
	if n := scriptCalls(t, addr) - before; n != 0 {
		t.Errorf("2 requests denied from the cache made %d script calls, want 0", n)
	}
}

// TestShadowLeavesOthersCharged: a request whose only descriptor over its
// limit is a shadow_mode one is admitted, and its other descriptors are
// charged (the all-or-none call denied it, so they are charged by a second).
func TestShadowLeavesOthersCharged(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startServer(t, tg, exampleConfig)
		fooBar := desc("foo", "a", "bar", "b")               // 3 a minute
		shady := desc("foo", "a", "baz", "shady")            // 3 a minute, shadow_mode
		s.expectCodes(t, "rl", descs(shady), ok, ok, ok, ok) // the fourth is over, in shadow
		s.expectCodes(t, "rl", descs(fooBar, shady), ok)
		res := s.ask(t, "rl", withHits(desc("foo", "a", "bar", "b"), 0))
		if got := res.Statuses[0].LimitRemaining; got != 2 {
			t.Fatalf("(foo, bar) has %d remaining after a request admitted beside a shadow denial, want 2", got)
		}
	})
}
