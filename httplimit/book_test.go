package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// WithWait holds a request that fits within maxWait until its turn, on the
// limiter's clock, and answers 429, charging nothing, one that does not.
func TestWithWait(t *testing.T) {
	fake := clock.NewFake(t0)
	// 1 request per 40 ms, bursts of 1.
	lim := newLimiter[string](t, must(tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 25})), fake)
	h := httplimit.New(lim, byHeader, httplimit.WithWait(100*time.Millisecond, 0)).Handler(ok)
	serve := func() <-chan int {
		c := make(chan int, 1)
		go func() {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("X-User", "c")
			h.ServeHTTP(rec, req)
			c <- rec.Code
		}()
		return c
	}
	if c := <-serve(); c != http.StatusOK {
		t.Fatalf("first request: %d", c)
	}
	second := serve()
	fake.BlockUntilTimers(1) // held: due in 40 ms
	third := serve()
	fake.BlockUntilTimers(2) // held: due in 80 ms
	if c := <-serve(); c != http.StatusTooManyRequests {
		t.Fatalf("fourth request (due in 120 ms, past 100 ms): %d, want 429 at once", c)
	}
	fake.Advance(40*time.Millisecond - time.Microsecond)
	select {
	case c := <-second:
		t.Fatalf("second request answered %d before its instant", c)
	default:
	}
	fake.Advance(time.Microsecond)
	if c := <-second; c != http.StatusOK {
		t.Fatalf("second request: %d", c)
	}
	fake.Advance(40 * time.Millisecond)
	if c := <-third; c != http.StatusOK {
		t.Fatalf("third request: %d", c)
	}
	// The refused fourth charged nothing: the next is due 40 ms after the third.
	if d, err := lim.Peek(context.Background(), "c"); err != nil || d.RetryAfter() != 40*time.Millisecond {
		t.Errorf("after the third: %v, %v; want a retry in 40 ms", d, err)
	}
}

// A client that goes away while it waits gives its booking back.
func TestWithWaitClientGone(t *testing.T) {
	alg := must(tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1})) // 1 s apart
	lim, err := ratelimit.New(alg, memorystore.New[string]())
	if err != nil {
		t.Fatal(err)
	}
	h := httplimit.New(lim, byHeader, httplimit.WithWait(5*time.Second, 0)).Handler(ok)
	ctx := context.Background()
	if d, _ := lim.Allow(ctx, "c"); !d.Allowed() {
		t.Fatal("first request denied")
	}
	rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	req := httptest.NewRequestWithContext(rctx, "GET", "/", nil)
	req.Header.Set("X-User", "c")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code == http.StatusOK {
		t.Fatalf("a request whose context ended after 50 ms was served (%d)", rec.Code)
	}
	// Its booking was given back: the next waits what it would have.
	d, err := lim.Peek(ctx, "c")
	if err != nil || d.RetryAfter() > time.Second {
		t.Errorf("after the client left: %v, %v; want a retry within 1 s (booking given back)", d, err)
	}
}

// WithRefund gives back the cost of the requests whose status it names:
// only failed logins count.
func TestWithRefund(t *testing.T) {
	fake := clock.NewFake(t0)
	lim := newLimiter[string](t, must(tokenbucket.New(tokenbucket.Config{Capacity: 3, Rate: 0.001})), fake)
	login := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Password") != "secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Write([]byte("welcome"))
	})
	h := httplimit.New(lim, byHeader, httplimit.WithRefund(func(status int) bool { return status < 400 })).Handler(login)
	try := func(password string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/login", nil)
		req.Header.Set("X-User", "ann")
		req.Header.Set("Password", password)
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range 10 {
		if c := try("secret"); c != http.StatusOK {
			t.Fatalf("successful login %d: %d, want 200 (successes are refunded)", i, c)
		}
	}
	for i, want := range []int{401, 401, 401, 429} {
		if c := try("guess"); c != want {
			t.Errorf("wrong password %d: %d, want %d", i, c, want)
		}
	}
}

