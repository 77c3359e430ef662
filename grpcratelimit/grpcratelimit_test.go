package grpcratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/grpcratelimit"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// newLimiter returns a limiter with a burst of capacity refilled at 1/s, on
// a fake clock, and the clock.
func newLimiter[K comparable](t *testing.T, capacity int64, st store.Store[K], opts ...ratelimit.Option) (*ratelimit.Limiter[K], *clock.Fake) {
	t.Helper()
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: capacity, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(t0)
	lim, err := ratelimit.New(alg, st, append([]ratelimit.Option{ratelimit.WithClock(fake)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return lim, fake
}

func newInterceptor[K comparable](t *testing.T, lim *ratelimit.Limiter[K], key grpcratelimit.KeyFunc[K], opts ...grpcratelimit.Option) *grpcratelimit.Interceptor[K] {
	t.Helper()
	in, err := grpcratelimit.New(lim, key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// serve starts a server with the health service behind the interceptor,
// listening on lis, and returns a client connected to it.
func serve[K comparable](t *testing.T, in *grpcratelimit.Interceptor[K], lis net.Listener, dial func(context.Context, string) (net.Conn, error), target string) healthpb.HealthClient {
	t.Helper()
	srv := grpc.NewServer(grpc.UnaryInterceptor(in.Unary()), grpc.StreamInterceptor(in.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if dial != nil {
		opts = append(opts, grpc.WithContextDialer(dial))
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// serveBufconn is serve over an in-process bufconn listener.
func serveBufconn[K comparable](t *testing.T, in *grpcratelimit.Interceptor[K]) healthpb.HealthClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	return serve(t, in, lis, func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }, "passthrough:///bufconn")
}

func withKey(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
}

func check(ctx context.Context, c healthpb.HealthClient) error {
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// watch opens a Watch stream and returns the error of its first message.
func watch(ctx context.Context, c healthpb.HealthClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

// wantExhausted checks that err is RESOURCE_EXHAUSTED with a RetryInfo of
// retry.
func wantExhausted(t *testing.T, err error, retry time.Duration) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		t.Fatalf("got %v, want ResourceExhausted", err)
	}
	var infos []*errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			infos = append(infos, ri)
		}
	}
	if len(infos) != 1 || infos[0].GetRetryDelay().AsDuration() != retry {
		t.Fatalf("details %v, want one RetryInfo with retry_delay %v", st.Details(), retry)
	}
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("got %v, want code %v", err, code)
	}
}

func TestUnaryDeniesWithRetryInfo(t *testing.T) {
	lim, fake := newLimiter[string](t, 2, memorystore.New[string]())
	c := serveBufconn(t, newInterceptor(t, lim, grpcratelimit.Metadata("x-api-key")))
	alice := withKey("alice")
	for i := range 2 {
		if err := check(alice, c); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	fake.Advance(250 * time.Millisecond)
	wantExhausted(t, check(alice, c), 750*time.Millisecond)
	if err := check(withKey("bob"), c); err != nil {
		t.Fatalf("another key: %v", err)
	}
	fake.Advance(750 * time.Millisecond)
	if err := check(alice, c); err != nil {
		t.Fatalf("after RetryAfter: %v", err)
	}
	// No key: InvalidArgument, and nothing charged.
	wantCode(t, check(context.Background(), c), codes.InvalidArgument)
}

func TestStreamChargedOnceWhenOpened(t *testing.T) {
	lim, _ := newLimiter[string](t, 2, memorystore.New[string]())
	c := serveBufconn(t, newInterceptor(t, lim, grpcratelimit.Metadata("x-api-key")))
	alice := withKey("alice")
	ctx, cancel := context.WithCancel(alice)
	defer cancel()
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	if err := watch(alice, c); err != nil {
		t.Fatalf("second stream: %v", err)
	}
	wantExhausted(t, watch(alice, c), time.Second)
	wantExhausted(t, check(alice, c), time.Second) // one limit for both kinds
}

func TestCostPerMethod(t *testing.T) {
	lim, _ := newLimiter[string](t, 3, memorystore.New[string]())
	cost := func(method string) int {
		switch method {
		case healthpb.Health_Check_FullMethodName:
			return 2
		case healthpb.Health_Watch_FullMethodName:
			return 0 // never limited
		case healthpb.Health_List_FullMethodName:
			return 4 // above the limit
		}
		return 1
	}
	c := serveBufconn(t, newInterceptor(t, lim, grpcratelimit.Metadata("x-api-key"), grpcratelimit.WithCost(cost)))
	alice := withKey("alice")
	if err := check(alice, c); err != nil {
		t.Fatal(err)
	}
	wantExhausted(t, check(alice, c), time.Second) // 1 left, 2 asked: 1 s to go
	for i := range 5 {
		if err := watch(context.Background(), c); err != nil { // cost 0: not even a key needed
			t.Fatalf("watch %d: %v", i, err)
		}
	}
	_, err := c.List(alice, &healthpb.HealthListRequest{})
	wantCode(t, err, codes.ResourceExhausted)
	if st, _ := status.FromError(err); len(st.Details()) != 0 {
		t.Errorf("a call above the limit has details %v; retrying never helps", st.Details())
	}
}

func TestPeerAddrOverLoopback(t *testing.T) {
	lim, _ := newLimiter[netip.Addr](t, 1, memorystore.New[netip.Addr]())
	var keys []netip.Addr
	key := func(ctx context.Context, method string) (netip.Addr, error) {
		a, err := grpcratelimit.PeerAddr(ctx, method)
		keys = append(keys, a)
		return a, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, newInterceptor(t, lim, key), lis, nil, lis.Addr().String())
	if err := check(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	wantExhausted(t, check(context.Background(), c), time.Second)
	if len(keys) != 2 || keys[0] != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("keys %v, want 127.0.0.1 twice", keys)
	}
	// In process there is no IP address: ErrNoKey, InvalidArgument.
	bc := serveBufconn(t, newInterceptor(t, lim, grpcratelimit.PeerAddr))
	wantCode(t, check(context.Background(), bc), codes.InvalidArgument)
}

// failing is a store whose backend is down.
type failing struct{}

func (failing) Open([]store.Limit, clock.Clock) (store.Table[string], error) {
	return failing{}, nil
}
func (failing) Take(context.Context, string, int64, int64, []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{}, fmt.Errorf("%w: dial tcp 10.1.2.3:6379: secret internals", store.ErrUnavailable)
}
func (failing) Peek(context.Context, string, int64, []algorithm.Result) (algorithm.Result, error) {
	return failing{}.Take(context.Background(), "", 0, 1, nil)
}
func (failing) Reset(context.Context, string) error { return store.ErrUnavailable }

// TestFailurePolicies checks that the failure policy decides when the
// store fails, for a Limiter and for a Policy of the same one limit.
func TestFailurePolicies(t *testing.T) {
	kinds := map[string]func(t *testing.T, fp ratelimit.FailurePolicy) *grpcratelimit.Interceptor[string]{
		"Limiter": func(t *testing.T, fp ratelimit.FailurePolicy) *grpcratelimit.Interceptor[string] {
			lim, _ := newLimiter[string](t, 1, failing{}, ratelimit.WithName("down"), ratelimit.WithFailurePolicy(fp))
			return newInterceptor(t, lim, grpcratelimit.Method)
		},
		"Policy": func(t *testing.T, fp ratelimit.FailurePolicy) *grpcratelimit.Interceptor[string] {
			alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1})
			if err != nil {
				t.Fatal(err)
			}
			p, _ := newPolicy(t, failing{}, []ratelimit.Limit{{Algorithm: alg}}, ratelimit.WithName("down"), ratelimit.WithFailurePolicy(fp))
			in, err := grpcratelimit.NewPolicy(p, grpcratelimit.Method)
			if err != nil {
				t.Fatal(err)
			}
			return in
		},
	}
	for _, tt := range []struct {
		policy ratelimit.FailurePolicy
		codes  []codes.Code
	}{
		{ratelimit.FailWithError, []codes.Code{codes.Unavailable, codes.Unavailable}},
		{ratelimit.FailOpen, []codes.Code{codes.OK, codes.OK}},
		{ratelimit.FailClosed, []codes.Code{codes.ResourceExhausted, codes.ResourceExhausted}},
		{ratelimit.FailLocal, []codes.Code{codes.OK, codes.ResourceExhausted}},
	} {
		for kind, build := range kinds {
			t.Run(fmt.Sprint(kind, "/", tt.policy), func(t *testing.T) {
				c := serveBufconn(t, build(t, tt.policy))
				for i, want := range tt.codes {
					err := check(context.Background(), c)
					wantCode(t, err, want)
					if strings.Contains(fmt.Sprint(err), "secret") {
						t.Errorf("call %d: the error reveals the store's: %v", i, err)
					}
					if want == codes.ResourceExhausted {
						wantExhausted(t, err, map[ratelimit.FailurePolicy]time.Duration{
							ratelimit.FailClosed: time.Second, ratelimit.FailLocal: time.Second}[tt.policy])
					}
				}
			})
		}
	}
}

// mismatched is a store whose key holds another algorithm's state.
type mismatched struct{ failing }

func (mismatched) Open([]store.Limit, clock.Clock) (store.Table[string], error) {
	return mismatched{}, nil
}
func (mismatched) Take(context.Context, string, int64, int64, []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{}, fmt.Errorf("%w: RLMISMATCH rl:{secret} holds 16 bytes", store.ErrStateMismatch)
}

// TestStateMismatch checks that a key's state of another algorithm fails
// the call with codes.Internal under a failure policy that would admit an
// outage, revealing nothing of the error.
func TestStateMismatch(t *testing.T) {
	lim, _ := newLimiter[string](t, 1, mismatched{}, ratelimit.WithName("down"), ratelimit.WithFailurePolicy(ratelimit.FailOpen))
	c := serveBufconn(t, newInterceptor(t, lim, grpcratelimit.Method))
	err := check(context.Background(), c)
	wantCode(t, err, codes.Internal)
	if strings.Contains(fmt.Sprint(err), "secret") {
		t.Errorf("the error reveals the store's: %v", err)
	}
}

// crowded is a store whose key holds the most states a store keeps.
type crowded struct{ failing }

func (crowded) Open([]store.Limit, clock.Clock) (store.Table[string], error) {
	return crowded{}, nil
}
func (crowded) Take(context.Context, string, int64, int64, []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{}, fmt.Errorf("%w: RLTOOMANY rl:{secret}# holds 512 fields", store.ErrTooManyStates)
}

// TestTooManyStates checks that a key holding the most states a store
// keeps fails the call with codes.ResourceExhausted under a failure
// policy that would admit an outage, revealing nothing of the error.
func TestTooManyStates(t *testing.T) {
	lim, _ := newLimiter[string](t, 1, crowded{}, ratelimit.WithName("down"), ratelimit.WithFailurePolicy(ratelimit.FailOpen))
	c := serveBufconn(t, newInterceptor(t, lim, grpcratelimit.Method))
	err := check(context.Background(), c)
	wantCode(t, err, codes.ResourceExhausted)
	if strings.Contains(fmt.Sprint(err), "secret") {
		t.Errorf("the error reveals the store's: %v", err)
	}
}

func TestErrorHandler(t *testing.T) {
	lim, _ := newLimiter[string](t, 1, failing{}, ratelimit.WithName("down"))
	var got error
	in := newInterceptor(t, lim, grpcratelimit.Method, grpcratelimit.WithErrorHandler(func(_ context.Context, method string, err error) error {
		got = err
		return status.Error(codes.Aborted, "custom: "+method)
	}))
	err := check(context.Background(), serveBufconn(t, in))
	wantCode(t, err, codes.Aborted)
	if !errors.Is(got, ratelimit.ErrStoreUnavailable) {
		t.Errorf("the handler got %v, want ErrStoreUnavailable", got)
	}
	// A KeyFunc's own status passes through the default handler.
	unauthenticated := func(context.Context, string) (string, error) {
		return "", status.Error(codes.Unauthenticated, "who are you?")
	}
	lim, _ = newLimiter[string](t, 1, memorystore.New[string]())
	wantCode(t, check(context.Background(), serveBufconn(t, newInterceptor(t, lim, unauthenticated))), codes.Unauthenticated)
	// The end of the call's context is its status, whatever the policy.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	lim, _ = newLimiter[string](t, 1, failing{}, ratelimit.WithName("down"), ratelimit.WithFailurePolicy(ratelimit.FailOpen))
	in = newInterceptor(t, lim, grpcratelimit.Method)
	_, err = in.Unary()(cancelled, nil, &grpc.UnaryServerInfo{FullMethod: "/a.B/C"}, func(context.Context, any) (any, error) {
		t.Error("handler called with a cancelled context")
		return nil, nil
	})
	wantCode(t, err, codes.Canceled)
}

func TestNewRejectsNil(t *testing.T) {
	lim, _ := newLimiter[string](t, 1, memorystore.New[string]())
	if _, err := grpcratelimit.New[string](nil, grpcratelimit.Method); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("nil Limiter: %v, want ErrInvalidConfig", err)
	}
	if _, err := grpcratelimit.New(lim, nil); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("nil KeyFunc: %v, want ErrInvalidConfig", err)
	}
}

// TestDecisionFromAndDryRun calls the interceptors directly, with a
// handler that reads the decision.
func TestDecisionFromAndDryRun(t *testing.T) {
	lim, _ := newLimiter[string](t, 1, memorystore.New[string]())
	in := newInterceptor(t, lim, grpcratelimit.Method, grpcratelimit.WithDryRun())
	info := &grpc.UnaryServerInfo{FullMethod: "/a.B/C"}
	var seen []ratelimit.Decision
	handler := func(ctx context.Context, _ any) (any, error) {
		d, ok := grpcratelimit.DecisionFrom(ctx)
		if !ok {
			t.Error("no decision in the handler's context")
		}
		seen = append(seen, d)
		return "ok", nil
	}
	for range 2 {
		if _, err := in.Unary()(context.Background(), nil, info, handler); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 2 || !seen[0].Allowed() || seen[0].DryRunDenied() || !seen[1].Allowed() || !seen[1].DryRunDenied() || seen[1].RetryAfter() != time.Second {
		t.Errorf("decisions %+v, want an admission, then a dry-run denial with RetryAfter 1s", seen)
	}
	// Streams see it through their context too.
	stream := func(_ any, ss grpc.ServerStream) error {
		if d, ok := grpcratelimit.DecisionFrom(ss.Context()); !ok || !d.DryRunDenied() {
			t.Errorf("stream decision %+v, %v, want a dry-run denial", d, ok)
		}
		return nil
	}
	if err := in.Stream()(nil, fakeStream{ctx: context.Background()}, &grpc.StreamServerInfo{FullMethod: "/a.B/C"}, stream); err != nil {
		t.Fatal(err)
	}
	if _, ok := grpcratelimit.DecisionFrom(context.Background()); ok {
		t.Error("DecisionFrom outside the interceptor reports a decision")
	}
}

type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeStream) Context() context.Context { return s.ctx }

// transportStream gives grpc.Method a method, as a server does.
type transportStream struct{ method string }

func (s transportStream) Method() string                { return s.method }
func (transportStream) SetHeader(md metadata.MD) error  { return nil }
func (transportStream) SendHeader(md metadata.MD) error { return nil }
func (transportStream) SetTrailer(md metadata.MD) error { return nil }

// TestLimit checks the go-grpc-middleware adapter: nil when admitted, the
// interceptors' error when not.
func TestLimit(t *testing.T) {
	lim, _ := newLimiter[string](t, 1, memorystore.New[string]())
	var keys []string
	key := func(ctx context.Context, method string) (string, error) {
		keys = append(keys, method)
		return method, nil
	}
	in := newInterceptor(t, lim, key)
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), transportStream{"/a.B/C"})
	if err := in.Limit(ctx); err != nil {
		t.Fatal(err)
	}
	wantExhausted(t, in.Limit(ctx), time.Second)
	if len(keys) != 2 || keys[0] != "/a.B/C" {
		t.Errorf("keys %v, want the method twice", keys)
	}
}

