package grpcratelimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/grpcratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
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

// unary calls in's unary interceptor for fullMethod and returns the
// call's status code.
func unary(in *grpcratelimit.Interceptor[string], fullMethod string) codes.Code {
	_, err := in.Unary()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: fullMethod},
		func(context.Context, any) (any, error) { return nil, nil })
	return status.Code(err)
}

// TestMethodsNeverShareSilently is issue 43's done-when on the memory
// store, under the rule of issue 48: two methods given policies built
// apart with equal limits, without names, on one store, are two quotas;
// one Policy picked for two methods is one quota.
func TestMethodsNeverShareSilently(t *testing.T) {
	st := memorystore.New[string]()
	orders, err := ratelimit.NewPolicy(st, secondAndDay(t))
	if err != nil {
		t.Fatal(err)
	}
	users, err := ratelimit.NewPolicy(st, secondAndDay(t))
	if err != nil {
		t.Fatalf("a second method's policy built apart with equal limits: %v", err)
	}
	if d, err := orders.AllowN(context.Background(), "bob", 3); err != nil || !d.Allowed() {
		t.Fatalf("3 of orders' day: %v, %v", d, err)
	}
	if d, err := users.Peek(context.Background(), "bob"); err != nil || d.Limits()[1].Remaining() != 3 {
		t.Errorf("users' day after orders' 3: %v, %v; want 3 left: a quota of its own", d, err)
	}
	in, err := grpcratelimit.NewResolver(func(context.Context, string) (string, *ratelimit.Policy[string], error) {
		return "alice", orders, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		method string
		want   codes.Code
	}{
		{"/shop.Orders/Get", codes.OK},
		{"/shop.Users/Get", codes.OK},
		{"/shop.Orders/Get", codes.OK},
		{"/shop.Users/Get", codes.ResourceExhausted}, // one daily quota of 3 for both
	} {
		if got := unary(in, c.method); got != c.want {
			t.Errorf("call %d, %s: %v; want %v", i, c.method, got, c.want)
		}
	}
}
