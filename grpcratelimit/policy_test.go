package grpcratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/grpcratelimit"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// twoLimits are the limits of the tests' policy: a burst of 2 refilled at
// 1/s, and 3 per minute in windows aligned to the epoch (t0 starts one).
func twoLimits(t *testing.T) []ratelimit.Limit {
	t.Helper()
	burst, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	minute, err := fixedwindow.New(fixedwindow.Config{Limit: 3, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return []ratelimit.Limit{{Name: "burst", Algorithm: burst}, {Name: "minute", Algorithm: minute}}
}

// newPolicy returns a policy of limits on st, on a fake clock at t0, and
// the clock.
func newPolicy(t *testing.T, st store.Store[string], limits []ratelimit.Limit, opts ...ratelimit.Option) (*ratelimit.Policy[string], *clock.Fake) {
	t.Helper()
	fake := clock.NewFake(t0)
	p, err := ratelimit.NewPolicy(st, limits, append([]ratelimit.Option{ratelimit.WithClock(fake)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

// eachStore runs f on the memory store. The same tests run on Redis
// and Redis Cluster in the integration module (integration/grpcratelimit),
// so that this module requires gRPC and the core alone.
func eachStore(t *testing.T, f func(t *testing.T, st store.Store[string])) {
	t.Run("memory", func(t *testing.T) { f(t, memorystore.New[string]()) })
}

// checkMD is check, returning the response's header metadata too.
func checkMD(ctx context.Context, c healthpb.HealthClient) (metadata.MD, error) {
	var md metadata.MD
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	return md, err
}

// wantFields checks the rate-limit fields of md.
func wantFields(t *testing.T, md metadata.MD, policy, state string) {
	t.Helper()
	if got := md.Get("ratelimit-policy"); len(got) != 1 || got[0] != policy {
		t.Errorf("ratelimit-policy got %q, want [%q]", got, policy)
	}
	if got := md.Get("ratelimit"); len(got) != 1 || got[0] != state {
		t.Errorf("ratelimit got %q, want [%q]", got, state)
	}
}

// wantRemaining checks what each limit of p has left for key, by Peek.
func wantRemaining(t *testing.T, p *ratelimit.Policy[string], key string, want ...int64) {
	t.Helper()
	d, err := p.Peek(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, l := range d.Limits() {
		got = append(got, l.Remaining())
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("remaining per limit got %v, want %v", got, want)
	}
}

// TestPolicyChargesAllOrNone checks a two-limit policy behind the unary
// interceptor: a denial charges no limit, its RetryInfo is the longest
// wait, and every decided call carries both limits' fields.
func TestPolicyChargesAllOrNone(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store[string]) {
		p, fake := newPolicy(t, st, twoLimits(t))
		in, err := grpcratelimit.NewPolicy(p, grpcratelimit.Metadata("x-api-key"))
		if err != nil {
			t.Fatal(err)
		}
		c := serveBufconn(t, in)
		alice := withKey("alice")
		const policy = `"burst";q=2;w=2, "minute";q=3;w=60`
		steps := []struct {
			advance time.Duration
			retry   time.Duration // 0: admitted
			state   string        // the ratelimit field
			left    []int64       // what each limit has left after the call, by Peek
		}{
			{0, 0, `"burst";r=1;t=1, "minute";r=2;t=60`, []int64{1, 2}},
			{0, 0, `"burst";r=0;t=2, "minute";r=1;t=60`, []int64{0, 1}},
			// The burst denies; the minute would admit, and is not charged.
			{0, time.Second, `"burst";r=0;t=2, "minute";r=1;t=60`, []int64{0, 1}},
			{time.Second, 0, `"burst";r=0;t=2, "minute";r=0;t=59`, []int64{0, 0}},
			// Both deny: RetryInfo is the longer wait, the minute's.
			{0, 59 * time.Second, `"burst";r=0;t=2, "minute";r=0;t=59`, []int64{0, 0}},
			// The minute denies; the burst would admit, and is not charged.
			{time.Second, 58 * time.Second, `"burst";r=1;t=1, "minute";r=0;t=58`, []int64{1, 0}},
			{0, 58 * time.Second, `"burst";r=1;t=1, "minute";r=0;t=58`, []int64{1, 0}},
			{58 * time.Second, 0, `"burst";r=1;t=1, "minute";r=2;t=60`, []int64{1, 2}},
		}
		for i, s := range steps {
			fake.Advance(s.advance)
			md, err := checkMD(alice, c)
			if s.retry == 0 && err != nil {
				t.Fatalf("step %d: %v, want admitted", i, err)
			}
			if s.retry != 0 {
				wantExhausted(t, err, s.retry)
			}
			wantFields(t, md, policy, s.state)
			wantRemaining(t, p, "alice", s.left...)
			if t.Failed() {
				t.Fatalf("step %d failed", i)
			}
		}
		if err := check(withKey("bob"), c); err != nil {
			t.Errorf("another key: %v", err)
		}
	})
}

// TestPolicyDenialNamesTheBindingLimit checks the denial's message.
func TestPolicyDenialNamesTheBindingLimit(t *testing.T) {
	p, _ := newPolicy(t, memorystore.New[string](), twoLimits(t))
	in, err := grpcratelimit.NewPolicy(p, grpcratelimit.Method)
	if err != nil {
		t.Fatal(err)
	}
	c := serveBufconn(t, in)
	for range 3 {
		check(context.Background(), c)
	}
	if err := check(context.Background(), c); !strings.Contains(status.Convert(err).Message(), `"burst"`) {
		t.Errorf("got %v, want a message naming the burst limit", err)
	}
}

// TestPolicyStream checks that a stream is charged to every limit once,
// and gets the fields in its header.
func TestPolicyStream(t *testing.T) {
	p, _ := newPolicy(t, memorystore.New[string](), twoLimits(t))
	in, err := grpcratelimit.NewPolicy(p, grpcratelimit.Metadata("x-api-key"))
	if err != nil {
		t.Fatal(err)
	}
	c := serveBufconn(t, in)
	ctx, cancel := context.WithCancel(withKey("alice"))
	defer cancel()
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	md, err := s.Header()
	if err != nil {
		t.Fatal(err)
	}
	wantFields(t, md, `"burst";q=2;w=2, "minute";q=3;w=60`, `"burst";r=1;t=1, "minute";r=2;t=60`)
	wantRemaining(t, p, "alice", 1, 2)
	if err := watch(withKey("alice"), c); err != nil {
		t.Fatal(err)
	}
	wantExhausted(t, watch(withKey("alice"), c), time.Second)
	wantRemaining(t, p, "alice", 0, 1)
}

// TestLimiterFields checks that a Limiter's calls carry its fields too,
// under the name "default", as httplimit's headers do.
func TestLimiterFields(t *testing.T) {
	lim, _ := newLimiter[string](t, 2, memorystore.New[string]())
	c := serveBufconn(t, newInterceptor(t, lim, grpcratelimit.Metadata("x-api-key")))
	md, err := checkMD(withKey("alice"), c)
	if err != nil {
		t.Fatal(err)
	}
	wantFields(t, md, `"default";q=2;w=2`, `"default";r=1;t=1`)
	checkMD(withKey("alice"), c)
	md, err = checkMD(withKey("alice"), c)
	wantExhausted(t, err, time.Second)
	wantFields(t, md, `"default";q=2;w=2`, `"default";r=0;t=2`)
}

// TestResolver checks one interceptor holding the limits of a server:
// two methods with policies of their own, keyed by the tenant named in the
// metadata, and a method the resolver leaves unlimited.
func TestResolver(t *testing.T) {
	st := memorystore.New[string]()
	check1, _ := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1})
	watches, fake := newPolicy(t, st, twoLimits(t))
	checks, _ := newPolicy(t, st, []ratelimit.Limit{{Name: "check", Algorithm: check1}}, ratelimit.WithClock(fake))
	tenant := grpcratelimit.Metadata("x-tenant")
	var resolved []string
	resolve := func(ctx context.Context, method string) (string, *ratelimit.Policy[string], error) {
		resolved = append(resolved, method)
		var p *ratelimit.Policy[string]
		switch method {
		case healthpb.Health_Check_FullMethodName:
			p = checks
		case healthpb.Health_Watch_FullMethodName:
			p = watches
		default:
			return "", nil, nil // unlimited
		}
		key, err := tenant(ctx, method)
		return key, p, err
	}
	var handled []error
	in, err := grpcratelimit.NewResolver(resolve, grpcratelimit.WithErrorHandler(func(_ context.Context, method string, err error) error {
		handled = append(handled, err)
		return status.Error(codes.Unauthenticated, "no tenant")
	}))
	if err != nil {
		t.Fatal(err)
	}
	c := serveBufconn(t, in)
	acme := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")
	initech := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "initech")

	md, err := checkMD(acme, c)
	if err != nil {
		t.Fatal(err)
	}
	wantFields(t, md, `"check";q=1;w=1`, `"check";r=0;t=1`)
	md, err = checkMD(acme, c)
	wantExhausted(t, err, time.Second)
	wantFields(t, md, `"check";q=1;w=1`, `"check";r=0;t=1`)
	if err := check(initech, c); err != nil {
		t.Errorf("another tenant: %v", err)
	}
	// Watch has limits of its own: acme's checks did not spend them.
	for range 2 {
		if err := watch(acme, c); err != nil {
			t.Fatalf("watch: %v", err)
		}
	}
	wantExhausted(t, watch(acme, c), time.Second)
	wantRemaining(t, watches, "acme", 0, 1)
	wantRemaining(t, checks, "acme", 0)
	// List is unlimited, and needs no tenant.
	for i := range 5 {
		var md metadata.MD
		if _, err := c.List(context.Background(), &healthpb.HealthListRequest{}, grpc.Header(&md)); err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
		if len(md.Get("ratelimit")) != 0 {
			t.Errorf("an unlimited call has the fields %v", md)
		}
	}
	// A limited method without a tenant: the resolver's error goes through
	// the error handler.
	wantCode(t, check(context.Background(), c), codes.Unauthenticated)
	if len(handled) != 1 || !errors.Is(handled[0], grpcratelimit.ErrNoKey) {
		t.Errorf("the error handler got %v, want one ErrNoKey", handled)
	}
	fake.Advance(time.Second)
	if err := check(acme, c); err != nil {
		t.Errorf("after RetryAfter: %v", err)
	}
	if len(resolved) != 13 {
		t.Errorf("the resolver ran %d times, want 13 (once per call)", len(resolved))
	}
}

// TestResolverCostZero checks that a call of cost 0 is not resolved.
func TestResolverCostZero(t *testing.T) {
	in, err := grpcratelimit.NewResolver(func(context.Context, string) (string, *ratelimit.Policy[string], error) {
		t.Error("a call of cost 0 was resolved")
		return "", nil, nil
	}, grpcratelimit.WithCost(func(string) int { return 0 }))
	if err != nil {
		t.Fatal(err)
	}
	if err := check(context.Background(), serveBufconn(t, in)); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyDryRun checks that a denial passes in dry-run mode, every
// denying limit's decision marked.
func TestPolicyDryRun(t *testing.T) {
	p, fake := newPolicy(t, memorystore.New[string](), twoLimits(t))
	in, err := grpcratelimit.NewPolicy(p, grpcratelimit.Method, grpcratelimit.WithDryRun())
	if err != nil {
		t.Fatal(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/a.B/C"}
	var seen []ratelimit.Decision
	handler := func(ctx context.Context, _ any) (any, error) {
		d, ok := grpcratelimit.PolicyDecisionFrom(ctx)
		if !ok {
			t.Error("no policy decision in the handler's context")
		}
		if dd, _ := grpcratelimit.DecisionFrom(ctx); dd != d {
			t.Errorf("DecisionFrom got %v, want the policy's %v", dd, d)
		}
		seen = append(seen, d)
		return "ok", nil
	}
	for range 3 {
		if _, err := in.Unary()(context.Background(), nil, info, handler); err != nil {
			t.Fatal(err)
		}
	}
	fake.Advance(2 * time.Second)
	for range 2 {
		if _, err := in.Unary()(context.Background(), nil, info, handler); err != nil {
			t.Fatal(err)
		}
	}
	// The third is denied by the burst; the fifth by the minute.
	for i, want := range [][2]bool{{false, false}, {false, false}, {true, false}, {false, false}, {false, true}} {
		d := seen[i]
		ls := d.Limits()
		if !d.Allowed() || d.DryRunDenied() != (want[0] || want[1]) || ls[0].DryRunDenied() != want[0] || ls[1].DryRunDenied() != want[1] {
			t.Errorf("call %d: decision %v, limits %v; want dry-run denials %v", i, d, ls, want)
		}
	}
	if d := seen[4]; d.Binding() != 1 || d.RetryAfter() != 58*time.Second {
		t.Errorf("call 4: binding %d, RetryAfter %v; want the minute, 58s", d.Binding(), d.RetryAfter())
	}
}

// TestPolicyClientWaits checks the client interceptor on a policy: a call
// whose deadline is too near fails at once with the longest wait.
func TestPolicyClientWaits(t *testing.T) {
	p, fake := newPolicy(t, memorystore.New[string](), twoLimits(t))
	client, err := grpcratelimit.NewPolicy(p, func(context.Context, string) (string, error) { return "upstream", nil })
	if err != nil {
		t.Fatal(err)
	}
	wait := client.UnaryClient()
	var sent int
	invoke := func(ctx context.Context) error {
		return wait(ctx, "/a.B/C", nil, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			sent++
			return nil
		})
	}
	for range 2 {
		if err := invoke(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	fake.Advance(time.Second)
	if err := invoke(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Both limits are spent: the burst for 1s, the minute for 59s.
	soon, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wantExhausted(t, invoke(soon), 59*time.Second)
	if sent != 3 {
		t.Errorf("%d calls sent, want the 3 admitted", sent)
	}
}

func TestNewPolicyAndResolverRejectNil(t *testing.T) {
	p, _ := newPolicy(t, memorystore.New[string](), twoLimits(t))
	if _, err := grpcratelimit.NewPolicy[string](nil, grpcratelimit.Method); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("nil Policy: %v, want ErrInvalidConfig", err)
	}
	if _, err := grpcratelimit.NewPolicy(p, nil); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("nil KeyFunc: %v, want ErrInvalidConfig", err)
	}
	if _, err := grpcratelimit.NewResolver[string](nil); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("nil Resolver: %v, want ErrInvalidConfig", err)
	}
}
