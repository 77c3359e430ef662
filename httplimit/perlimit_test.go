package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// A limit per customer, read from a lookup, through Limiter.With.
func TestLimiterResolverPerCustomer(t *testing.T) {
	fake := clock.NewFake(t0)
	base, err := ratelimit.New(must(fixedwindow.PerMinute(1)), memorystore.New[string](), ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	plans := map[string]algorithm.Algorithm{} // customer → limit, as a database would give
	for customer, n := range map[string]int64{"acme": 3, "initech": 5} {
		plans[customer] = must(fixedwindow.PerMinute(n))
	}
	h := httplimit.NewLimiterResolver(func(r *http.Request) (string, *ratelimit.Limiter[string], error) {
		c := r.Header.Get("X-Customer")
		plan, ok := plans[c]
		if !ok {
			return "", nil, httplimit.Reject(http.StatusUnauthorized, "unknown customer")
		}
		lim, err := base.With(plan)
		return c, lim, err
	}).Handler(ok)
	call := func(customer string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Customer", customer)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for customer, n := range map[string]int{"acme": 3, "initech": 5} {
		for i := range n + 2 {
			w := call(customer)
			if want := map[bool]int{true: 200, false: 429}[i < n]; w.Code != want {
				t.Errorf("%s request %d: %d, want %d", customer, i+1, w.Code, want)
			}
			if got, want := w.Header().Get("RateLimit-Policy"), `"default";q=`+map[string]string{"acme": "3", "initech": "5"}[customer]+`;w=60`; got != want {
				t.Errorf("%s: RateLimit-Policy %q, want %q", customer, got, want)
			}
		}
	}
	if w := call("nobody"); w.Code != 401 {
		t.Errorf("unknown customer: %d, want 401", w.Code)
	}
}

// Headers follow a limit changed on a live limiter.
func TestHeadersFollowSetAlgorithm(t *testing.T) {
	fake := clock.NewFake(t0)
	lim := newLimiter[string](t, must(fixedwindow.New(fixedwindow.Config{Limit: 10, Window: time.Minute})), fake)
	h := httplimit.New(lim, func(*http.Request) (string, error) { return "k", nil }).Handler(ok)
	get := func() string {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		return w.Header().Get("RateLimit-Policy")
	}
	if got := get(); got != `"default";q=10;w=60` {
		t.Fatalf("before: %q", got)
	}
	if err := lim.SetAlgorithm(must(fixedwindow.New(fixedwindow.Config{Limit: 50, Window: time.Hour}))); err != nil {
		t.Fatal(err)
	}
	if got := get(); got != `"default";q=50;w=3600` {
		t.Errorf("after SetAlgorithm: %q", got)
	}

	p := newPolicy(t, fake)
	hp := httplimit.NewPolicy(p, func(*http.Request) (string, error) { return "k", nil }).Handler(ok)
	getp := func() string {
		w := httptest.NewRecorder()
		hp.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		return w.Header().Get("RateLimit-Policy")
	}
	before := getp()
	if err := p.SetLimit(1, must(fixedwindow.New(fixedwindow.Config{Limit: 7, Window: 24 * time.Hour}))); err != nil {
		t.Fatal(err)
	}
	if got, want := getp(), `"second";q=3;w=1, "day";q=7;w=86400`; got != want {
		t.Errorf("after SetLimit: %q, want %q (before %q)", got, want, before)
	}
}
