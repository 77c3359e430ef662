package redistest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
)

// Outage parameters: callers, the breaker's, and the margins that keep
// the test meaningful on a loaded 2-core machine.
const (
	outageCallers = 64
	outageProbe   = 200 * time.Millisecond
	outageDown    = time.Second // how long the server stays down once the breaker opened
	// outageP99 bounds the p99 latency of decisions while the breaker is
	// open: the 1 ms, against 49 µs (rueidis) to 403 ms (go-redis)
	// per decision without a breaker.
	outageP99 = time.Millisecond
	// outageSlack is what closing may take beyond the probe interval and
	// the client's own redial delay: scheduling on a busy machine, the
	// restarted server's first replies.
	outageSlack = 400 * time.Millisecond
)

// RunOutage kills a private server under 64 callers of a Limiter with a
// circuit breaker (5 failures, a probe every 200 ms), once with FailOpen
// and once with FailLocal, and restarts it. It checks that every call
// returns a decision; that once the breaker is open, decisions come from
// the failure policy with Decision.BreakerOpen set (but for the probes)
// and their p99 latency, measured from every call that started while the
// breaker was open, stays under 1 ms; and that the store decides again
// within one probe interval of the restart, plus redial, the time the
// client library itself may take to dial a server again (go-redis tries
// once a second once its dials have failed). It logs the latencies.
func RunOutage(t *testing.T, newStore NewStore, redial time.Duration) {
	for _, c := range []struct {
		name   string
		policy ratelimit.FailurePolicy
		source ratelimit.Source
	}{
		{"FailOpen", ratelimit.FailOpen, ratelimit.FromFailOpen},
		{"FailLocal", ratelimit.FailLocal, ratelimit.FromLocal},
	} {
		t.Run(c.name, func(t *testing.T) { testOutage(t, newStore, c.policy, c.source, redial) })
	}
}

// sample is one call of the outage test.
type sample struct {
	start, took time.Duration // since the test's start
	source      ratelimit.Source
	open        bool
	err         error
}

