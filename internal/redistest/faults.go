package redistest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/store"
)

// testTimeout checks that a call whose context ends while the server
// holds its scripts returns with context.DeadlineExceeded, whatever the
// failure policy, without waiting for the server (under a second, against
// a deadline of 50 ms and the store's own timeout of 3 s: room for a
// loaded machine, none for a wait on the store), and charges at most
// once. The caller's deadline ended the call, so the error is the
// caller's, not ErrStoreUnavailable: no failure policy decides it.
func testTimeout(t *testing.T, newStore NewStore) {
	srv := StartServer(t)
	ctx := t.Context()
	alg := algorithms(t, 5, time.Hour)[3].alg
	st := newStore(t, srv.Target(), Prefix(t))
	clk := clock.NewFake(epoch)
	lim := newLimiter(t, alg, st, ratelimit.WithClock(clk), shared(alg))
	open := newLimiter(t, alg, st, ratelimit.WithClock(clk), shared(alg), ratelimit.WithFailurePolicy(ratelimit.FailOpen))
	for _, l := range []*ratelimit.Limiter[string]{lim, open} {
		if _, err := l.Allow(ctx, "warm"); err != nil { // connected, script cached
			t.Fatalf("Allow(warm): %v", err)
		}
	}

	resume := srv.Pause()
	const deadline = 50 * time.Millisecond
	for _, c := range []struct {
		name string
		lim  *ratelimit.Limiter[string]
	}{{"FailWithError", lim}, {"FailOpen", open}} {
		cctx, cancel := context.WithTimeout(ctx, deadline)
		start := time.Now()
		d, err := c.lim.Allow(cctx, "k")
		took := time.Since(start)
		cancel()
		if errors.Is(err, ratelimit.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: Allow with a %v deadline on a paused server = %+v, %v; want an error matching context.DeadlineExceeded and not ErrStoreUnavailable",
				c.name, deadline, d, err)
		}
		if took >= time.Second {
			t.Errorf("%s: Allow with a %v deadline on a paused server took %v, want under a second", c.name, deadline, took)
		}
	}
	resume()
	// The two scripts sent may have run once each after the pause ended,
	// never more.
	d, err := lim.Peek(ctx, "k")
	if err != nil || d.Remaining() < 3 {
		t.Errorf("Peek(k) after the pause = %+v, %v; want Remaining ≥ 3 (two timed-out calls, each charged at most once)", d, err)
	}
	if d, err := lim.Allow(ctx, "after"); err != nil || d.Remaining() != 4 {
		t.Errorf("Allow(after) once the pause ended = %+v, %v; want allowed with Remaining 4", d, err)
	}
}

// testLostReply loses the reply to a take the server ran (a proxy closes
// the connection instead of answering): the call fails with
// ErrStoreUnavailable, and neither the client library nor the store
// resends it, so the key is charged exactly once.
func testLostReply(t *testing.T, newStore NewStore) {
	Each(t, func(t *testing.T, target Target) {
		if target.Cluster {
			t.Skip("a proxy cannot stand in for the nodes of a cluster")
		}
		ctx := t.Context()
		proxy := StartProxy(t, target)
		for _, a := range algorithms(t, 5, time.Hour) {
			t.Run(a.name, func(t *testing.T) {
				prefix := Prefix(t)
				lim := newLimiter(t, a.alg, newStore(t, proxy.Target(), prefix), ratelimit.WithClock(clock.NewFake(epoch)))
				if _, err := lim.Allow(ctx, "warm"); err != nil { // connected, script cached
					t.Fatal(err)
				}
				cuts := proxy.Cuts()
				proxy.LoseReplyTo(RedisKey(t, prefix, "lost", a.alg))
				if d, err := lim.AllowN(ctx, "lost", 2); !errors.Is(err, ratelimit.ErrStoreUnavailable) {
					t.Errorf("AllowN(lost, 2) whose reply was lost = %+v, %v; want ErrStoreUnavailable", d, err)
				}
				if proxy.Cuts() != cuts+1 {
					t.Fatalf("the proxy lost %d replies, want 1", proxy.Cuts()-cuts)
				}
				var d ratelimit.Decision
				var err error
				for start := time.Now(); ; time.Sleep(10 * time.Millisecond) { // the client may take a moment to reconnect
					if d, err = lim.Peek(ctx, "lost"); err == nil || time.Since(start) > 2*time.Second {
						break
					}
				}
				if err != nil || d.Remaining() != 3 {
					t.Errorf("Peek(lost) = %+v, %v; want Remaining 3: charged once, by the call whose reply was lost", d, err)
				}
			})
		}
	})
}