// WithWait's bound: past maxWaiting held requests, one that does not fit
// now is answered 429 at once, charged nothing.
func TestWithWaitBounded(t *testing.T) {
	fake := clock.NewFake(t0)
	lim := newLimiter[string](t, must(tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 25})), fake)
	h := httplimit.New(lim, byHeader, httplimit.WithWait(time.Second, 1)).Handler(ok)
	serve := func(user string) <-chan int {
		c := make(chan int, 1)
		go func() {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("X-User", user)
			h.ServeHTTP(rec, req)
			c <- rec.Code
		}()
		return c
	}
	if c := <-serve("a"); c != http.StatusOK {
		t.Fatalf("first: %d", c)
	}
	held := serve("a")
	fake.BlockUntilTimers(1)
	if c := <-serve("a"); c != http.StatusTooManyRequests {
		t.Fatalf("a second held request past the bound of 1: %d, want 429 at once", c)
	}
	if c := <-serve("b"); c != http.StatusOK {
		t.Fatalf("another key that fits now: %d, want 200 (the bound only stops waiting)", c)
	}
	fake.Advance(40 * time.Millisecond)
	if c := <-held; c != http.StatusOK {
		t.Fatalf("held request: %d", c)
	}
	if d, err := lim.Peek(context.Background(), "a"); err != nil || d.RetryAfter() != 40*time.Millisecond {
		t.Errorf("the refused request charged nothing: %v, %v; want a retry in 40 ms", d, err)
	}
}

// downForTakes is a store whose Takes fail (ErrUnavailable) while its
// refunds go through, counted: Redis lost between the decision and the
// refund's call, or a flaky one.
type downForTakes struct {
	failing
	refunds *atomic.Int64
}

func (s downForTakes) Open([]store.Limit, clock.Clock) (store.Table[string], error) { return s, nil }
func (s downForTakes) Book(context.Context, string, int64, int64, int64, []algorithm.Result) (algorithm.Result, store.Booking, bool, error) {
	return algorithm.Result{}, store.Booking{}, false, store.ErrUnavailable
}
func (s downForTakes) Cancel(context.Context, string, int64, store.Booking) error {
	return store.ErrUnavailable
}
func (s downForTakes) Refund(context.Context, string, int64, int64, []algorithm.Result) (algorithm.Result, error) {
	s.refunds.Add(1)
	return algorithm.Result{Remaining: 1}, nil
}
func (s downForTakes) Undo(context.Context, string, int64, store.Booking) (int64, error) {
	s.refunds.Add(1)
	return 1, nil
}

// TestWithRefundOnlyWhatTheStoreCharged: a request the failure policy
// admitted (FailOpen uncharged, FailLocal charged to the process's own
// table) is never refunded to the store, which did not charge it: after
// an outage, refunds would give a spent key back what others spent.
func TestWithRefundOnlyWhatTheStoreCharged(t *testing.T) {
	alg := must(fixedwindow.New(fixedwindow.Config{Limit: 5, Window: time.Minute}))
	for _, policy := range []ratelimit.FailurePolicy{ratelimit.FailOpen, ratelimit.FailLocal} {
		refunds := new(atomic.Int64)
		lim, err := ratelimit.New[string](alg, downForTakes{refunds: refunds}, ratelimit.WithName("down"), ratelimit.WithFailurePolicy(policy))
		if err != nil {
			t.Fatal(err)
		}
		h := httplimit.New(lim, byHeader, httplimit.WithRefund(func(int) bool { return true })).Handler(ok)
		for i := range 3 {
			if w := serve(h, "eve"); w.Code != http.StatusOK {
				t.Fatalf("policy %d request %d: %d, want 200 from the failure policy", policy, i, w.Code)
			}
		}
		if n := refunds.Load(); n != 0 {
			t.Errorf("policy %d: %d refunds reached the store for requests it never charged; want 0", policy, n)
		}
	}
}
