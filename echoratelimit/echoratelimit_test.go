package echoratelimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/echoratelimit"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// byAPIKey keys requests by their X-API-Key header and rejects those
// without one.
func byAPIKey(r *http.Request) (string, error) {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return k, nil
	}
	return "", httplimit.Reject(http.StatusUnauthorized, "an X-API-Key header is required")
}

// newPolicy returns a policy of 2 a second ("second") and 3 a day ("day")
// on a memory store of its own.
func newPolicy(t *testing.T, fake *clock.Fake) *ratelimit.Policy[string] {
	t.Helper()
	second, err := fixedwindow.New(fixedwindow.Config{Limit: 2, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	day, err := fixedwindow.New(fixedwindow.Config{Limit: 3, Window: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
		{Name: "second", Algorithm: second}, {Name: "day", Algorithm: day},
	}, ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newMiddleware returns the middleware under test, on a policy of its own.
func newMiddleware(t *testing.T, fake *clock.Fake) *httplimit.Middleware[string] {
	return httplimit.NewPolicy(newPolicy(t, fake), byAPIKey, httplimit.WithLegacyHeaders())
}

// compared are the headers that must be the same as net/http's.
var compared = []string{"RateLimit", "RateLimit-Policy", "Retry-After", "X-RateLimit-Limit",
	"X-RateLimit-Remaining", "X-RateLimit-Reset", "Content-Type", "Cache-Control"}

// TestSameAsNetHTTP serves the same requests through net/http and echo,
// each with a middleware of its own on the same clock: same statuses,
// headers and bodies, the 429s and a rejected request included.
func TestSameAsNetHTTP(t *testing.T) {
	fake := clock.NewFake(t0)
	var seen []httplimit.Named
	std := newMiddleware(t, fake).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", echo.MIMETextPlainCharsetUTF8) // as c.String sets it
		w.Write([]byte("ok"))
	}))
	e := echo.New()
	e.Use(echoratelimit.Middleware(newMiddleware(t, fake)))
	e.GET("/", func(c echo.Context) error {
		seen = httplimit.Decisions(c.Request().Context())
		return c.String(http.StatusOK, "ok")
	})

	for i, s := range []struct {
		advance time.Duration
		key     string
		status  int
		left    int64 // what Decisions says "second" has left, when admitted
	}{
		{0, "alice", 200, 1},
		{0, "alice", 200, 0},
		{0, "alice", 429, 0},
		{0, "bob", 200, 1},
		{0, "", 401, 0},
		{time.Second, "alice", 200, 1}, // the day's third
		{time.Second, "alice", 429, 0}, // the day is spent
	} {
		fake.Advance(s.advance)
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		for _, w := range []*httptest.ResponseRecorder{want, got} {
			r := httptest.NewRequest("GET", "/", nil)
			if s.key != "" {
				r.Header.Set("X-API-Key", s.key)
			}
			if w == want {
				std.ServeHTTP(w, r)
			} else {
				seen = nil
				e.ServeHTTP(w, r)
			}
		}
		if got.Code != s.status || want.Code != s.status {
			t.Errorf("request %d: echo answered %d, net/http %d, want %d", i, got.Code, want.Code, s.status)
		}
		for _, h := range compared {
			if g, w := got.Header().Values(h), want.Header().Values(h); len(g) != len(w) || len(g) > 0 && g[0] != w[0] {
				t.Errorf("request %d: %s got %q, want %q as net/http", i, h, g, w)
			}
		}
		if g, w := got.Body.String(), want.Body.String(); g != w {
			t.Errorf("request %d: body got %q, want %q as net/http", i, g, w)
		}
		if s.status == 200 {
			if len(seen) != 2 || seen[0].Name != "second" || seen[0].Decision.Remaining() != s.left {
				t.Errorf("request %d: the handler saw %+v, want second with %d left first", i, seen, s.left)
			}
		} else if seen != nil {
			t.Errorf("request %d: answered %d, yet the handler ran", i, got.Code)
		}
	}
}

// TestHandlerError: with the middleware in a group, an admitted request's
// handler error still reaches echo's HTTPErrorHandler, and a denied one
// never reaches the handler.
func TestHandlerError(t *testing.T) {
	fake := clock.NewFake(t0)
	e := echo.New()
	calls := 0
	g := e.Group("/api", echoratelimit.Middleware(newMiddleware(t, fake)))
	g.GET("/teapot", func(c echo.Context) error {
		calls++
		return echo.NewHTTPError(http.StatusTeapot, "short and stout")
	})
	for i, want := range []int{http.StatusTeapot, http.StatusTeapot, http.StatusTooManyRequests} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api/teapot", nil)
		r.Header.Set("X-API-Key", "carol")
		e.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("request %d: got %d, want %d", i, w.Code, want)
		}
		if w.Header().Get("RateLimit") == "" {
			t.Errorf("request %d: no RateLimit header", i)
		}
	}
	if calls != 2 {
		t.Errorf("the handler ran %d times, want 2", calls)
	}
}