// TestClientWaits checks the client interceptor: a call waits on the
// limiter's clock until admitted; one whose deadline is too near fails at
// once, unsent.
func TestClientWaits(t *testing.T) {
	lim, fake := newLimiter[string](t, 1, memorystore.New[string]())
	// One limit for every call to the server.
	client := newInterceptor(t, lim, func(context.Context, string) (string, error) { return "upstream", nil })
	var served atomic.Int64
	counting := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		served.Add(1)
		return handler(ctx, req)
	}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(counting), grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		served.Add(1)
		return h(srv, ss)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(client.UnaryClient()), grpc.WithStreamInterceptor(client.StreamClient()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := healthpb.NewHealthClient(conn)

	if err := check(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- check(context.Background(), c) }()
	fake.BlockUntilTimers(1)
	select {
	case err := <-done:
		t.Fatalf("the second call did not wait: %v", err)
	default:
	}
	fake.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("the second call after waiting: %v", err)
	}
	if n := served.Load(); n != 2 {
		t.Fatalf("server saw %d calls, want 2", n)
	}

	soon, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	wantExhausted(t, check(soon, c), time.Second)
	wantExhausted(t, watch(soon, c), time.Second)
	if n := served.Load(); n != 2 {
		t.Errorf("server saw %d calls, want the 2 admitted only", n)
	}
}

