package redistest

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
)

// openWarnings opens a table of one limit on a new store on target and
// returns its warnings, or Open's error.
func openWarnings(t *testing.T, newStore NewStore, target Target) ([]error, error) {
	t.Helper()
	alg := algorithms(t, 5, time.Hour)[0].alg
	table, err := newStore(t, target, Prefix(t)).Open(store.LimitsOf(alg), clock.Local())
	if err != nil {
		return nil, err
	}
	w, ok := table.(store.Warner)
	if !ok {
		t.Fatalf("the table of a Redis store does not implement store.Warner")
	}
	return w.Warnings(), nil
}

// testEvictionPolicy sets every maxmemory-policy on a server of the
// test's own and opens tables on it: the allkeys-* policies make Open
// warn (EvictionWarn), or fail (EvictionRefuse), naming the server and
// the policy; the others, EvictionUnchecked, a user that may not run
// CONFIG and a server that is down give neither. On the shared targets,
// whose configuration the test leaves alone, and on miniredis (which has
// no CONFIG), Open works and warns only if the server's own policy
// evicts.
func testEvictionPolicy(t *testing.T, newStore NewStore) {
	t.Run("Policies", func(t *testing.T) { evictionPolicies(t, newStore) })
	t.Run("ConfigRefused", func(t *testing.T) { evictionConfigRefused(t, newStore) })
	t.Run("Down", func(t *testing.T) { evictionDown(t, newStore) })
	Each(t, func(t *testing.T, target Target) { evictionShared(t, newStore, target) })
}

// evictionPolicies sets every maxmemory-policy on a server of the test's
// own: the evicting ones make Open warn, or fail with EvictionRefuse (and
// ratelimit.New with it); EvictionUnchecked never warns.
func evictionPolicies(t *testing.T, newStore NewStore) {
	srv := StartServer(t)
	admin := GoRedis(t, srv.Target())
	for _, c := range []struct {
		policy string
		evicts bool
	}{
		{"allkeys-lru", true}, {"allkeys-lfu", true}, {"allkeys-random", true},
		{"volatile-lru", true}, {"volatile-lfu", true}, {"volatile-random", true},
		{"noeviction", false}, {"volatile-ttl", false},
	} {
		if err := admin.ConfigSet(t.Context(), "maxmemory-policy", c.policy).Err(); err != nil {
			t.Fatal(err)
		}
		target := srv.Target()
		warnings, err := openWarnings(t, newStore, target)
		switch {
		case err != nil:
			t.Errorf("%s: Open: %v, want a table", c.policy, err)
		case c.evicts && (len(warnings) != 1 || !errors.Is(warnings[0], store.ErrEvicting) ||
			!strings.Contains(warnings[0].Error(), c.policy) || !strings.Contains(warnings[0].Error(), srv.Addr)):
			t.Errorf("%s: Warnings() = %v, want one error wrapping ErrEvicting naming %s and %s", c.policy, warnings, c.policy, srv.Addr)
		case !c.evicts && len(warnings) != 0:
			t.Errorf("%s: Warnings() = %v, want none", c.policy, warnings)
		}

		target.Eviction = redisstore.EvictionRefuse
		_, err = openWarnings(t, newStore, target)
		if c.evicts && (!errors.Is(err, store.ErrEvicting) || !strings.Contains(err.Error(), c.policy)) {
			t.Errorf("%s, EvictionRefuse: Open: %v, want ErrEvicting naming the policy", c.policy, err)
		}
		if !c.evicts && err != nil {
			t.Errorf("%s, EvictionRefuse: Open: %v, want a table", c.policy, err)
		}
		// Through the Limiter too: New fails.
		_, err = ratelimit.New(algorithms(t, 5, time.Hour)[0].alg, newStore(t, target, Prefix(t)), ratelimit.WithName("evicting"))
		if c.evicts != errors.Is(err, store.ErrEvicting) {
			t.Errorf("%s, EvictionRefuse: ratelimit.New: %v, want ErrEvicting: %v", c.policy, err, c.evicts)
		}

		target.Eviction = redisstore.EvictionUnchecked
		if warnings, err := openWarnings(t, newStore, target); err != nil || len(warnings) != 0 {
			t.Errorf("%s, EvictionUnchecked: Open: %v, %v; want a table without warnings", c.policy, warnings, err)
		}
	}
}