// testRestart kills the server under a limiter of every failure policy
// and starts it again.
func testRestart(t *testing.T, newStore NewStore) {
	srv := StartServer(t)
	ctx := t.Context()
	alg := algorithms(t, 3, time.Hour)[3].alg
	script, _, err := luascript.For(luascript.LimitOf(alg, ""))
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t, srv.Target(), Prefix(t))
	var handled atomic.Int64
	policies := []ratelimit.FailurePolicy{ratelimit.FailWithError, ratelimit.FailOpen, ratelimit.FailClosed, ratelimit.FailLocal}
	lims := make([]*ratelimit.Limiter[string], len(policies))
	clk := clock.NewFake(epoch)
	for i, p := range policies {
		lims[i] = newLimiter(t, alg, st, ratelimit.WithClock(clk), shared(alg), ratelimit.WithFailurePolicy(p),
			ratelimit.WithErrorHandler(func(error) { handled.Add(1) }))
		key := fmt.Sprint("k", i)
		if d, err := lims[i].Allow(ctx, key); err != nil || d.Source() != ratelimit.FromStore || d.Remaining() != 2 {
			t.Fatalf("policy %d: Allow(%s) before the kill = %+v, %v", p, key, d, err)
		}
	}
	stopCalls := busyCalls(t, lims[0])
	defer stopCalls()

	srv.Kill()
	checkDeadPolicies(t, lims)
	if handled.Load() == 0 {
		t.Errorf("the error handler was never called while the server was down")
	}
	checkNoDeadline(t, lims[0])
	stopCalls()
	srv.Start()
	admin := GoRedis(t, srv.Target())
	if ok, err := admin.ScriptExists(ctx, script.SHA1).Result(); err != nil || ok[0] {
		t.Fatalf("SCRIPT EXISTS on the restarted server = %v, %v; want an empty cache", ok, err)
	}
	// The client may take a moment to reconnect.
	var d ratelimit.Decision
	for start := time.Now(); ; {
		if d, err = lims[0].Allow(ctx, "up"); err == nil || time.Since(start) > 5*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || d.Source() != ratelimit.FromStore || d.Remaining() != 2 {
		t.Fatalf("Allow(up) after the restart = %+v, %v; want allowed by the store", d, err)
	}
	for i, l := range lims {
		// The server kept nothing: k<i> is new again.
		key := fmt.Sprint("k", i)
		if d, err := l.Allow(ctx, key); err != nil || d.Source() != ratelimit.FromStore || d.Remaining() != 2 {
			t.Errorf("policy %d: Allow(%s) after the restart = %+v, %v; want allowed by the store with Remaining 2", policies[i], key, d, err)
		}
	}
}

// busyCalls has goroutines keep calling lim across a kill and a restart:
// no panic, and every error is the store's. The function it returns stops
// them (again: a no-op) and reports an error that was not.
func busyCalls(t *testing.T, lim *ratelimit.Limiter[string]) (stopCalls func()) {
	ctx := t.Context()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var badErr atomic.Value
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err := lim.Allow(cctx, fmt.Sprint("busy", g, i%7))
				if err == nil {
					_, err = lim.Peek(cctx, fmt.Sprint("busy", g, i%5))
				}
				cancel()
				if err != nil && !errors.Is(err, ratelimit.ErrStoreUnavailable) {
					badErr.Store(err)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	stopped := false
	return func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
		if err := badErr.Load(); err != nil {
			t.Errorf("a call while the server was down failed with %v, which is not ErrStoreUnavailable", err)
		}
	}
}

