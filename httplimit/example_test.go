package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// A key function that refuses requests without an API key, and a limit
// announced under a name of the API's own.
func ExampleReject() {
	alg, err := fixedwindow.New(fixedwindow.Config{Limit: 100, Window: time.Minute})
	if err != nil {
		panic(err)
	}
	lim, err := ratelimit.New(alg, memorystore.New[string]())
	if err != nil {
		panic(err)
	}
	byAPIKey := func(r *http.Request) (string, error) {
		if k := r.Header.Get("X-API-Key"); k != "" {
			return k, nil
		}
		return "", httplimit.Reject(http.StatusUnauthorized, "an X-API-Key header is required")
	}
	h := httplimit.New(lim, byAPIKey, httplimit.WithAdvertised("default", httplimit.Advertised{Name: "api"})).
		Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") }))

	for _, key := range []string{"k-123", ""} {
		r := httptest.NewRequest("GET", "/", nil)
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d, RateLimit-Policy %q\n%s", w.Code, w.Header().Get("RateLimit-Policy"), w.Body)
	}
	// Output:
	// 200, RateLimit-Policy "\"api\";q=100;w=60"
	// hello
	// 401, RateLimit-Policy ""
	// {"type":"about:blank","title":"Unauthorized","status":401,"detail":"an X-API-Key header is required"}
}