// evictionConfigRefused checks that a user that may not run CONFIG gets a
// table without warnings, in both checked modes.
func evictionConfigRefused(t *testing.T, newStore NewStore) {
	srv := StartServer(t, "--maxmemory-policy", "allkeys-lru")
	admin := GoRedis(t, srv.Target())
	if err := admin.Do(t.Context(), "acl", "setuser", "limiter", "on", ">secret", "~*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	target := srv.Target()
	target.Username, target.Password = "limiter", "secret"
	for _, mode := range []redisstore.EvictionCheck{redisstore.EvictionWarn, redisstore.EvictionRefuse} {
		target.Eviction = mode
		if warnings, err := openWarnings(t, newStore, target); err != nil || len(warnings) != 0 {
			t.Errorf("mode %d, a user that may not run CONFIG: Open: %v, %v; want a table without warnings", mode, warnings, err)
		}
	}
}

// evictionDown checks that Open with the server down returns a table
// without warnings within about EvictionCheckTimeout.
func evictionDown(t *testing.T, newStore NewStore) {
	srv := StartServer(t, "--maxmemory-policy", "allkeys-lru")
	target := srv.Target()
	target.Eviction = redisstore.EvictionRefuse
	st := newStore(t, target, Prefix(t)) // rueidis dials when it is made
	srv.Kill()
	start := time.Now()
	table, err := st.Open(store.LimitsOf(algorithms(t, 5, time.Hour)[0].alg), clock.Local())
	if took := time.Since(start); took > evictionCheckTimeout+500*time.Millisecond {
		t.Errorf("Open with the server down took %v, want at most about %v", took, evictionCheckTimeout)
	}
	if err != nil || len(table.(store.Warner).Warnings()) != 0 {
		t.Errorf("Open with the server down: %v; want a table without warnings (the check is best effort)", err)
	}
}

// evictionShared checks that Open on a shared target, whose configuration
// the test leaves alone, warns only if the server's own policy evicts.
func evictionShared(t *testing.T, newStore NewStore, target Target) {
	want := false
	if target.Mini == nil {
		forEachMaster(t.Context(), t, GoRedis(t, target), func(c redis.Cmdable) error {
			policy, err := c.ConfigGet(t.Context(), "maxmemory-policy").Result()
			want = want || evicts(policy["maxmemory-policy"])
			return err
		})
	}
	warnings, err := openWarnings(t, newStore, target)
	if err != nil || (len(warnings) != 0) != want {
		t.Errorf("Open: %v, %v; want a table, with warnings: %v", warnings, err, want)
	}
}

// testEvictionCheckOnce checks that a store reads the policy once for
// all its tables (CONFIG calls in INFO commandstats), and keeps what it
// found: a store opened while the server evicted keeps warning after the
// policy changes.
func testEvictionCheckOnce(t *testing.T, newStore NewStore) {
	srv := StartServer(t, "--maxmemory-policy", "allkeys-lfu")
	ctx := t.Context()
	admin := GoRedis(t, srv.Target())
	st := newStore(t, srv.Target(), Prefix(t))
	configCalls := func() int64 {
		t.Helper()
		info, err := admin.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_config|get:calls="); ok {
				n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				return n
			}
		}
		return 0
	}
	for i, alg := range algorithms(t, 5, time.Hour) {
		if i == 3 {
			if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
				t.Fatal(err)
			}
		}
		table, err := st.Open(store.LimitsOf(alg.alg), clock.Local())
		if err != nil {
			t.Fatal(err)
		}
		if w := table.(store.Warner).Warnings(); len(w) != 1 || !errors.Is(w[0], store.ErrEvicting) {
			t.Errorf("Open #%d: Warnings() = %v, want the one found by the first Open", i, w)
		}
	}
	if n := configCalls(); n != 1 {
		t.Errorf("6 Opens on one store sent %d CONFIG GET, want 1", n)
	}
}

// testKeyTooLong checks that keys longer than MaxKeyBytes fail Allow,
// Peek and Reset with ErrKeyTooLong, whatever the failure policy, and
// that keys of exactly that length work, braces and all.
func testKeyTooLong(t *testing.T, newStore NewStore) {
	Each(t, func(t *testing.T, target Target) {
		ctx := t.Context()
		alg := algorithms(t, 5, time.Hour)[3].alg
		for _, max := range []int{0, 16} {
			target.MaxKeyBytes = max
			if max == 0 {
				max = store.DefaultMaxKeyBytes
			}
			st := newStore(t, target, Prefix(t))
			clk := ratelimit.WithClock(clock.NewFake(epoch))
			for _, lim := range []*ratelimit.Limiter[string]{
				newLimiter(t, alg, st, clk, shared(alg)),
				newLimiter(t, alg, st, clk, shared(alg), ratelimit.WithFailurePolicy(ratelimit.FailOpen)),
			} {
				for _, key := range []string{strings.Repeat("k", max), "{" + strings.Repeat("}", max-2) + "{"} {
					if d, err := lim.Allow(ctx, key); err != nil || d.Remaining() != 4 {
						t.Errorf("Allow(%d bytes) with a limit of %d = %+v, %v; want Remaining 4", len(key), max, d, err)
					}
					if d, err := lim.Peek(ctx, key); err != nil || d.Remaining() != 4 {
						t.Errorf("Peek(%d bytes) with a limit of %d = %+v, %v; want Remaining 4", len(key), max, d, err)
					}
					if err := lim.Reset(ctx, key); err != nil {
						t.Errorf("Reset(%d bytes) with a limit of %d: %v", len(key), max, err)
					}
				}
				for _, key := range []string{strings.Repeat("k", max+1), strings.Repeat("}", 1<<20)} {
					if d, err := lim.Allow(ctx, key); !errors.Is(err, ratelimit.ErrKeyTooLong) || errors.Is(err, ratelimit.ErrStoreUnavailable) {
						t.Errorf("Allow(%d bytes) with a limit of %d = %+v, %v; want ErrKeyTooLong", len(key), max, d, err)
					}
					if d, err := lim.Peek(ctx, key); !errors.Is(err, ratelimit.ErrKeyTooLong) {
						t.Errorf("Peek(%d bytes) with a limit of %d = %+v, %v; want ErrKeyTooLong", len(key), max, d, err)
					}
					if err := lim.Reset(ctx, key); !errors.Is(err, ratelimit.ErrKeyTooLong) {
						t.Errorf("Reset(%d bytes) with a limit of %d: %v, want ErrKeyTooLong", len(key), max, err)
					}
				}
			}
		}
	})
}

