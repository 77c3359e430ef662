package grpcratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/grpcratelimit"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// secondAndDay are the limits of issue 43's report, built anew on each
// call as two methods' configurations build them: a burst of 10 a second
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

// redisStores open a store value of each client over its own client, on
// target, under prefix: two calls are two processes' stores.
var redisStores = map[string]func(t *testing.T, target redistest.Target, prefix string) store.Store[string]{
	"goredis": func(t *testing.T, target redistest.Target, prefix string) store.Store[string] {
		st, err := goredisstore.New(redistest.GoRedis(t, target), goredisstore.WithPrefix[string](prefix))
		if err != nil {
			t.Fatal(err)
		}
		return st
	},
	"rueidis": func(t *testing.T, target redistest.Target, prefix string) store.Store[string] {
		st, err := rueidisstore.New(redistest.Rueidis(t, target), rueidisstore.WithPrefix[string](prefix))
		if err != nil {
			t.Fatal(err)
		}
		return st
	},
}

// TestMethodsAndRoutesNeverShareSilently is issue 43's done-when on Redis,
// under the rule of issue 48, through both clients, on miniredis, the
// real server and the cluster: a policy without a name is refused
// (ErrInvalidConfig, naming WithName); policies of two names with equal
// limits on one store value are quotas apart; one Policy behind two
// methods, or two routes, is one quota; and the same name built on
// another store value over another client, as another process builds it,
// is the same quota, which is what a shared store is for.
func TestMethodsAndRoutesNeverShareSilently(t *testing.T) {
	for name, open := range redisStores {
		t.Run(name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, target redistest.Target) {
				prefix := redistest.Prefix(t)
				st := open(t, target, prefix)
				if _, err := ratelimit.NewPolicy(st, secondAndDay(t)); !errors.Is(err, ratelimit.ErrInvalidConfig) || !strings.Contains(err.Error(), "WithName") {
					t.Fatalf("a policy without a name on Redis: %v; want ErrInvalidConfig naming WithName", err)
				}
				p, err := ratelimit.NewPolicy(st, secondAndDay(t), ratelimit.WithName("shop"))
				if err != nil {
					t.Fatal(err)
				}
				users, err := ratelimit.NewPolicy(st, secondAndDay(t), ratelimit.WithName("users"))
				if err != nil {
					t.Fatal(err)
				}

				in, err := grpcratelimit.NewResolver(func(context.Context, string) (string, *ratelimit.Policy[string], error) {
					return "alice", p, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				unary := func(method string) codes.Code {
					_, err := in.Unary()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: method},
						func(context.Context, any) (any, error) { return nil, nil })
					return status.Code(err)
				}
				ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
				mux := http.NewServeMux()
				byUser := func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }
				mux.Handle("/orders", httplimit.NewPolicy(p, byUser).Handler(ok))
				mux.Handle("/users", httplimit.NewPolicy(p, byUser).Handler(ok))
				get := func(path string) int {
					r := httptest.NewRequest("GET", path, nil)
					r.Header.Set("X-User", "bob")
					w := httptest.NewRecorder()
					mux.ServeHTTP(w, r)
					return w.Code
				}
				for i, want := range []codes.Code{codes.OK, codes.OK, codes.OK, codes.ResourceExhausted} {
					method := []string{"/shop.Orders/Get", "/shop.Users/Get"}[i%2]
					if got := unary(method); got != want {
						t.Errorf("call %d, %s: %v; want %v (one daily quota of 3 for both methods)", i, method, got, want)
					}
				}
				for i, want := range []int{200, 200, 200, 429} {
					path := []string{"/orders", "/users"}[i%2]
					if got := get(path); got != want {
						t.Errorf("request %d, %s: %d; want %d (one daily quota of 3 for both routes)", i, path, got, want)
					}
				}

				if d, err := users.Peek(context.Background(), "alice"); err != nil || d.Limits()[1].Remaining() != 3 {
					t.Errorf("alice under the policy users: %v, %v; want 3 left of its day (a quota of its own)", d, err)
				}
				// Another process: another client, another store value.
				other, err := ratelimit.NewPolicy(open(t, target, prefix), secondAndDay(t), ratelimit.WithName("shop"))
				if err != nil {
					t.Fatalf("the same policy in another process: %v", err)
				}
				d, err := other.Peek(context.Background(), "alice")
				if err != nil || d.Allowed() || d.Binding() != 1 {
					t.Errorf("alice seen from another process: %v, %v; want denied by the day, which the first spent", d, err)
				}
			})
		})
	}
}
