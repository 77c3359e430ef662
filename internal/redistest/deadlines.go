package redistest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store"
)

// stormCalls is how many calls with a deadline no store can meet the
// deadline-storm test makes per failure policy.
const stormCalls = 10_000

// testDeadlineStorm plays a client that sets its own deadlines (a gRPC
// client does) to 1µs, against a healthy server, under every failure
// policy and with a circuit breaker: stormCalls such calls, from several
// goroutines, on a victim whose quota is spent and on a fresh key, while a
// well-behaved caller keeps deciding on a key of its own. The storm must
// leave the breaker closed, admit nothing that was not charged (every
// admission comes from the store, and the spent victim gets none), fail
// every cut-short call with context.DeadlineExceeded and never with
// ErrStoreUnavailable, and cost the well-behaved caller no error.
func testDeadlineStorm(t *testing.T, newStore NewStore) {
	Each(t, func(t *testing.T, target Target) {
		t.Parallel()
		for name, policy := range map[string]ratelimit.FailurePolicy{"FailWithError": ratelimit.FailWithError,
			"FailOpen": ratelimit.FailOpen, "FailClosed": ratelimit.FailClosed, "FailLocal": ratelimit.FailLocal} {
			t.Run(name, func(t *testing.T) { deadlineStorm(t, newStore(t, target, Prefix(t)), policy) })
		}
	})
}

func deadlineStorm(t *testing.T, st store.Store[string], policy ratelimit.FailurePolicy) {
	ctx := t.Context()
	alg, err := bucketPer(5, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	lim := newLimiter(t, alg, st, ratelimit.WithFailurePolicy(policy), ratelimit.WithBreaker(ratelimit.Breaker{}),
		ratelimit.WithErrorHandler(func(err error) {
			if handled.Add(1) <= 3 {
				t.Logf("the failure policy decided after: %v", err)
			}
		}))
	for i := range 5 {
		if d, err := lim.Allow(ctx, "victim"); err != nil || !d.Allowed() {
			t.Fatalf("spending the victim, call %d: %+v, %v", i+1, d, err)
		}
	}

	var s storm
	const attackers = 4
	var wg sync.WaitGroup
	for a := range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.attack(ctx, lim, a, stormCalls/attackers)
		}()
	}
	stopPolite := s.polite(ctx, lim)
	wg.Wait()
	politeCalls := stopPolite()

	for _, w := range s.wrong {
		t.Error(w)
	}
	if n := s.uncharged.Load(); n != 0 {
		t.Errorf("%d of %d admissions came from the failure policy, uncharged; want 0", n, s.admitted.Load())
	}
	if n := s.victimAdmitted.Load(); n != 0 {
		t.Errorf("the spent victim was admitted %d times during the storm; want 0", n)
	}
	d, err := lim.Allow(ctx, "after")
	if err != nil || d.BreakerOpen() || d.Source() != ratelimit.FromStore || !d.Allowed() {
		t.Errorf("Allow after the storm = %+v, %v; want the store's admission with the breaker closed", d, err)
	}
	t.Logf("%d calls with a 1µs deadline: %d cut short, %d admitted by the store; %d calls of a well-behaved caller meanwhile",
		stormCalls, s.cut.Load(), s.admitted.Load(), politeCalls)
}

// wrongCalls keeps the first few calls that went wrong, from several
// goroutines.
type wrongCalls struct {
	mu    sync.Mutex
	wrong []string
}

// report keeps a call that went wrong, up to 5.
func (w *wrongCalls) report(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.wrong) < 5 {
		w.wrong = append(w.wrong, fmt.Sprintf(format, args...))
	}
}

// storm counts what the deadline storm's calls got.
type storm struct {
	wrongCalls
	admitted, uncharged, victimAdmitted, cut atomic.Int64
}

// attack is attacker a's calls with a 1µs deadline, n of them, on the
// victim and on fresh keys in turn.
func (s *storm) attack(ctx context.Context, lim *ratelimit.Limiter[string], a, n int) {
	for i := range n {
		key := "victim"
		if i%2 == 1 {
			key = fmt.Sprintf("fresh-%d-%d", a, i)
		}
		cctx, cancel := context.WithTimeout(ctx, time.Microsecond)
		d, err := lim.Allow(cctx, key)
		cancel()
		switch {
		case err != nil:
			s.cut.Add(1)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ratelimit.ErrStoreUnavailable) {
				s.report("Allow(%s) with a 1µs deadline: %v; want context.DeadlineExceeded, not ErrStoreUnavailable", key, err)
			}
		case d.Allowed():
			s.admitted.Add(1)
			if d.Source() != ratelimit.FromStore {
				s.uncharged.Add(1)
			}
			if key == "victim" {
				s.victimAdmitted.Add(1)
			}
		}
	}
}

// polite starts a well-behaved caller, deciding on a key of its own with
// a generous deadline while the storm goes on; the function it returns
// stops it and returns how many calls it made.
func (s *storm) polite(ctx context.Context, lim *ratelimit.Limiter[string]) (stop func() int64) {
	done := make(chan struct{})
	var calls atomic.Int64
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			default:
			}
			// Generous: miniredis parses every script anew, and under the
			// race detector on a loaded 2-core CI machine the storm's
			// queue ahead of this call once took it past 5 s.
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			d, err := lim.Peek(cctx, "polite")
			cancel()
			calls.Add(1)
			if err != nil || d.Source() != ratelimit.FromStore {
				s.report("the well-behaved caller's Peek during the storm: %+v, %v; want the store's answer", d, err)
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return calls.Load()
	}
}

