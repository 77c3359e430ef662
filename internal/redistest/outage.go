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
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// Outage parameters: callers, the breaker's, and the bounds the test
// checks. None is a time a loaded machine must keep: the server stays down
// until enough decisions were made, and latencies are compared with those
// of decisions in memory made beside them.
const (
	outageCallers = 64
	outageProbe   = 200 * time.Millisecond
	outageDown    = time.Second // how long the server stays down once the breaker opened, at least
	// outageOpenCalls is how many decisions with the breaker open the
	// test measures, at least: the server stays down until they are made.
	outageOpenCalls = outageCallers * 100
	// outageP99 bounds the p99 latency of decisions while the breaker is
	// open, beyond what the machine's load does to a decision in memory:
	// the 1 ms, against 49 µs (rueidis) to 403 ms (go-redis) per
	// decision without a breaker.
	outageP99 = time.Millisecond
)

// RunOutage kills a private server under 64 callers of a Limiter with a
// circuit breaker (5 failures, a probe every 200 ms), once with FailOpen
// and once with FailLocal, and restarts it. It checks that every call
// returns a decision; that once the breaker is open, decisions come from
// the failure policy with Decision.BreakerOpen set (but for the probes)
// and at most 1% of them, beyond as many as of the decisions in memory
// each caller makes beside each call, take 1 ms or more; and that once
// the store's client reaches the restarted server (redial, the time the
// client library itself may take to dial a server again: go-redis tries
// once a second once its dials have failed), no call fails on the store:
// the next probe closes the breaker. It logs the latencies.
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
	floor       time.Duration // what the caller's next decision on the memory store took
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
	st := newStore(t, srv.Target(), Prefix(t))
	lim := newLimiter(t, alg, st, shared(alg),
		ratelimit.WithClock(clock.Local()),
		ratelimit.WithFailurePolicy(policy),
		ratelimit.WithBreaker(ratelimit.Breaker{Failures: 5, ProbeInterval: outageProbe}),
		ratelimit.WithErrorHandler(func(error) { handled.Add(1) }))
	// ready, without a breaker, tells when the store's client reaches the
	// restarted server; floor decides in memory, beside every call, to
	// measure what the machine's load alone does to a decision's latency.
	ready := newLimiter(t, alg, st, shared(alg), ratelimit.WithClock(clock.Local()))
	floor := newLimiter(t, alg, memorystore.New[string](), ratelimit.WithClock(clock.Local()))
	r := startCallers(lim, floor)
	defer r.stop()

	time.Sleep(300 * time.Millisecond) // the store decides
	killed := time.Since(r.base)
	srv.Kill()
	openAt := waitSet(t, "the breaker did not open after the kill", &r.opened, 10*time.Second)
	time.Sleep(outageDown)
	// Enough decisions with the breaker open to measure, however slowly a
	// loaded machine runs the callers: the server stays down until then.
	// (A count in a fixed time is the machine's speed, not the breaker's.)
	waitCount(t, "decisions with the breaker open", &r.openCalls, outageOpenCalls+outageCallers, time.Minute)
	restarting := time.Since(r.base) // the server may answer before Start returns
	srv.Start()
	upAt := time.Since(r.base)
	r.up.Store(int64(upAt) + 1)
	reachAt := reach(t, ready, r.base, redial+10*time.Second)
	closeAt := waitSet(t, "the store did not decide again after the restart", &r.closedAt, outageProbe+redial+10*time.Second)
	time.Sleep(200 * time.Millisecond)
	all := r.stop()

	down, floors, probes := checkDown(t, all, openAt, restarting, source)
	slices.Sort(down)
	slices.Sort(floors)
	p50, p99, worst := percentile(down, 50), percentile(down, 99), down[len(down)-1]
	slow, slowFloor := atLeast(down, outageP99), atLeast(floors, outageP99)
	t.Logf("%d callers: killed at %v, breaker open %v later; %d decisions with the breaker open (%d probes): p50 %v, p99 %v, max %v, %d of them %v or more (in memory beside them: p50 %v, p99 %v, max %v, %d of them %v or more); restarted at %v, the client reached it %v later, the breaker closed %v later; error handler called %d times",
		outageCallers, killed.Round(time.Millisecond), (openAt - killed).Round(time.Millisecond), len(down), probes,
		p50, p99, worst, slow, outageP99, percentile(floors, 50), percentile(floors, 99), floors[len(floors)-1], slowFloor, outageP99,
		upAt.Round(time.Millisecond), (reachAt - upAt).Round(time.Millisecond), (closeAt - upAt).Round(time.Millisecond), handled.Load())
	// With the breaker open a decision costs what one in memory costs: at
	// most 1% of them take 1 ms or more (the p99 under 1 ms),
	// beyond those the machine's load explains. A busy machine stalls a
	// call in proportion to how long it runs, so the allowance is twice
	// the decisions in memory that took as long, made by the same callers
	// at the same time, scaled by how much longer a decision with the
	// breaker open takes at the median (FailLocal's decides in memory after
	// the breaker's refusal). A call that waited on the dead server would
	// be slow every time, and is not explained away.
	ratio := max(1, float64(p50)/float64(max(1, percentile(floors, 50))))
	if allowed := int(2*ratio*float64(slowFloor)) + len(down)/100; slow > allowed {
		t.Errorf("%d of %d decisions with the breaker open took %v or more (p99 %v), against %d of the decisions in memory beside them: want at most %d",
			slow, len(down), outageP99, p99, slowFloor, allowed)
	}
	// The breaker closes at the first probe after the client can reach
	// the server again: no call that started then fails on the store.
	for _, s := range all {
		if s.start >= reachAt && !s.open && s.source != ratelimit.FromStore {
			t.Errorf("a call at %v, after the store's client reached the restarted server at %v, failed on the store (source %v)", s.start, reachAt, s.source)
			break
		}
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
	base      time.Time
	opened    atomic.Int64 // when a decision first had the breaker open
	openCalls atomic.Int64 // how many decisions had the breaker open
	closedAt  atomic.Int64 // when the store first decided after up
	up        atomic.Int64 // when the restarted server answered
	done      chan struct{}
	samples   [][]sample
	wg        sync.WaitGroup
}

