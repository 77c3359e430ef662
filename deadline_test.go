package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// remoteStore is a store whose tables say they are remote
// (store.Remote): each call waits until the test releases it, records
// the context it was given, and then fails (store.ErrUnavailable) or
// passes on to a memory table.
type remoteStore struct {
	next    store.Store[string]
	mu      sync.Mutex
	refusal error // what its tables' Refused says
	ctxs    []context.Context
	started chan struct{} // receives as each call starts
	release chan error    // each call waits for one value: nil passes it on
	ended   chan struct{} // receives as each call ends
}

var _ store.Remote = (*remoteTable)(nil)

func newRemoteStore() *remoteStore {
	return &remoteStore{next: memorystore.New[string](), started: make(chan struct{}, 100),
		release: make(chan error, 100), ended: make(chan struct{}, 100)}
}

func (s *remoteStore) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.next.Open(limits, clk)
	if err != nil {
		return nil, err
	}
	return &remoteTable{next: t, s: s}, nil
}

type remoteTable struct {
	next store.Table[string]
	s    *remoteStore
}

func (t *remoteTable) CallTimeout() time.Duration { return time.Minute }

func (t *remoteTable) Refused() error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return t.s.refusal
}

// lastCtx returns the context the latest call was given.
func (s *remoteStore) lastCtx() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctxs[len(s.ctxs)-1]
}

func (t *remoteTable) wait(ctx context.Context) error {
	t.s.mu.Lock()
	t.s.ctxs = append(t.s.ctxs, ctx)
	t.s.mu.Unlock()
	t.s.started <- struct{}{}
	return <-t.s.release
}

func (t *remoteTable) Take(ctx context.Context, key string, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	defer func() { t.s.ended <- struct{}{} }()
	if err := t.wait(ctx); err != nil {
		return algorithm.Result{}, err
	}
	return t.next.Take(ctx, key, now, cost, out)
}

func (t *remoteTable) Peek(ctx context.Context, key string, now int64, out []algorithm.Result) (algorithm.Result, error) {
	defer func() { t.s.ended <- struct{}{} }()
	if err := t.wait(ctx); err != nil {
		return algorithm.Result{}, err
	}
	return t.next.Peek(ctx, key, now, out)
}

func (t *remoteTable) Reset(ctx context.Context, key string) error {
	defer func() { t.s.ended <- struct{}{} }()
	if err := t.wait(ctx); err != nil {
		return err
	}
	return t.next.Reset(ctx, key)
}

func receive(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing after 10 s", what)
	}
}