// Parameters of the short-deadline test (testShortDeadlines).
const (
	shortAttackers = 32
	shortHonest    = 8
	shortLimit     = 5
	shortFor       = 3 * time.Second
)

// testShortDeadlines plays clients that choose their own deadlines (a gRPC
// client does), each short enough to end while its call is in flight,
// 20 to 300 µs, on a key of their own, beside honest callers without a
// deadline, for shortFor, under FailOpen and a circuit breaker: with
// coalescing on and off. A caller's deadline must never reach the client
// library (a rueidis dial made under one caller's short deadline failed
// for every caller waiting on that connection, so a healthy server looked
// down, the breaker opened and FailOpen admitted everyone uncharged). So:
// the attackers' key is admitted at most its limit, nothing is admitted
// uncharged, the breaker never opens, the failure policy never decides,
// and the honest callers get no error and no more than their limits.
func testShortDeadlines(t *testing.T, newStore NewStore) {
	Each(t, func(t *testing.T, target Target) {
		for _, coalesce := range []bool{true, false} {
			t.Run(fmt.Sprintf("coalescing=%v", coalesce), func(t *testing.T) {
				target := target
				target.NoCoalescing = !coalesce
				shortDeadlines(t, newStore(t, target, Prefix(t)))
			})
		}
	})
}

func shortDeadlines(t *testing.T, st store.Store[string]) {
	ctx := t.Context()
	alg, err := bucketPer(shortLimit, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	lim := newLimiter(t, alg, st, ratelimit.WithFailurePolicy(ratelimit.FailOpen),
		ratelimit.WithBreaker(ratelimit.Breaker{Failures: 5, ProbeInterval: time.Second}),
		ratelimit.WithErrorHandler(func(err error) {
			if n := handled.Add(1); n <= 3 || !errors.Is(err, ratelimit.ErrBreakerOpen) && n <= 10 {
				t.Logf("the failure policy decided after: %v", err)
			}
		}))
	s := shortRun{lim: lim, end: time.Now().Add(shortFor)}
	var wg sync.WaitGroup
	for a := range shortAttackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.attacker(ctx, a)
		}()
	}
	for h := range shortHonest {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.honest(ctx, h)
		}()
	}
	wg.Wait()
	for _, w := range s.wrong {
		t.Error(w)
	}
	if n := s.attackAdmitted.Load(); n > shortLimit {
		t.Errorf("the attackers' key was admitted %d times; want at most its limit, %d", n, shortLimit)
	}
	if n := s.honestAdmitted.Load(); n > shortHonest*shortLimit {
		t.Errorf("the honest keys were admitted %d times; want at most %d", n, shortHonest*shortLimit)
	}
	if n := s.uncharged.Load(); n != 0 {
		t.Errorf("%d admissions came from the failure policy, uncharged; want 0", n)
	}
	if n := s.breakerOpen.Load(); n != 0 {
		t.Errorf("%d decisions found the breaker open; want 0", n)
	}
	if n := handled.Load(); n != 0 {
		t.Errorf("the failure policy decided %d times; want 0", n)
	}
	t.Logf("%v: attackers cut short %d times, admitted %d; honest callers made %d calls, admitted %d",
		shortFor, s.cut.Load(), s.attackAdmitted.Load(), s.honestCalls.Load(), s.honestAdmitted.Load())
}

// shortRun is the short-deadlines test's callers of lim until end, and
// what they got.
type shortRun struct {
	wrongCalls
	lim                                                                      *ratelimit.Limiter[string]
	end                                                                      time.Time
	attackAdmitted, honestAdmitted, uncharged, breakerOpen, cut, honestCalls atomic.Int64
}

// check counts a decision admitted uncharged, or made with the breaker
// open.
func (s *shortRun) check(d ratelimit.Decision) {
	if d.Allowed() && d.Source() != ratelimit.FromStore {
		s.uncharged.Add(1)
	}
	if d.BreakerOpen() {
		s.breakerOpen.Add(1)
	}
}

// attacker is attacker a's calls on its key, each with a deadline of 20
// to 300 µs.
func (s *shortRun) attacker(ctx context.Context, a int) {
	for i := 0; time.Now().Before(s.end); i++ {
		deadline := time.Duration(20+(a*37+i*101)%281) * time.Microsecond
		cctx, cancel := context.WithTimeout(ctx, deadline)
		d, err := s.lim.Allow(cctx, "attacker")
		cancel()
		if err != nil {
			s.cut.Add(1)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ratelimit.ErrStoreUnavailable) {
				s.report("attacker's Allow with a %v deadline: %v; want context.DeadlineExceeded, not ErrStoreUnavailable", deadline, err)
			}
			continue
		}
		s.check(d)
		if d.Allowed() {
			s.attackAdmitted.Add(1)
		}
	}
}

// honest is honest caller h's calls on a key of its own, without a
// deadline.
func (s *shortRun) honest(ctx context.Context, h int) {
	key := fmt.Sprintf("honest-%d", h)
	for time.Now().Before(s.end) {
		d, err := s.lim.Allow(ctx, key)
		s.honestCalls.Add(1)
		if err != nil {
			s.report("honest Allow(%s): %v; want the store's decision", key, err)
			continue
		}
		s.check(d)
		if d.Allowed() {
			s.honestAdmitted.Add(1)
		}
	}
}
