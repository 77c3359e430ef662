package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// secondAndDay are the limits of issue 43's report, built anew on each
// call as two routes' configurations build them: a burst of 10 a second
// and a quota of 3 a day.
func secondAndDay(t *testing.T) []ratelimit.Limit {
	t.Helper()
	second, err := tokenbucket.PerSecond(10)
	if err != nil {
		t.Fatal(err)
	}
	day, err := gcra.Per(3, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return []ratelimit.Limit{{Name: "second", Algorithm: second}, {Name: "day", Algorithm: day}}
}

// TestRoutesNeverShareSilently is issue 43's done-when for HTTP on the
// memory store, under the rule of issue 48: two routes given policies
// built apart with equal limits, without names, on one store, are two
// quotas; one Policy behind two routes is one quota.
func TestRoutesNeverShareSilently(t *testing.T) {
	st := memorystore.New[string]()
	orders, err := ratelimit.NewPolicy(st, secondAndDay(t))
	if err != nil {
		t.Fatal(err)
	}
	users, err := ratelimit.NewPolicy(st, secondAndDay(t))
	if err != nil {
		t.Fatalf("a second route's policy built apart with equal limits: %v", err)
	}
	if d, err := orders.AllowN(context.Background(), "bob", 3); err != nil || !d.Allowed() {
		t.Fatalf("3 of orders' day: %v, %v", d, err)
	}
	if d, err := users.Peek(context.Background(), "bob"); err != nil || d.Limits()[1].Remaining() != 3 {
		t.Errorf("users' day after orders' 3: %v, %v; want 3 left: a quota of its own", d, err)
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("/orders", httplimit.NewPolicy(orders, byHeader).Handler(ok))
	mux.Handle("/users", httplimit.NewPolicy(orders, byHeader).Handler(ok))
	for i, c := range []struct {
		path string
		want int
	}{
		{"/orders", 200}, {"/users", 200}, {"/orders", 200},
		{"/users", 429}, // one daily quota of 3 for both
	} {
		r := httptest.NewRequest("GET", c.path, nil)
		r.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("request %d, %s: %d; want %d", i, c.path, w.Code, c.want)
		}
	}
}