// TestRemoteCallerDeadline: a caller's deadline never reaches a remote
// table, whose call has the table's own (CallTimeout). A caller whose context ends while its call is in flight returns
// at once with an error matching its context's, not
// ErrStoreUnavailable; the call goes on and charges; no failure policy
// decides and the breaker does not count it. The store's own failure,
// after its caller has left, is what the breaker counts.
func TestRemoteCallerDeadline(t *testing.T) {
	st := newRemoteStore()
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	var handled []error
	lim, err := ratelimit.New(alg, st, ratelimit.WithName("remote"), ratelimit.WithClock(clock.NewFake(time.Unix(1e9, 0))),
		ratelimit.WithFailurePolicy(ratelimit.FailOpen), ratelimit.WithBreaker(ratelimit.Breaker{Failures: 1, ProbeInterval: time.Hour}),
		ratelimit.WithErrorHandler(func(err error) { handled = append(handled, err) }))
	if err != nil {
		t.Fatal(err)
	}

	// A caller whose deadline ends while its call waits on the store.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	type outcome struct {
		d   ratelimit.Decision
		err error
	}
	got := make(chan outcome, 1)
	go func() {
		d, err := lim.Allow(ctx, "k")
		got <- outcome{d, err}
	}()
	receive(t, st.started, "the call")
	var o outcome
	select {
	case o = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("Allow did not return at its caller's deadline")
	}
	if !errors.Is(o.err, context.DeadlineExceeded) || errors.Is(o.err, ratelimit.ErrStoreUnavailable) {
		t.Fatalf("Allow whose deadline ended in flight = %v, %v; want context.DeadlineExceeded, not ErrStoreUnavailable", o.d, o.err)
	}
	st.mu.Lock()
	callCtx := st.ctxs[0]
	st.mu.Unlock()
	if d, ok := callCtx.Deadline(); !ok || time.Until(d) < 50*time.Second {
		t.Fatalf("the store's call had the deadline %v (%v); want the table's own, a minute (CallTimeout), not the caller's", d, ok)
	}
	if callCtx.Err() != nil {
		t.Fatalf("the store's call was cancelled with its caller: %v", callCtx.Err())
	}
	st.release <- nil // the store answers after all: the request is charged
	receive(t, st.ended, "the call's end")

	// The breaker (1 failure) stayed closed, and nothing was handled.
	st.release <- nil
	if d, err := lim.Peek(t.Context(), "k"); err != nil || d.Source() != ratelimit.FromStore || d.Remaining() != 1 {
		t.Fatalf("Peek after the caller left = %v, %v; want the store's, 1 remaining (the call charged)", d, err)
	}
	receive(t, st.started, "the peek")
	receive(t, st.ended, "the peek's end")
	if len(handled) != 0 {
		t.Fatalf("the failure policy decided: %v", handled)
	}

	// A caller whose context had ended is not sent.
	done, cancelDone := context.WithCancel(t.Context())
	cancelDone()
	if _, err := lim.Allow(done, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Allow with an ended context: %v, want context.Canceled", err)
	}
	select {
	case <-st.started:
		t.Fatal("a call whose caller's context had ended was sent")
	default:
	}

	// The store's own failure, after the caller left, opens the breaker.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	go func() {
		d, err := lim.Allow(ctx2, "k")
		got <- outcome{d, err}
	}()
	receive(t, st.started, "the second call")
	o = <-got
	if !errors.Is(o.err, context.DeadlineExceeded) {
		t.Fatalf("second Allow: %v, %v", o.d, o.err)
	}
	st.release <- fmt.Errorf("%w: the server is down", store.ErrUnavailable)
	receive(t, st.ended, "the second call's end")
	// The fake table signals its end before it returns; the breaker counts
	// the failure after that, on the call's goroutine.
	for start := time.Now(); !ratelimit.BreakerIsOpen(lim); time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the store's own failure, after its caller left, did not open the breaker in 10 s")
		}
	}
	d, err := lim.Allow(t.Context(), "k")
	if err != nil || !d.BreakerOpen() || d.Source() != ratelimit.FromFailOpen {
		t.Fatalf("Allow after the store's own failure = %v, %v; want the breaker open and FailOpen's decision", d, err)
	}
}

// TestRemoteCallsBounded: the calls a Limiter has in flight on a remote
// store for callers that can leave are bounded: callers that left at
// once and called again do not pile calls up; a caller waiting for a slot
// leaves when its context ends, its call never made.
func TestRemoteCallsBounded(t *testing.T) {
	st := newRemoteStore()
	st.started = make(chan struct{}, 1000)
	st.ended = make(chan struct{}, 1000)
	st.release = make(chan error, 1000)
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1000, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st, ratelimit.WithName("remote"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		_, err := lim.Allow(ctx, "k")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call %d: %v, want context.DeadlineExceeded", i, err)
		}
	}
	if n := len(st.started); n == 0 || n > 64 {
		t.Fatalf("%d calls in flight on the store after 500 callers left; want at least 1 and at most 64 (the Limiter's bound)", n)
	}
	for range cap(st.release) {
		st.release <- nil
	}
}

