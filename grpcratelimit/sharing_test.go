package grpcratelimit_test

import (
	"context"
	"errors"
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
// store: two methods given policies built apart with equal limits, on one
// store, are refused at construction (ratelimit.ErrStateInUse) rather
// than sharing one daily quota; one Policy picked for two methods is one
// quota.
func TestMethodsNeverShareSilently(t *testing.T) {
	st := memorystore.New[string]()
	orders, err := ratelimit.NewPolicy(st, secondAndDay(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ratelimit.NewPolicy(st, secondAndDay(t)); !errors.Is(err, ratelimit.ErrStateInUse) {
		t.Fatalf("a second method's policy built apart with equal limits: %v; want ErrStateInUse", err)
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
