package httplimit_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// Limit each client network to a burst of 2 and a request a minute; a
// denied request gets 429 with Retry-After.
func ExampleNew() {
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1.0 / 60})
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(alg, memorystore.New[netip.Prefix]())
	if err != nil {
		log.Fatal(err)
	}
	var ip httplimit.ClientIP // no trusted proxies: the peer's address
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})
	h := httplimit.New(lim, ip.Key).Handler(api)

	for range 3 {
		req := httptest.NewRequest("GET", "/api/", nil)
		req.RemoteAddr = "192.0.2.7:51234"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, "RateLimit:", rec.Header().Get("RateLimit"))
		if ra := rec.Header().Get("Retry-After"); ra != "" {
			fmt.Println("    Retry-After:", ra)
		}
	}
	// Output:
	// 200 RateLimit: "default";r=1;t=60
	// 200 RateLimit: "default";r=0;t=120
	// 429 RateLimit: "default";r=0;t=120
	//     Retry-After: 60
}

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