// startCallers starts outageCallers goroutines calling lim about once a
// millisecond each, without a deadline, as in the issue, each call followed
// by one of floor.
func startCallers(lim, floor *ratelimit.Limiter[string]) *callers {
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
				fs := time.Now()
				if _, err := floor.Allow(context.Background(), key); err != nil {
					s.err = fmt.Errorf("in memory: %w", err)
				}
				s.floor = time.Since(fs)
				mine = append(mine, s)
				if s.open {
					r.opened.CompareAndSwap(0, int64(start+s.took)+1)
					r.openCalls.Add(1)
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

// waitCount waits until v is at least n, at most limit.
func waitCount(t *testing.T, what string, v *atomic.Int64, n int64, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); v.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, not %d within %v", what, v.Load(), n, limit)
		}
	}
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
// latencies and those of the decisions in memory beside them, and how
// many were probes.
func checkDown(t *testing.T, all []sample, openAt, restarting time.Duration, source ratelimit.Source) (down, floors []time.Duration, probes int) {
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
		floors = append(floors, s.floor)
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
	if len(down) < outageOpenCalls {
		t.Fatalf("only %d calls while the breaker was open; the test did not run as meant", len(down))
	}
	return down, floors, probes
}

// reach returns when a decision of lim, a Limiter without a breaker on the
// store under test, first succeeds, at most limit from now.
func reach(t *testing.T, lim *ratelimit.Limiter[string], base time.Time, limit time.Duration) time.Duration {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := lim.Peek(ctx, "ready")
		cancel()
		if err == nil {
			return time.Since(base)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store's client did not reach the restarted server within %v: %v", limit, err)
		}
	}
}

// atLeast returns how many of sorted durations are d or more.
func atLeast(sorted []time.Duration, d time.Duration) int {
	i, _ := slices.BinarySearch(sorted, d)
	return len(sorted) - i
}

// percentile returns the p-th percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	return sorted[(len(sorted)-1)*p/100]
}
