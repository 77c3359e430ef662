package failover_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
)

// workers is how many goroutines make decisions: even ones through
// go-redis, odd ones through rueidis.
const workers = 16

var libs = [2]string{"go-redis", "rueidis"}

// target is one key of one Limiter configuration that the workers ask for.
type target struct {
	alg    algorithm.Algorithm
	prefix string
	key    string
}

// name returns the Redis key holding t's state.
func (t target) name(tb testing.TB) string {
	tb.Helper()
	return redistest.RedisKey(tb, t.prefix, t.key, t.alg)
}

// decision is one call a worker made.
type decision struct {
	target     int
	lib        int
	start, end time.Duration // since the load's start
	allowed    bool
	remaining  int64
	err        error
}

// load is workers asking for targets, one at a time each, until stopped.
type load struct {
	targets  []target
	base     time.Time
	admitted atomic.Int64   // admissions acknowledged so far
	streak   []atomic.Int64 // per target: denials in a row
	ok       [2]atomic.Int64
	lastOK   [2]atomic.Int64 // per library: when a call last succeeded, since base, +1
	stop     chan struct{}
	wg       sync.WaitGroup
	records  [workers][]decision
}

// startLoad starts the workers on c: Limiters with the server's clock and
// FailWithError, so that every failure is seen, on a go-redis and a
// rueidis cluster client.
func startLoad(t *testing.T, c *cluster, targets []target) *load {
	t.Helper()
	gr := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { gr.Close() })
	ru, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ru.Close)
	var lims [2][]*ratelimit.Limiter[string]
	for _, tg := range targets {
		// Coalescing behind one call in flight: the load's few workers per
		// key form batches, so a failover meets batches in flight (a
		// lost batch reply is every request's unknown, none resent).
		gs, err := goredisstore.New(gr, goredisstore.WithPrefix[string](tg.prefix), goredisstore.WithCoalescing[string](1))
		if err != nil {
			t.Fatal(err)
		}
		rs, err := rueidisstore.New(ru, rueidisstore.WithPrefix[string](tg.prefix), rueidisstore.WithCoalescing[string](1))
		if err != nil {
			t.Fatal(err)
		}
		// Named by its configuration, the ID target.name lays the key out by.
		name := ratelimit.WithName(store.DefaultID(tg.alg.Spec()))
		gl, err := ratelimit.New(tg.alg, gs, name, ratelimit.WithClock(clock.Server()))
		if err != nil {
			t.Fatal(err)
		}
		rl, err := ratelimit.New(tg.alg, rs, name, ratelimit.WithClock(clock.Server()))
		if err != nil {
			t.Fatal(err)
		}
		lims[0], lims[1] = append(lims[0], gl), append(lims[1], rl)
	}
	l := &load{targets: targets, base: time.Now(), streak: make([]atomic.Int64, len(targets)), stop: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			lib := w % 2
			i := w % len(targets)
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				start := time.Since(l.base)
				d, err := lims[lib][i].Allow(ctx, targets[i].key)
				end := time.Since(l.base)
				cancel()
				l.records[w] = append(l.records[w], decision{target: i, lib: lib, start: start, end: end, allowed: d.Allowed(), remaining: d.Remaining(), err: err})
				switch {
				case err != nil:
					time.Sleep(5 * time.Millisecond)
				case d.Allowed():
					l.admitted.Add(1)
					l.streak[i].Store(0)
				default:
					l.streak[i].Add(1)
				}
				if err == nil {
					l.ok[lib].Add(1)
					l.lastOK[lib].Store(int64(end) + 1)
				}
				i = (i + 1) % len(targets)
			}
		}()
	}
	t.Cleanup(l.halt)
	return l
}

// now returns the time since the load started.
func (l *load) now() time.Duration { return time.Since(l.base) }

// halt stops the workers and waits for them.
func (l *load) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// waitAdmitted waits until at least n admissions were acknowledged.
func (l *load) waitAdmitted(t *testing.T, n int64, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); l.admitted.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d admissions within %v, want %d", l.admitted.Load(), limit, n)
		}
	}
}

// waitResumed waits until both libraries have had a call succeed that
// ended after since, and returns when each did, since the load's start.
func (l *load) waitResumed(t *testing.T, since time.Duration, limit time.Duration) [2]time.Duration {
	t.Helper()
	var at [2]time.Duration
	for deadline := time.Now().Add(limit); ; time.Sleep(time.Millisecond) {
		done := true
		for lib := range libs {
			if v := l.lastOK[lib].Load(); v == 0 || time.Duration(v-1) < since {
				done = false
			} else if at[lib] == 0 {
				at[lib] = time.Duration(v - 1)
			}
		}
		if done {
			return at
		}
		if time.Now().After(deadline) {
			t.Fatalf("decisions did not resume within %v through both libraries (go-redis %v, rueidis %v)", limit, at[0], at[1])
		}
	}
}

// waitSaturated waits until every target has been denied streak times in
// a row, then stops the load.
func (l *load) waitSaturated(t *testing.T, streak int64, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(5 * time.Millisecond) {
		done := true
		for i := range l.streak {
			if l.streak[i].Load() < streak {
				done = false
			}
		}
		if done {
			l.halt()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the targets were not all denied %d times in a row within %v", streak, limit)
		}
	}
}

// all returns every decision made, in no particular order.
func (l *load) all() []decision {
	var ds []decision
	for _, r := range l.records {
		ds = append(ds, r...)
	}
	return ds
}