// recordingStream is a transportStream that keeps the header metadata set
// on it.
type recordingStream struct {
	transportStream
	header metadata.MD
}

func (s *recordingStream) SetHeader(md metadata.MD) error {
	s.header = metadata.Join(s.header, md)
	return nil
}

// TestHandlerContext checks the context the handler is served with: the
// decision, the parent's values and cancellation, through contexts derived
// from it too; and the fields set on the call's stream.
func TestHandlerContext(t *testing.T) {
	lim, _ := newLimiter[string](t, 2, memorystore.New[string]())
	in := newInterceptor(t, lim, grpcratelimit.Method)
	st := &recordingStream{transportStream: transportStream{"/a.B/C"}}
	type parentKey struct{}
	parent, cancel := context.WithCancel(context.WithValue(grpc.NewContextWithServerTransportStream(context.Background(), st), parentKey{}, "v"))
	handler := func(ctx context.Context, _ any) (any, error) {
		child, stop := context.WithCancel(ctx)
		defer stop()
		if d, ok := grpcratelimit.DecisionFrom(child); !ok || !d.Allowed() || d.Remaining() != 1 {
			t.Errorf("DecisionFrom a derived context: %+v, %v, want an admission with 1 left", d, ok)
		}
		if pd, ok := grpcratelimit.PolicyDecisionFrom(ctx); !ok || pd.Limits() != nil || pd.Remaining() != 1 {
			t.Errorf("PolicyDecisionFrom: %+v, %v, want the decision of one limit", pd, ok)
		}
		if m, _ := grpc.Method(child); m != "/a.B/C" || child.Value(parentKey{}) != "v" {
			t.Errorf("method %q, parent's value %v: the parent's values are lost", m, child.Value(parentKey{}))
		}
		if s := fmt.Sprint(ctx); !strings.Contains(s, ".WithValue(grpcratelimit.decisionKey, ") {
			t.Errorf("the context describes itself as %q", s)
		}
		cancel()
		select {
		case <-child.Done():
		case <-time.After(10 * time.Second):
			t.Error("cancelling the parent does not cancel a context derived from the handler's")
		}
		if ctx.Err() != context.Canceled {
			t.Errorf("the handler's context's Err is %v after the parent's cancellation", ctx.Err())
		}
		return "ok", nil
	}
	if _, err := in.Unary()(parent, nil, &grpc.UnaryServerInfo{FullMethod: "/a.B/C"}, handler); err != nil {
		t.Fatal(err)
	}
	if got := st.header.Get("ratelimit"); len(got) != 1 || got[0] != `"default";r=1;t=1` {
		t.Errorf("ratelimit %q, want [%q]", got, `"default";r=1;t=1`)
	}
	if got := st.header.Get("ratelimit-policy"); len(got) != 1 || got[0] != `"default";q=2;w=2` {
		t.Errorf("ratelimit-policy %q, want [%q]", got, `"default";q=2;w=2`)
	}
}

