package echoratelimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/echoratelimit"
)

// TestWithHTTPErrors: with WithHTTPErrors, every request the middleware
// does not admit reaches echo's HTTPErrorHandler as an *echo.HTTPError of
// the middleware's status and detail, with the RateLimit headers and
// Retry-After already on the response; without it, the handler is not
// called (the middleware answers itself), as before.
func TestWithHTTPErrors(t *testing.T) {
	for _, routed := range []bool{true, false} {
		fake := clock.NewFake(t0)
		var opts []echoratelimit.Option
		if routed {
			opts = append(opts, echoratelimit.WithHTTPErrors())
		}
		e := echo.New()
		var handled []*echo.HTTPError
		e.HTTPErrorHandler = func(err error, c echo.Context) {
			var he *echo.HTTPError
			if !errors.As(err, &he) {
				t.Errorf("echo's error handler got %v; want an *echo.HTTPError", err)
				return
			}
			handled = append(handled, he)
			c.JSON(he.Code, map[string]any{"error": he.Message})
		}
		e.Use(echoratelimit.Middleware(newMiddleware(t, fake), opts...))
		e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
		serve := func(key string) *httptest.ResponseRecorder {
			r := httptest.NewRequest("GET", "/", nil)
			if key != "" {
				r.Header.Set("X-API-Key", key)
			}
			w := httptest.NewRecorder()
			e.ServeHTTP(w, r)
			return w
		}
		for i, want := range []int{200, 200, 429} {
			if w := serve("ann"); w.Code != want {
				t.Fatalf("routed %v: request %d: %d, want %d", routed, i, w.Code, want)
			}
		}
		w := serve("ann")
		if w.Code != 429 || w.Header().Get("Retry-After") != "1" || w.Header().Get("RateLimit") == "" {
			t.Errorf("routed %v: a denial answered %d with Retry-After %q, RateLimit %q; want 429, 1 and the header",
				routed, w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"))
		}
		rejected := serve("")
		if rejected.Code != http.StatusUnauthorized {
			t.Errorf("routed %v: a request without a key: %d, want 401", routed, rejected.Code)
		}
		if !routed {
			if len(handled) != 0 {
				t.Errorf("without WithHTTPErrors echo's error handler got %v; want nothing", handled)
			}
			continue
		}
		if len(handled) != 3 || handled[0].Code != 429 || handled[2].Code != 401 ||
			handled[0].Message != `rate limit "second" exceeded; retry in 1 s` {
			t.Errorf("echo's error handler got %+v; want the two 429s and the 401, with the middleware's detail", handled)
		}
		if ct := w.Header().Get("Content-Type"); ct != echo.MIMEApplicationJSON {
			t.Errorf("Content-Type %q; want the error handler's, %q", ct, echo.MIMEApplicationJSON)
		}
	}
}
