package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// breakerLimiter returns a limiter with policy and a breaker of 3 failures
// and a probe every second, on a faultStore over a memory store, with a
// fake clock at t0. Its token bucket holds 5 and refills one per hour.
func breakerLimiter(t *testing.T, policy ratelimit.FailurePolicy, opts ...ratelimit.Option) (*ratelimit.Limiter[string], *faultStore, *clock.Fake) {
	t.Helper()
	fake := clock.NewFake(t0)
	st := &faultStore{next: memorystore.New[string](), clk: fake}
	opts = append([]ratelimit.Option{
		ratelimit.WithClock(fake),
		ratelimit.WithFailurePolicy(policy),
		ratelimit.WithBreaker(ratelimit.Breaker{Failures: 3, ProbeInterval: time.Second}),
	}, opts...)
	lim, err := ratelimit.New(mustBucket(t, tokenbucket.Config{Capacity: 5, Rate: 1.0 / 3600}), st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim, st, fake
}

// allowCounting calls Allow(key) and returns the decision and how many
// calls reached the store.
func allowCounting(t *testing.T, lim *ratelimit.Limiter[string], st *faultStore, key string) (ratelimit.Decision, int64) {
	t.Helper()
	before := st.calls.Load()
	d, err := lim.Allow(context.Background(), key)
	if err != nil {
		t.Fatalf("Allow(%s): %v", key, err)
	}
	return d, st.calls.Load() - before
}

func TestBreakerOpensProbesAndCloses(t *testing.T) {
	var handled []error
	lim, st, fake := breakerLimiter(t, ratelimit.FailOpen, ratelimit.WithErrorHandler(func(err error) { handled = append(handled, err) }))
	if d, n := allowCounting(t, lim, st, "k"); d.Source() != ratelimit.FromStore || d.BreakerOpen() || n != 1 {
		t.Fatalf("Allow with the store up = %+v after %d store calls; want the store's decision after 1", d, n)
	}

	st.down.Store(true)
	failOpen := ratelimit.DecisionFields{Allowed: true, Limit: 5, Remaining: 5, Source: ratelimit.FromFailOpen}.Decision()
	for i := range 3 {
		if d, n := allowCounting(t, lim, st, "k"); d != failOpen || n != 1 {
			t.Fatalf("failure %d: Allow = %+v after %d store calls; want %+v after 1 (the breaker is still closed)", i+1, d, n, failOpen)
		}
	}
	f := failOpen.Fields()
	f.BreakerOpen = true
	open := f.Decision()
	for i := range 10 {
		if d, n := allowCounting(t, lim, st, "k"); d != open || n != 0 {
			t.Fatalf("call %d after 3 failures: Allow = %+v after %d store calls; want %+v without asking the store", i, d, n, open)
		}
	}
	if d, err := lim.Peek(context.Background(), "k"); err != nil || d != open {
		t.Fatalf("Peek with the breaker open = %+v, %v; want %+v", d, err, open)
	}
	if n := len(handled); n != 14 || !errors.Is(handled[13], ratelimit.ErrBreakerOpen) || errors.Is(handled[0], ratelimit.ErrBreakerOpen) {
		t.Fatalf("the error handler saw %d errors, last %v; want 14: 3 of the store's, then ErrBreakerOpen", n, handled[n-1])
	}

	// The first probe goes one interval after the breaker opened, and
	// fails: the next goes one interval later.
	fake.Advance(time.Second - time.Microsecond)
	if d, n := allowCounting(t, lim, st, "k"); !d.BreakerOpen() || n != 0 {
		t.Fatalf("1µs before the probe: Allow = %+v after %d store calls; want the breaker open", d, n)
	}
	fake.Advance(time.Microsecond)
	if d, n := allowCounting(t, lim, st, "k"); d != failOpen || n != 1 {
		t.Fatalf("the probe: Allow = %+v after %d store calls; want %+v after 1 (the store failed)", d, n, failOpen)
	}
	if d, n := allowCounting(t, lim, st, "k"); d != open || n != 0 {
		t.Fatalf("after a failed probe: Allow = %+v after %d store calls; want %+v", d, n, open)
	}

	// The store is back; the next probe closes the breaker.
	st.down.Store(false)
	fake.Advance(999 * time.Millisecond)
	if d, n := allowCounting(t, lim, st, "k"); d != open || n != 0 {
		t.Fatalf("999ms after the failed probe: Allow = %+v after %d store calls; want %+v", d, n, open)
	}
	fake.Advance(time.Millisecond)
	want := ratelimit.DecisionFields{Allowed: true, Limit: 5, Remaining: 3, ResetAfter: 2 * time.Hour}.Decision()
	if d, n := allowCounting(t, lim, st, "k"); n != 1 || d.Source() != ratelimit.FromStore || d.BreakerOpen() || d.Remaining() != want.Remaining() {
		t.Fatalf("the second probe, on a store that is back: Allow = %+v after %d store calls; want %+v after 1", d, n, want)
	}
	for i := range 3 {
		if d, n := allowCounting(t, lim, st, "j"); d.Source() != ratelimit.FromStore || n != 1 {
			t.Fatalf("call %d after the breaker closed: Allow = %+v after %d store calls; want the store's decision", i, d, n)
		}
	}
}

func TestBreakerCountsFailuresInARow(t *testing.T) {
	lim, st, _ := breakerLimiter(t, ratelimit.FailOpen)
	for round := range 3 {
		st.down.Store(true)
		for range 2 {
			allowCounting(t, lim, st, "k")
		}
		st.down.Store(false)
		if d, n := allowCounting(t, lim, st, "k"); d.Source() != ratelimit.FromStore || n != 1 {
			t.Fatalf("round %d: Allow after 2 failures = %+v after %d store calls; want the store's decision (the breaker needs 3 in a row)", round, d, n)
		}
	}
}

func TestBreakerIgnoresCancelledCallsAndForeignErrors(t *testing.T) {
	lim, st, _ := breakerLimiter(t, ratelimit.FailOpen)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	st.foreign.Store(true)
	for range 5 {
		if _, err := lim.Allow(cancelled, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Allow with a cancelled context: %v, want context.Canceled", err)
		}
		if _, err := lim.Allow(context.Background(), "k"); !errors.Is(err, errForeign) {
			t.Fatalf("Allow with a foreign failure: %v, want it returned", err)
		}
	}
	st.foreign.Store(false)
	if d, n := allowCounting(t, lim, st, "k"); d.Source() != ratelimit.FromStore || n != 1 {
		t.Fatalf("Allow after cancelled calls and foreign errors = %+v after %d store calls; want the store's decision", d, n)
	}

}

// TestStateMismatchIsReturned checks that a key holding another
// algorithm's state fails the call with ErrStateMismatch under FailOpen:
// no failure policy decides it, and the breaker does not count it however
// often it comes.
func TestStateMismatchIsReturned(t *testing.T) {
	var handled int
	lim, st, _ := breakerLimiter(t, ratelimit.FailOpen, ratelimit.WithErrorHandler(func(error) { handled++ }))
	st.mismatch.Store(true)
	for i := range 20 {
		before := st.calls.Load()
		d, err := lim.Allow(context.Background(), "k")
		if !errors.Is(err, ratelimit.ErrStateMismatch) || errors.Is(err, ratelimit.ErrStoreUnavailable) || errors.Is(err, ratelimit.ErrStoreFull) {
			t.Fatalf("call %d: Allow = %+v, %v; want an error wrapping ErrStateMismatch alone", i, d, err)
		}
		if d.Allowed() || d.Source() == ratelimit.FromFailOpen || d.BreakerOpen() {
			t.Fatalf("call %d: Allow decided %+v on a mismatch; want no decision", i, d)
		}
		if n := st.calls.Load() - before; n != 1 {
			t.Fatalf("call %d: %d store calls, want 1 (the breaker stays closed)", i, n)
		}
		if _, err := lim.Peek(context.Background(), "k"); !errors.Is(err, ratelimit.ErrStateMismatch) {
			t.Fatalf("call %d: Peek: %v, want ErrStateMismatch", i, err)
		}
	}
	st.mismatch.Store(false)
	if d, n := allowCounting(t, lim, st, "k"); d.Source() != ratelimit.FromStore || !d.Allowed() || n != 1 {
		t.Fatalf("Allow after 40 mismatches = %+v after %d store calls; want the store's admission", d, n)
	}
	if handled != 0 {
		t.Errorf("the error handler saw %d errors; want none (the errors were returned)", handled)
	}
}

// pastDeadline is a context whose deadline has passed while its Err is
// still nil: a context.WithDeadline whose timer has yet to run, as a
// client library that checks deadlines itself sees it.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Microsecond), true }

// TestBreakerIgnoresCallersDeadlines: a client choosing a deadline no
// store could meet cannot open the breaker (and switch a FailOpen limiter
// off), whatever error the store reports; calls that waited SlowCall or
// more for the store before their deadline ended them count.
func TestBreakerIgnoresCallersDeadlines(t *testing.T) {
	lim, st, _ := breakerLimiter(t, ratelimit.FailOpen)
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	// The store reports the deadline as its own failure, as go-redis and
	// rueidis do (a timeout, a dial error).
	st.down.Store(true)
	for range 10 {
		for name, ctx := range map[string]context.Context{"expired": expired, "past its deadline, timer not run": pastDeadline{context.Background()}} {
			d, err := lim.Allow(ctx, "k")
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ratelimit.ErrStoreUnavailable) {
				t.Fatalf("Allow, %s, store down %v: %v, %v; want context.DeadlineExceeded and not ErrStoreUnavailable (no failure policy decides)", name, st.down.Load(), d, err)
			}
		}
	}
	st.down.Store(false)
	if d, n := allowCounting(t, lim, st, "k"); d.Source() != ratelimit.FromStore || n != 1 {
		t.Fatalf("Allow after 20 calls cut short by the callers' deadlines = %+v after %d store calls; want the store's decision (the breaker closed)", d, n)
	}

	// A deadline SlowCall after the call began, less a little, is still
	// the caller's; SlowCall and more is the store's. (The store lags for
	// that long on the fake clock; the deadline is a µs before the call's
	// end.)
	st.down.Store(true)
	st.lag.Store(int64(ratelimit.DefaultSlowCall - time.Millisecond))
	for range 5 {
		lim.Allow(pastDeadline{context.Background()}, "k")
	}
	st.lag.Store(0)
	st.down.Store(false)
	if d, n := allowCounting(t, lim, st, "k"); d.BreakerOpen() || n != 1 {
		t.Fatalf("Allow after 5 calls that waited %v = %+v after %d store calls; want the breaker closed", ratelimit.DefaultSlowCall-time.Millisecond, d, n)
	}
	st.down.Store(true)
	st.lag.Store(int64(ratelimit.DefaultSlowCall + time.Millisecond))
	for range 3 {
		if _, err := lim.Allow(pastDeadline{context.Background()}, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Allow that waited SlowCall, past its deadline: %v, want context.DeadlineExceeded", err)
		}
	}
	st.lag.Store(0)
	st.down.Store(false)
	if d, n := allowCounting(t, lim, st, "k"); !d.BreakerOpen() || n != 0 {
		t.Fatalf("Allow after 3 calls that waited SlowCall for the store = %+v after %d store calls; want the breaker open", d, n)
	}
}