// WithRefund gives back the cost of calls whose handler error it names:
// here successful ones, so that only failures count.
func TestWithRefund(t *testing.T) {
	lim, _ := newLimiter[string](t, 2, memorystore.New[string]())
	c := serveBufconn(t, newInterceptor(t, lim, grpcratelimit.Metadata("x-api-key"),
		grpcratelimit.WithRefund(func(err error) bool { return err == nil })))
	alice := withKey("alice")
	for i := range 5 {
		if err := check(alice, c); err != nil {
			t.Fatalf("call %d: %v (successes are refunded: the burst of 2 never runs out)", i, err)
		}
	}
	if d, err := lim.Peek(context.Background(), "alice"); err != nil || d.Remaining() != 2 {
		t.Errorf("after 5 refunded calls: %v, %v; want 2 remaining", d, err)
	}
}

// downForTakes is a store whose Takes fail (ErrUnavailable) while its
// refunds go through, counted.
type downForTakes struct{ refunds *atomic.Int64 }

func (s downForTakes) Open([]store.Limit, clock.Clock) (store.Table[string], error) { return s, nil }
func (downForTakes) Take(context.Context, string, int64, int64, []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{}, store.ErrUnavailable
}
func (downForTakes) Peek(context.Context, string, int64, []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{}, store.ErrUnavailable
}
func (downForTakes) Reset(context.Context, string) error { return store.ErrUnavailable }
func (downForTakes) Book(context.Context, string, int64, int64, int64, []algorithm.Result) (algorithm.Result, store.Booking, bool, error) {
	return algorithm.Result{}, store.Booking{}, false, store.ErrUnavailable
}
func (downForTakes) Cancel(context.Context, string, int64, store.Booking) error {
	return store.ErrUnavailable
}
func (s downForTakes) Refund(context.Context, string, int64, int64, []algorithm.Result) (algorithm.Result, error) {
	s.refunds.Add(1)
	return algorithm.Result{Remaining: 1}, nil
}
func (s downForTakes) Undo(context.Context, string, int64, store.Booking) (int64, error) {
	s.refunds.Add(1)
	return 1, nil
}