// TestRemoteCallerWaits: a caller with no deadline, or one at least half
// the table's CallTimeout away, waits for its call (made on its own
// goroutine): its cancellation in flight does not reach the call, whose
// context has the table's own deadline, or one shared just before the
// caller's, and it gets the store's answer when it comes.
func TestRemoteCallerWaits(t *testing.T) {
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		// the deadline the store's call may have, from now
		least, most time.Duration
	}{
		{"no deadline", func() (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) },
			50 * time.Second, time.Minute},
		{"a deadline beyond CallTimeout", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 2*time.Minute)
		}, 50 * time.Second, time.Minute},
		// At least half CallTimeout away: the call's deadline is shared
		// with calls made about the same time, at most a span (a 64th of
		// CallTimeout) before the caller's, never after it.
		{"a deadline nearer than CallTimeout, half of it away", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 40*time.Second)
		}, 40*time.Second - time.Minute/64 - 5*time.Second, 40 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newRemoteStore()
			alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1e-6})
			if err != nil {
				t.Fatal(err)
			}
			lim, err := ratelimit.New(alg, st, ratelimit.WithName("waits"), ratelimit.WithClock(clock.NewFake(time.Unix(1e9, 0))))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := c.ctx()
			type outcome struct {
				d   ratelimit.Decision
				err error
			}
			got := make(chan outcome, 1)
			go func() {
				d, err := lim.Allow(ctx, "k")
				got <- outcome{d, err}
			}()
			receive(t, st.started, "the call")
			cancel()
			callCtx := st.lastCtx()
			if d, ok := callCtx.Deadline(); !ok || time.Until(d) < c.least || time.Until(d) > c.most {
				t.Errorf("the store's call had the deadline %v (%v) from now; want between %v and %v", time.Until(d), ok, c.least, c.most)
			}
			if want, ok := ctx.Deadline(); ok {
				if d, _ := callCtx.Deadline(); d.After(want) {
					t.Errorf("the store's call had the deadline %v, after its caller's %v", d, want)
				}
			}
			if callCtx.Err() != nil {
				t.Errorf("the store's call was cancelled with its caller: %v", callCtx.Err())
			}
			select {
			case o := <-got:
				t.Fatalf("Allow returned before the store answered: %v, %v", o.d, o.err)
			case <-time.After(20 * time.Millisecond):
			}
			st.release <- nil
			o := <-got
			if o.err != nil || !o.d.Allowed() || o.d.Remaining() != 1 || o.d.Source() != ratelimit.FromStore {
				t.Errorf("Allow cancelled in flight = %v, %v; want the store's answer, allowed with 1 remaining", o.d, o.err)
			}
		})
	}
}

// TestRemoteCallsUncapped: calls whose callers still wait for them have no
// cap but the callers' number: 200 callers with deadlines nearer than
// half CallTimeout (each handed to a worker) all reach the store at once,
// where a Limiter once let 64 in and kept the others waiting.
func TestRemoteCallsUncapped(t *testing.T) {
	const callers = 200
	st := newRemoteStore()
	st.started = make(chan struct{}, callers)
	st.ended = make(chan struct{}, callers)
	st.release = make(chan error, callers)
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: callers, Rate: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st, ratelimit.WithName("uncapped"))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, callers)
	for range callers {
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err := lim.Allow(ctx, "k")
			errs <- err
		}()
	}
	for i := range callers {
		receive(t, st.started, fmt.Sprintf("call %d", i+1))
	}
	for range callers {
		st.release <- nil
	}
	for range callers {
		if err := <-errs; err != nil {
			t.Errorf("Allow: %v", err)
		}
	}
}

// TestRemoteRefused: a caller whose context ends while its call waits on a
// store that says its server refuses connections (store.Refuser) gets an
// error matching ErrStoreUnavailable and its context's error, naming the
// refusal; the failure policy does not decide it (the caller has gone),
// and the breaker counts only the call's own outcome.
func TestRemoteRefused(t *testing.T) {
	st := newRemoteStore()
	st.refusal = fmt.Errorf("%w: dial tcp 127.0.0.1:6379: connect: connection refused", store.ErrUnavailable)
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	var handled []error
	lim, err := ratelimit.New(alg, st, ratelimit.WithName("refused"), ratelimit.WithFailurePolicy(ratelimit.FailOpen),
		ratelimit.WithBreaker(ratelimit.Breaker{Failures: 1, ProbeInterval: time.Hour}),
		ratelimit.WithErrorHandler(func(err error) { handled = append(handled, err) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	d, err := lim.Allow(ctx, "k")
	if !errors.Is(err, ratelimit.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Allow on a store that refuses connections, its context ended in flight = %v, %v; want ErrStoreUnavailable and context.DeadlineExceeded, naming the refusal", d, err)
	}
	if d.Allowed() || len(handled) != 0 {
		t.Errorf("the failure policy decided (%v, handled %v); want no decision: the caller has gone", d, handled)
	}
	receive(t, st.started, "the call")
	st.release <- nil // the server is back: the call succeeds
	receive(t, st.ended, "the call's end")
	st.release <- nil
	if d, err := lim.Peek(t.Context(), "k"); err != nil || d.BreakerOpen() || d.Source() != ratelimit.FromStore {
		t.Errorf("Peek after the call succeeded = %v, %v; want the store's answer, the breaker closed", d, err)
	}
}