// deadCall is one call on a dead server, which must return within 2s.
type deadCall func(ctx context.Context) (ratelimit.Decision, error)

// allowCall and peekCall are the calls of Allow and Peek of key on l.
func allowCall(l *ratelimit.Limiter[string], key string) deadCall {
	return func(ctx context.Context) (ratelimit.Decision, error) { return l.Allow(ctx, key) }
}

func peekCall(l *ratelimit.Limiter[string], key string) deadCall {
	return func(ctx context.Context) (ratelimit.Decision, error) { return l.Peek(ctx, key) }
}

// run makes the call with a 5s deadline, and fails t when it takes more
// than 2s.
func (f deadCall) run(t *testing.T, what string) (ratelimit.Decision, error) {
	t.Helper()
	cctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	d, err := f(cctx)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("%s on a dead server took %v", what, took)
	}
	return d, err
}

// checkDeadPolicies checks what the limiters of testRestart's four
// failure policies decide on a dead server.
func checkDeadPolicies(t *testing.T, lims []*ratelimit.Limiter[string]) {
	// FailWithError: the store's error.
	for _, f := range []deadCall{allowCall(lims[0], "down"), peekCall(lims[0], "down")} {
		if d, err := f.run(t, "FailWithError"); !errors.Is(err, ratelimit.ErrStoreUnavailable) || d != (ratelimit.Decision{}) {
			t.Errorf("FailWithError on a dead server = %+v, %v; want a zero Decision and ErrStoreUnavailable", d, err)
		}
	}
	if err := lims[0].Reset(t.Context(), "down"); !errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Errorf("Reset on a dead server: %v, want ErrStoreUnavailable", err)
	}
	// FailOpen: admitted, nothing used.
	for _, f := range []deadCall{allowCall(lims[1], "down"), peekCall(lims[1], "down")} {
		want := ratelimit.DecisionFields{Allowed: true, Limit: 3, Remaining: 3, Source: ratelimit.FromFailOpen}.Decision()
		if d, err := f.run(t, "FailOpen"); err != nil || d != want {
			t.Errorf("FailOpen on a dead server = %+v, %v; want %+v", d, err, want)
		}
	}
	// FailClosed: denied, retry in a second.
	for _, f := range []deadCall{allowCall(lims[2], "down"), peekCall(lims[2], "down")} {
		want := ratelimit.DecisionFields{Limit: 3, RetryAfter: time.Second, Source: ratelimit.FromFailClosed}.Decision()
		if d, err := f.run(t, "FailClosed"); err != nil || d != want {
			t.Errorf("FailClosed on a dead server = %+v, %v; want %+v", d, err, want)
		}
	}
	// FailLocal: an in-memory limiter of the same algorithm decides.
	for i, want := range []struct {
		allowed   bool
		remaining int64
	}{{true, 2}, {true, 1}, {true, 0}, {false, 0}} {
		d, err := allowCall(lims[3], "down").run(t, "FailLocal")
		if err != nil || d.Source() != ratelimit.FromLocal || d.Allowed() != want.allowed || d.Remaining() != want.remaining {
			t.Errorf("FailLocal: call %d on a dead server = %+v, %v; want allowed=%v remaining=%d from local", i, d, err, want.allowed, want.remaining)
		}
	}
	if d, err := peekCall(lims[3], "down").run(t, "FailLocal"); err != nil || d.Source() != ratelimit.FromLocal || d.Allowed() || d.Remaining() != 0 {
		t.Errorf("FailLocal: Peek on a dead server = %+v, %v; want the local state, used up", d, err)
	}
}