func testOutage(t *testing.T, newStore NewStore, policy ratelimit.FailurePolicy, source ratelimit.Source, redial time.Duration) {
	srv := StartServer(t)
	alg, err := bucketPer(1_000_000, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	lim := newLimiter(t, alg, newStore(t, srv.Target(), Prefix(t)),
		ratelimit.WithClock(clock.Local()),
		ratelimit.WithFailurePolicy(policy),
		ratelimit.WithBreaker(ratelimit.Breaker{Failures: 5, ProbeInterval: outageProbe}),
		ratelimit.WithErrorHandler(func(error) { handled.Add(1) }))
	r := startCallers(lim)
	defer r.stop()

	time.Sleep(300 * time.Millisecond) // the store decides
	killed := time.Since(r.base)
	srv.Kill()
	openAt := waitSet(t, "the breaker did not open after the kill", &r.opened, 10*time.Second)
	time.Sleep(outageDown)
	restarting := time.Since(r.base) // the server may answer before Start returns
	srv.Start()
	upAt := time.Since(r.base)
	r.up.Store(int64(upAt) + 1)
	closeAt := waitSet(t, "the store did not decide again after the restart", &r.closedAt, outageProbe+redial+10*time.Second)
	time.Sleep(200 * time.Millisecond)
	all := r.stop()

	down, probes := checkDown(t, all, openAt, restarting, source)
	slices.Sort(down)
	p50, p99, worst := percentile(down, 50), percentile(down, 99), down[len(down)-1]
	t.Logf("%d callers: killed at %v, breaker open %v later; %d decisions with the breaker open (%d probes): p50 %v, p99 %v, max %v; restarted at %v, closed %v later; error handler called %d times",
		outageCallers, killed.Round(time.Millisecond), (openAt - killed).Round(time.Millisecond), len(down), probes,
		p50, p99, worst, upAt.Round(time.Millisecond), (closeAt - upAt).Round(time.Millisecond), handled.Load())
	if p99 >= outageP99 {
		t.Errorf("p99 latency with the breaker open = %v, want under %v", p99, outageP99)
	}
	if max := outageProbe + redial + outageSlack; closeAt-upAt > max {
		t.Errorf("the store decided again %v after the restart, want within %v (the probe interval %v, the client's redial %v, %v of slack)",
			closeAt-upAt, max, outageProbe, redial, outageSlack)
	}
	// Once closed, the store decides.
	for _, s := range all {
		if s.start > closeAt+50*time.Millisecond && (s.source != ratelimit.FromStore || s.open) {
			t.Fatalf("a decision at %v, after the breaker closed at %v: source %v, breaker open %v; want the store's", s.start, closeAt, s.source, s.open)
		}
	}
}

// callers are the outage test's callers of one limiter, and what they
// saw: every instant is since base, plus 1 so that 0 means not yet.
type callers struct {
	base     time.Time
	opened   atomic.Int64 // when a decision first had the breaker open
	closedAt atomic.Int64 // when the store first decided after up
	up       atomic.Int64 // when the restarted server answered
	done     chan struct{}
	samples  [][]sample
	wg       sync.WaitGroup
}

// startCallers starts outageCallers goroutines calling lim about once a
// millisecond each, without a deadline, as in the issue.
func startCallers(lim *ratelimit.Limiter[string]) *callers {
	r := &callers{base: time.Now(), done: make(chan struct{}), samples: make([][]sample, outageCallers)}
	for g := range outageCallers {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			key := fmt.Sprint("caller:", g)
			mine := make([]sample, 0, 4096)
			defer func() { r.samples[g] = mine }()
			for {
				select {
				case <-r.done:
					return
				default:
				}
				start := time.Since(r.base)
				d, err := lim.Allow(context.Background(), key) // no deadline, as in the issue
				s := sample{start: start, took: time.Since(r.base) - start, source: d.Source(), open: d.BreakerOpen(), err: err}
				mine = append(mine, s)
				if s.open {
					r.opened.CompareAndSwap(0, int64(start+s.took)+1)
				}
				if u := r.up.Load(); u != 0 && err == nil && d.Source() == ratelimit.FromStore && int64(start) >= u-1 {
					r.closedAt.CompareAndSwap(0, int64(start+s.took)+1)
				}
				time.Sleep(time.Millisecond) // a caller paced like a request handler
			}
		}()
	}
	return r
}

// stop stops the callers (again: a no-op) and returns every call they
// made.
func (r *callers) stop() []sample {
	select {
	case <-r.done:
	default:
		close(r.done)
		r.wg.Wait()
	}
	var all []sample
	for _, s := range r.samples {
		all = append(all, s...)
	}
	return all
}

// waitSet waits until v is set, at most limit, and returns its instant.
func waitSet(t *testing.T, what string, v *atomic.Int64, limit time.Duration) time.Duration {
	t.Helper()
	for deadline := time.Now().Add(limit); v.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
	}
	return time.Duration(v.Load() - 1)
}

// checkDown checks that every call returned a decision and that those
// that started while the breaker was open (from openAt, ending before
// restarting) came from the failure policy, of source; it returns their
// latencies and how many were probes.
func checkDown(t *testing.T, all []sample, openAt, restarting time.Duration, source ratelimit.Source) (down []time.Duration, probes int) {
	t.Helper()
	wrong := 0
	for _, s := range all {
		if s.err != nil {
			t.Fatalf("a call at %v returned %v; want a decision from the store or the failure policy", s.start, s.err)
		}
		if s.start < openAt || s.start+s.took > restarting {
			continue
		}
		down = append(down, s.took)
		switch {
		case s.source != source:
			wrong++
		case !s.open:
			probes++
		}
	}
	if wrong > 0 {
		t.Errorf("%d decisions while the server was down came from elsewhere than the failure policy (%v)", wrong, source)
	}
	if len(down) < outageCallers*100 {
		t.Fatalf("only %d calls while the breaker was open; the test did not run as meant", len(down))
	}
	return down, probes
}

// percentile returns the p-th percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	return sorted[(len(sorted)-1)*p/100]
}