func TestBreakerPolicies(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T, policy ratelimit.FailurePolicy) (*ratelimit.Limiter[string], *faultStore) {
		lim, st, _ := breakerLimiter(t, policy)
		st.down.Store(true)
		for range 3 {
			lim.Allow(ctx, "warm")
		}
		return lim, st
	}
	t.Run("FailWithError", func(t *testing.T) {
		lim, st := open(t, ratelimit.FailWithError)
		calls := st.calls.Load()
		d, err := lim.Allow(ctx, "k")
		if !errors.Is(err, ratelimit.ErrBreakerOpen) || !errors.Is(err, ratelimit.ErrStoreUnavailable) || d != (ratelimit.Decision{}) {
			t.Errorf("Allow = %+v, %v; want a zero Decision and ErrBreakerOpen, which matches ErrStoreUnavailable", d, err)
		}
		if _, err := lim.Peek(ctx, "k"); !errors.Is(err, ratelimit.ErrBreakerOpen) {
			t.Errorf("Peek: %v, want ErrBreakerOpen", err)
		}
		if err := lim.Reset(ctx, "k"); !errors.Is(err, ratelimit.ErrBreakerOpen) {
			t.Errorf("Reset: %v, want ErrBreakerOpen", err)
		}
		if n := st.calls.Load() - calls; n != 0 {
			t.Errorf("%d calls reached the store while the breaker was open", n)
		}
	})
	t.Run("FailClosed", func(t *testing.T) {
		lim, _ := open(t, ratelimit.FailClosed)
		want := ratelimit.DecisionFields{Limit: 5, RetryAfter: time.Second, Source: ratelimit.FromFailClosed, BreakerOpen: true}.Decision()
		if d, err := lim.Allow(ctx, "k"); err != nil || d != want {
			t.Errorf("Allow = %+v, %v; want %+v", d, err, want)
		}
	})
	t.Run("FailLocal", func(t *testing.T) {
		lim, _ := open(t, ratelimit.FailLocal)
		for i, remaining := range []int64{4, 3, 2, 1, 0} {
			d, err := lim.Allow(ctx, "k")
			if err != nil || d.Source() != ratelimit.FromLocal || !d.BreakerOpen() || !d.Allowed() || d.Remaining() != remaining {
				t.Fatalf("Allow #%d = %+v, %v; want allowed by the local limiter with Remaining %d, breaker open", i, d, err, remaining)
			}
		}
		if d, err := lim.Allow(ctx, "k"); err != nil || d.Source() != ratelimit.FromLocal || d.Allowed() {
			t.Errorf("Allow #5 = %+v, %v; want denied by the local limiter", d, err)
		}
	})
}