// TestWithRefundOnlyWhatTheStoreCharged: a call a failure policy admitted
// (FailOpen uncharged, FailLocal charged to the process's own table) is
// never refunded to the store, which did not charge it.
func TestWithRefundOnlyWhatTheStoreCharged(t *testing.T) {
	for _, policy := range []ratelimit.FailurePolicy{ratelimit.FailOpen, ratelimit.FailLocal} {
		refunds := new(atomic.Int64)
		lim, _ := newLimiter[string](t, 5, downForTakes{refunds: refunds}, ratelimit.WithName("down"), ratelimit.WithFailurePolicy(policy))
		c := serveBufconn(t, newInterceptor(t, lim, grpcratelimit.Metadata("x-api-key"),
			grpcratelimit.WithRefund(func(error) bool { return true })))
		for i := range 3 {
			if err := check(withKey("eve"), c); err != nil {
				t.Fatalf("policy %d call %d: %v, want the failure policy's admission", policy, i, err)
			}
		}
		if n := refunds.Load(); n != 0 {
			t.Errorf("policy %d: %d refunds reached the store for calls it never charged; want 0", policy, n)
		}
	}
}

// TestFailurePolicyAdvertisesNoQuota: a call a failure policy admitted
// gets no rate-limit metadata, where the store's admission gets both
// fields, under the Limiter's name.
func TestFailurePolicyAdvertisesNoQuota(t *testing.T) {
	for _, c := range []struct {
		st   store.Store[string]
		want bool
	}{{memorystore.New[string](), true}, {downForTakes{refunds: new(atomic.Int64)}, false}} {
		lim, _ := newLimiter[string](t, 5, c.st, ratelimit.WithFailurePolicy(ratelimit.FailOpen), ratelimit.WithName("api"))
		cl := serveBufconn(t, newInterceptor(t, lim, grpcratelimit.Metadata("x-api-key")))
		var md metadata.MD
		if _, err := cl.Check(withKey("eve"), &healthpb.HealthCheckRequest{}, grpc.Header(&md)); err != nil {
			t.Fatal(err)
		}
		policy, rl := md.Get("ratelimit-policy"), md.Get("ratelimit")
		if c.want && (len(policy) != 1 || !strings.HasPrefix(policy[0], `"api";`) || len(rl) != 1) {
			t.Errorf("the store's admission: ratelimit-policy %q, ratelimit %q; want both, under \"api\"", policy, rl)
		}
		if !c.want && (len(policy) != 0 || len(rl) != 0) {
			t.Errorf("FailOpen's admission: ratelimit-policy %q, ratelimit %q; want none", policy, rl)
		}
	}
}