// checkNoDeadline checks that a call without a deadline on a dead server
// still returns: nothing retries until the server is back.
func checkNoDeadline(t *testing.T, lim *ratelimit.Limiter[string]) {
	for _, f := range []deadCall{allowCall(lim, "down"), peekCall(lim, "down")} {
		done := make(chan error, 1)
		go func() { _, err := f(context.Background()); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ratelimit.ErrStoreUnavailable) {
				t.Errorf("a call without a deadline on a dead server: %v, want ErrStoreUnavailable", err)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("a call without a deadline on a dead server has not returned after 2s")
		}
	}
}

// testEviction fills a server that evicts under maxmemory (allkeys-lru):
// the limiter keeps answering, and an evicted key is decided as a new
// one, so a spent victim is admitted again. This is the danger the
// store's eviction check warns of: its tables report ErrEvicting.
func testEviction(t *testing.T, newStore NewStore) {
	srv := StartServer(t, "--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru")
	ctx := t.Context()
	admin := GoRedis(t, srv.Target())
	prefix := Prefix(t)
	alg := algorithms(t, 2, time.Hour)[3].alg
	st := newStore(t, srv.Target(), prefix)
	table, err := st.Open(store.LimitsOf(alg), clock.Local())
	if err != nil {
		t.Fatal(err)
	}
	if w := table.(store.Warner).Warnings(); len(w) != 1 || !errors.Is(w[0], store.ErrEvicting) {
		t.Errorf("Warnings() of a table on an allkeys-lru server = %v, want ErrEvicting", w)
	}
	lim := newLimiter(t, alg, st, ratelimit.WithClock(clock.NewFake(epoch)))
	for i, want := range []bool{true, true, false} {
		if d, err := lim.Allow(ctx, "victim"); err != nil || d.Allowed() != want {
			t.Fatalf("Allow(victim) #%d = %+v, %v; want allowed=%v", i, d, err, want)
		}
	}
	victim := RedisKey(t, prefix, "victim", alg)
	filler := strings.Repeat("x", 8<<10)
	evicted := false
	for i := 0; i < 2000 && !evicted; i++ {
		if err := admin.Set(ctx, fmt.Sprint("fill:", i), filler, 0).Err(); err != nil {
			t.Fatalf("SET fill:%d: %v", i, err)
		}
		key := fmt.Sprint("key", i)
		if d, err := lim.Allow(ctx, key); err != nil || !d.Allowed() || d.Remaining() != 1 {
			t.Fatalf("Allow(%s) while memory is full = %+v, %v; want allowed with Remaining 1", key, d, err)
		}
		n, err := admin.Exists(ctx, victim).Result()
		if err != nil {
			t.Fatal(err)
		}
		evicted = n == 0
	}
	if !evicted {
		t.Fatalf("%s was never evicted", victim)
	}
	// Spent, yet admitted again: its state is gone.
	if d, err := lim.Allow(ctx, "victim"); err != nil || !d.Allowed() || d.Remaining() != 1 {
		t.Errorf("Allow(victim) once evicted = %+v, %v; want allowed with Remaining 1, as a new key", d, err)
	}
}

