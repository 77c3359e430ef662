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
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/grpcratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// TestWithRefundGivesBackItsOwnAdmission: a late refund gives back only
// the refunded call's own admission. 2 calls a minute: A is admitted in
// one window, and while its handler runs the next window begins and B and
// C spend it; A fails and is refunded. D must be refused: giving A's cost
// back into the window B and C spent would admit 3 in it.
func TestWithRefundGivesBackItsOwnAdmission(t *testing.T) {
	alg, err := fixedwindow.PerMinute(2)
	if err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(t0)
	lim, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	failed := errors.New("the third party did not count it")
	in, err := grpcratelimit.New(lim, func(context.Context, string) (string, error) { return "k", nil },
		grpcratelimit.WithRefund(func(err error) bool { return errors.Is(err, failed) }))
	if err != nil {
		t.Fatal(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/a.B/C"}
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), transportStream{"/a.B/C"})
	served := func(context.Context, any) (any, error) { return "ok", nil }
	call := func() error { _, err := in.Unary()(ctx, nil, info, served); return err }

	_, err = in.Unary()(ctx, nil, info, func(context.Context, any) (any, error) {
		fake.Advance(time.Minute)
		for _, name := range []string{"B", "C"} {
			if err := call(); err != nil {
				t.Fatalf("%s in the next window: %v", name, err)
			}
		}
		return nil, failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("A: %v", err)
	}
	if err := call(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("D after A's late refund: %v, want ResourceExhausted: the refund gave back B's or C's room", err)
	}
}