// WithSettle charges a served call what its response says it cost: here
// the health service's response, a status that the settle func prices (a
// stand-in for an LLM response's token count), on a limit of 10 admitting
// each call at an estimate of 1. A SERVING answer costs 4: after two
// calls, 2 are left; then a call that settles past the limit leaves a debt
// the next call waits out.
func TestWithSettle(t *testing.T) {
	lim, _ := newLimiter[string](t, 10, memorystore.New[string]())
	price := 4
	c := serveBufconn(t, newInterceptor(t, lim, grpcratelimit.Metadata("x-api-key"),
		grpcratelimit.WithSettle(func(_ context.Context, method string, resp any, err error) int {
			if r, ok := resp.(*healthpb.HealthCheckResponse); !ok || err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return -1 // the estimate stands
			}
			return price
		})))
	bob := withKey("bob")
	for i := range 2 {
		if err := check(bob, c); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if d, err := lim.Peek(context.Background(), "bob"); err != nil || d.Remaining() != 2 {
		t.Fatalf("after 2 calls that cost 4 each: %v, %v; want 2 remaining", d, err)
	}
	price = 12
	if err := check(bob, c); err != nil {
		t.Fatalf("third call: %v", err)
	}
	err := check(bob, c)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the call after a settle past the limit: %v, want ResourceExhausted", err)
	}
}