// TestBreakerOneProbeAtATime checks that of many callers arriving once the
// probe is due, exactly one reaches the store.
func TestBreakerOneProbeAtATime(t *testing.T) {
	lim, st, fake := breakerLimiter(t, ratelimit.FailOpen)
	st.down.Store(true)
	for range 3 {
		allowCounting(t, lim, st, "k")
	}
	fake.Advance(time.Second)
	calls := st.calls.Load()
	var wg sync.WaitGroup
	var open atomic.Int64
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				d, err := lim.Allow(context.Background(), "k")
				if err != nil {
					t.Error(err)
					return
				}
				if d.BreakerOpen() {
					open.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := st.calls.Load() - calls; n != 1 || open.Load() != 639 {
		t.Errorf("640 calls once the probe was due: %d reached the store and %d were answered with the breaker open; want 1 and 639", n, open.Load())
	}
}

func TestBreakerInvalidConfig(t *testing.T) {
	alg := mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1})
	for _, b := range []ratelimit.Breaker{
		{Failures: -1},
		{ProbeInterval: -time.Second},
		{Failures: 1, ProbeInterval: 10 * 365 * 24 * time.Hour},
	} {
		if _, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithBreaker(b)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("New(WithBreaker(%+v)): %v, want ErrInvalidConfig", b, err)
		}
	}
	// Zero fields take the defaults: the breaker opens after
	// DefaultBreakerFailures and probes after DefaultProbeInterval.
	st := &faultStore{next: memorystore.New[string]()}
	fake := clock.NewFake(t0)
	lim, err := ratelimit.New(alg, st, ratelimit.WithClock(fake), ratelimit.WithFailurePolicy(ratelimit.FailOpen), ratelimit.WithBreaker(ratelimit.Breaker{}))
	if err != nil {
		t.Fatal(err)
	}
	st.down.Store(true)
	for i := range ratelimit.DefaultBreakerFailures {
		if d, n := allowCounting(t, lim, st, "k"); d.BreakerOpen() || n != 1 {
			t.Fatalf("failure %d: %+v after %d store calls; want the store asked", i+1, d, n)
		}
	}
	if d, n := allowCounting(t, lim, st, "k"); !d.BreakerOpen() || n != 0 {
		t.Fatalf("after %d failures: %+v after %d store calls; want the breaker open", ratelimit.DefaultBreakerFailures, d, n)
	}
	fake.Advance(ratelimit.DefaultProbeInterval)
	if _, n := allowCounting(t, lim, st, "k"); n != 1 {
		t.Fatalf("DefaultProbeInterval later: %d store calls, want 1 probe", n)
	}
}
