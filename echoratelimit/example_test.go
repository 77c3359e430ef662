package echoratelimit_test

import (
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

// An echo server limiting each API key to 2 requests at once, refilled
// at 1 a second: the third request in a row is answered 429 with
// Retry-After, and the handler never sees it.
func ExampleMiddleware() {
	alg, err := tokenbucket.PerSecond(1, tokenbucket.Burst(2))
	if err != nil {
		panic(err)
	}
	lim, err := ratelimit.New(alg, memorystore.New[string]())
	if err != nil {
		panic(err)
	}
	byKey := func(r *http.Request) (string, error) {
		if k := r.Header.Get("X-API-Key"); k != "" {
			return k, nil
		}
		return "", httplimit.Reject(http.StatusUnauthorized, "an X-API-Key header is required")
	}

	e := echo.New()
	e.Use(echoratelimit.Middleware(httplimit.New(lim, byKey)))
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "hello") })

	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-API-Key", "alice")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK {
			fmt.Println(rec.Code, rec.Body.String())
		} else {
			fmt.Println(rec.Code, "Retry-After:", rec.Header().Get("Retry-After"))
		}
	}
	// Output:
	// 200 hello
	// 200 hello
	// 429 Retry-After: 1
}
