package echoratelimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/labstack/echo/v4"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/echoratelimit"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// Denials answered by echo's own error handler, as JSON here, with the
// RateLimit headers and Retry-After already set; the message is the
// middleware's detail (rate limit "…" exceeded; retry in 1 s).
func ExampleWithHTTPErrors() {
	alg, err := tokenbucket.PerSecond(1, tokenbucket.Burst(1))
	if err != nil {
		panic(err)
	}
	lim, err := ratelimit.New(alg, memorystore.New[string]())
	if err != nil {
		panic(err)
	}
	byIP := func(r *http.Request) (string, error) { return r.RemoteAddr, nil }

	e := echo.New()
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			c.JSON(he.Code, map[string]any{"error": he.Message})
		}
	}
	e.Use(echoratelimit.Middleware(httplimit.New(lim, byIP), echoratelimit.WithHTTPErrors()))
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "hello") })

	for range 2 {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Printf("%d, Retry-After %q, %s\n", rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("Content-Type"))
	}
	// Output:
	// 200, Retry-After "", text/plain; charset=UTF-8
	// 429, Retry-After "1", application/json
}
