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
	"github.com/go-ratelimit/ratelimit/tokenbucket"
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
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 5, Rate: 5.0 / 3600})
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

	var (
		admitted, uncharged, victimAdmitted, cut atomic.Int64
		mu                                       sync.Mutex
		wrong                                    []string
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(wrong) < 5 {
			wrong = append(wrong, fmt.Sprintf(format, args...))
		}
	}
	const attackers = 4
	var wg sync.WaitGroup
	for a := range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range stormCalls / attackers {
				key := "victim"
				if i%2 == 1 {
					key = fmt.Sprintf("fresh-%d-%d", a, i)
				}
				cctx, cancel := context.WithTimeout(ctx, time.Microsecond)
				d, err := lim.Allow(cctx, key)
				cancel()
				switch {
				case err != nil:
					cut.Add(1)
					if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ratelimit.ErrStoreUnavailable) {
						report("Allow(%s) with a 1µs deadline: %v; want context.DeadlineExceeded, not ErrStoreUnavailable", key, err)
					}
				case d.Allowed():
					admitted.Add(1)
					if d.Source() != ratelimit.FromStore {
						uncharged.Add(1)
					}
					if key == "victim" {
						victimAdmitted.Add(1)
					}
				}
			}
		}()
	}
	// A well-behaved caller, deciding on a key of its own with a
	// generous deadline while the storm goes on.
	stop := make(chan struct{})
	var politeCalls atomic.Int64
	politeDone := make(chan struct{})
	go func() {
		defer close(politeDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Generous: miniredis parses every script anew, and under the
			// race detector on a loaded 2-core CI machine the storm's
			// queue ahead of this call once took it past 5 s.
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			d, err := lim.Peek(cctx, "polite")
			cancel()
			politeCalls.Add(1)
			if err != nil || d.Source() != ratelimit.FromStore {
				report("the well-behaved caller's Peek during the storm: %+v, %v; want the store's answer", d, err)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-politeDone

	for _, w := range wrong {
		t.Error(w)
	}
	if n := uncharged.Load(); n != 0 {
		t.Errorf("%d of %d admissions came from the failure policy, uncharged; want 0", n, admitted.Load())
	}
	if n := victimAdmitted.Load(); n != 0 {
		t.Errorf("the spent victim was admitted %d times during the storm; want 0", n)
	}
	d, err := lim.Allow(ctx, "after")
	if err != nil || d.BreakerOpen() || d.Source() != ratelimit.FromStore || !d.Allowed() {
		t.Errorf("Allow after the storm = %+v, %v; want the store's admission with the breaker closed", d, err)
	}
	t.Logf("%d calls with a 1µs deadline: %d cut short, %d admitted by the store; %d calls of a well-behaved caller meanwhile",
		stormCalls, cut.Load(), admitted.Load(), politeCalls.Load())
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
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: shortLimit, Rate: shortLimit / 3600.0})
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
	var (
		attackAdmitted, honestAdmitted, uncharged, breakerOpen, cut, honestCalls atomic.Int64
		mu                                                                       sync.Mutex
		wrong                                                                    []string
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(wrong) < 5 {
			wrong = append(wrong, fmt.Sprintf(format, args...))
		}
	}
	check := func(d ratelimit.Decision) {
		if d.Allowed() && d.Source() != ratelimit.FromStore {
			uncharged.Add(1)
		}
		if d.BreakerOpen() {
			breakerOpen.Add(1)
		}
	}
	end := time.Now().Add(shortFor)
	var wg sync.WaitGroup
	for a := range shortAttackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				deadline := time.Duration(20+(a*37+i*101)%281) * time.Microsecond
				cctx, cancel := context.WithTimeout(ctx, deadline)
				d, err := lim.Allow(cctx, "attacker")
				cancel()
				if err != nil {
					cut.Add(1)
					if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ratelimit.ErrStoreUnavailable) {
						report("attacker's Allow with a %v deadline: %v; want context.DeadlineExceeded, not ErrStoreUnavailable", deadline, err)
					}
					continue
				}
				check(d)
				if d.Allowed() {
					attackAdmitted.Add(1)
				}
			}
		}()
	}
	for h := range shortHonest {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("honest-%d", h)
			for time.Now().Before(end) {
				d, err := lim.Allow(ctx, key)
				honestCalls.Add(1)
				if err != nil {
					report("honest Allow(%s): %v; want the store's decision", key, err)
					continue
				}
				check(d)
				if d.Allowed() {
					honestAdmitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for _, w := range wrong {
		t.Error(w)
	}
	if n := attackAdmitted.Load(); n > shortLimit {
		t.Errorf("the attackers' key was admitted %d times; want at most its limit, %d", n, shortLimit)
	}
	if n := honestAdmitted.Load(); n > shortHonest*shortLimit {
		t.Errorf("the honest keys were admitted %d times; want at most %d", n, shortHonest*shortLimit)
	}
	if n := uncharged.Load(); n != 0 {
		t.Errorf("%d admissions came from the failure policy, uncharged; want 0", n)
	}
	if n := breakerOpen.Load(); n != 0 {
		t.Errorf("%d decisions found the breaker open; want 0", n)
	}
	if n := handled.Load(); n != 0 {
		t.Errorf("the failure policy decided %d times; want 0", n)
	}
	t.Logf("%v: attackers cut short %d times, admitted %d; honest callers made %d calls, admitted %d",
		shortFor, cut.Load(), attackAdmitted.Load(), honestCalls.Load(), honestAdmitted.Load())
}