// testEvictionRecheck starts a server of the test's own on noeviction,
// opens a Limiter on it, then switches the server to allkeys-lru: within
// the check interval (shortened here: WithEvictionCheckInterval) of decisions, the Limiter's error
// handler gets an error wrapping ErrEvicting (EvictionWarn), or its
// decisions fail with one (EvictionRefuse), even under FailOpen, not
// ErrStoreUnavailable; switched back to noeviction, they decide again.
func testEvictionRecheck(t *testing.T, newStore NewStore) {
	srv := StartServer(t, "--maxmemory-policy", "noeviction")
	ctx := t.Context()
	admin := GoRedis(t, srv.Target())
	const interval = 200 * time.Millisecond
	setPolicy := func(policy string) {
		t.Helper()
		if err := admin.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
	}
	alg := algorithms(t, 10_000, time.Hour)[0].alg
	for _, mode := range []redisstore.EvictionCheck{redisstore.EvictionWarn, redisstore.EvictionRefuse} {
		setPolicy("noeviction")
		target := srv.Target()
		target.Eviction = mode
		target.EvictionInterval = interval
		reported := make(chan error, 100)
		lim := newLimiter(t, alg, newStore(t, target, Prefix(t)), ratelimit.WithFailurePolicy(ratelimit.FailOpen),
			ratelimit.WithErrorHandler(func(err error) { reported <- err }))
		if d, err := lim.Allow(ctx, "k"); err != nil || !d.Allowed() || len(reported) != 0 {
			t.Fatalf("mode %d on noeviction: %v, %v, %d reported", mode, d, err, len(reported))
		}
		setPolicy("allkeys-lru")
		// until polls Allow until done says the decision shows the check's
		// finding, for at most a few EvictionIntervals.
		until := func(what string, done func(d ratelimit.Decision, err error) bool) {
			t.Helper()
			deadline := time.Now().Add(10 * interval)
			for {
				d, err := lim.Allow(ctx, "k")
				if done(d, err) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("mode %d: no %s within %v of the switch: last %v, %v", mode, what, 10*interval, d, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		switch mode {
		case redisstore.EvictionWarn:
			until("warning", func(d ratelimit.Decision, err error) bool {
				if err != nil {
					t.Fatalf("EvictionWarn: Allow: %v, want decisions as ever", err)
				}
				return len(reported) > 0
			})
			if w := <-reported; !errors.Is(w, store.ErrEvicting) || !strings.Contains(w.Error(), "allkeys-lru") || !strings.Contains(w.Error(), srv.Addr) {
				t.Errorf("EvictionWarn: reported %v, want ErrEvicting naming allkeys-lru and %s", w, srv.Addr)
			}
			for range 20 {
				lim.Allow(ctx, "k")
			}
			if len(reported) != 0 {
				t.Errorf("EvictionWarn: reported again: %v", <-reported)
			}
		case redisstore.EvictionRefuse:
			until("refusal", func(d ratelimit.Decision, err error) bool {
				if err == nil {
					return false
				}
				if !errors.Is(err, store.ErrEvicting) || errors.Is(err, ratelimit.ErrStoreUnavailable) || d.Allowed() {
					t.Fatalf("EvictionRefuse, FailOpen: Allow: %v, %v; want ErrEvicting alone, not admitted", d, err)
				}
				return true
			})
			setPolicy("noeviction")
			until("decision", func(d ratelimit.Decision, err error) bool { return err == nil && d.Allowed() })
		}
	}
}

// evictionCheckTimeout is how long a store's first Open waits at most for
// the servers' maxmemory-policy: a second (redisstore.WithEvictionCheck).
const evictionCheckTimeout = time.Second

// evicts reports whether a maxmemory-policy may evict limiter state, as
// the stores judge it: the allkeys-* policies, and the volatile-* ones
// but volatile-ttl (every limiter key has a TTL).
func evicts(policy string) bool {
	switch policy {
	case "volatile-lru", "volatile-lfu", "volatile-random":
		return true
	}
	return strings.HasPrefix(policy, "allkeys-")
}