// testOutOfMemory fills a server that does not evict. On Redis 7.0 a
// script without flags runs when the server is out of memory and is
// refused at its first write, before it has written anything: so takes
// that would write (a new key, an admission) fail with ErrStoreFull and
// the server's OOM text, and not with ErrStoreUnavailable, while a denial
// of a spent key, peeks (EVALSHA_RO), the EVAL fallback after SCRIPT
// FLUSH and resets (UNLINK) still answer. The breaker does not count
// ErrStoreFull.
func testOutOfMemory(t *testing.T, newStore NewStore) {
	srv := StartServer(t, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	ctx := t.Context()
	admin := GoRedis(t, srv.Target())
	alg := algorithms(t, 5, time.Hour)[0].alg
	st := newStore(t, srv.Target(), Prefix(t))
	clk := clock.NewFake(epoch)
	lim := newLimiter(t, alg, st, ratelimit.WithClock(clk),
		ratelimit.WithBreaker(ratelimit.Breaker{Failures: 1, ProbeInterval: time.Hour}))
	if _, err := lim.AllowN(ctx, "before", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.AllowN(ctx, "spent", 5); err != nil {
		t.Fatal(err)
	}
	filler := strings.Repeat("x", 8<<10)
	full := false
	for i := 0; i < 1000 && !full; i++ {
		err := admin.Set(ctx, fmt.Sprint("fill:", i), filler, 0).Err()
		if err != nil && !strings.Contains(err.Error(), "OOM") {
			t.Fatalf("SET fill:%d: %v", i, err)
		}
		full = err != nil
	}
	if !full {
		t.Fatal("the server never ran out of memory")
	}
	// The SET refused was itself what went over the limit (its argument
	// counts); halve the limit so that the server is full for any command.
	if err := admin.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Set(ctx, "small", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("SET small on a full server: %v, want OOM", err)
	}
	for _, key := range []string{"new", "before", "new"} {
		d, err := lim.Allow(ctx, key)
		if !errors.Is(err, ratelimit.ErrStoreFull) || errors.Is(err, ratelimit.ErrStoreUnavailable) || !strings.Contains(err.Error(), "OOM command not allowed") {
			t.Errorf("Allow(%s) on a full server = %+v, %v; want ErrStoreFull (not ErrStoreUnavailable) with the server's OOM text", key, d, err)
		}
	}
	// The failure policy decides a store out of room, as an outage.
	var handled []error
	for policy, source := range map[ratelimit.FailurePolicy]ratelimit.Source{
		ratelimit.FailOpen: ratelimit.FromFailOpen, ratelimit.FailClosed: ratelimit.FromFailClosed, ratelimit.FailLocal: ratelimit.FromLocal,
	} {
		pl := newLimiter(t, alg, st, ratelimit.WithClock(clk), shared(alg), ratelimit.WithFailurePolicy(policy),
			ratelimit.WithErrorHandler(func(err error) { handled = append(handled, err) }))
		d, err := pl.Allow(ctx, "new")
		if err != nil || d.Source() != source || d.Allowed() != (policy != ratelimit.FailClosed) {
			t.Errorf("Allow(new) on a full server under %v = %+v, %v; want the failure policy's decision", source, d, err)
		}
	}
	if len(handled) != 3 || !errors.Is(handled[0], ratelimit.ErrStoreFull) {
		t.Errorf("the error handler saw %v; want ErrStoreFull once per failure policy", handled)
	}
	check := func(when string) {
		t.Helper()
		// A denial writes nothing: the script runs to its end.
		if d, err := lim.Allow(ctx, "spent"); err != nil || d.Allowed() || d.Source() != ratelimit.FromStore || d.BreakerOpen() {
			t.Errorf("Allow(spent) on a full server%s = %+v, %v; want denied by the store (the breaker does not count ErrStoreFull)", when, d, err)
		}
		// Read-only scripts run on a full server.
		if d, err := lim.Peek(ctx, "before"); err != nil || d.Remaining() != 3 {
			t.Errorf("Peek(before) on a full server%s = %+v, %v; want Remaining 3", when, d, err)
		}
	}
	check("")
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	check(" after SCRIPT FLUSH") // EVAL and EVAL_RO load the script again
	if err := lim.Reset(ctx, "before"); err != nil {
		t.Errorf("Reset(before) on a full server: %v", err)
	}
	if d, err := lim.Peek(ctx, "before"); err != nil || d.Remaining() != 5 {
		t.Errorf("Peek(before) after Reset = %+v, %v; want Remaining 5", d, err)
	}
}
