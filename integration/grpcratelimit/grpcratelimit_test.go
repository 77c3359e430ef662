// Package grpcratelimit_test runs the gRPC interceptors on the Redis
// stores: the grpcratelimit module's own tests run on the memory store, so
// that it requires gRPC and the core alone.
package grpcratelimit_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/grpcratelimit"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// newPolicy returns an interceptor of a policy of a burst of 2 refilled
// at 1/s and 3 per minute on st, on a fake clock at t0, a client of a
// server behind it, the policy and the clock.
func newPolicy(t *testing.T, st store.Store[string]) (healthpb.HealthClient, *ratelimit.Policy[string], *clock.Fake) {
	t.Helper()
	burst, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	minute, err := fixedwindow.New(fixedwindow.Config{Limit: 3, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(t0)
	p, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Name: "burst", Algorithm: burst}, {Name: "minute", Algorithm: minute}},
		ratelimit.WithName("grpc"), ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	in, err := grpcratelimit.NewPolicy(p, grpcratelimit.Metadata("x-api-key"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(in.Unary()), grpc.StreamInterceptor(in.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn), p, fake
}

func call(c healthpb.HealthClient, key string) (metadata.MD, error) {
	var md metadata.MD
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	return md, err
}

// TestPolicyChargesAllOrNone: a two-limit policy behind the unary
// interceptor on each Redis store and target: a denial charges no limit,
// and every decided call carries both limits' fields, as on the memory
// store (grpcratelimit's own TestPolicyChargesAllOrNone).
func TestPolicyChargesAllOrNone(t *testing.T) {
	stores := map[string]func(t *testing.T, target redistest.Target) store.Store[string]{
		"goredis": func(t *testing.T, target redistest.Target) store.Store[string] {
			st, err := goredisstore.New(redistest.GoRedis(t, target), goredisstore.WithPrefix[string](redistest.Prefix(t)),
				goredisstore.WithTTLMargin[string](time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"rueidis": func(t *testing.T, target redistest.Target) store.Store[string] {
			st, err := rueidisstore.New(redistest.Rueidis(t, target), rueidisstore.WithPrefix[string](redistest.Prefix(t)),
				rueidisstore.WithTTLMargin[string](time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, target redistest.Target) {
				c, p, fake := newPolicy(t, newStore(t, target))
				const policy = `"burst";q=2;w=2, "minute";q=3;w=60`
				for i, s := range []struct {
					advance time.Duration
					denied  bool
					state   string
					left    string
				}{
					{0, false, `"burst";r=1;t=1, "minute";r=2;t=60`, "[1 2]"},
					{0, false, `"burst";r=0;t=2, "minute";r=1;t=60`, "[0 1]"},
					{0, true, `"burst";r=0;t=2, "minute";r=1;t=60`, "[0 1]"}, // the minute is not charged
					{time.Second, false, `"burst";r=0;t=2, "minute";r=0;t=59`, "[0 0]"},
					{time.Second, true, `"burst";r=1;t=1, "minute";r=0;t=58`, "[1 0]"}, // the burst is not charged
				} {
					fake.Advance(s.advance)
					md, err := call(c, "alice")
					if denied := status.Code(err) == codes.ResourceExhausted; denied != s.denied || !denied && err != nil {
						t.Fatalf("step %d: %v, want denied %v", i, err, s.denied)
					}
					if got := md.Get("ratelimit-policy"); len(got) != 1 || got[0] != policy {
						t.Errorf("step %d: ratelimit-policy %q, want %q", i, got, policy)
					}
					if got := md.Get("ratelimit"); len(got) != 1 || got[0] != s.state {
						t.Errorf("step %d: ratelimit %q, want %q", i, got, s.state)
					}
					d, err := p.Peek(context.Background(), "alice")
					if err != nil {
						t.Fatal(err)
					}
					var left []int64
					for _, l := range d.Limits() {
						left = append(left, l.Remaining())
					}
					if fmt.Sprint(left) != s.left {
						t.Errorf("step %d: left %v, want %s", i, left, s.left)
					}
				}
			})
		})
	}
}

// counting is a go-redis client that counts the commands it sends, one
// round trip each.
type counting struct {
	redis.UniversalClient
	calls atomic.Int64
}

func (c *counting) Process(ctx context.Context, cmd redis.Cmder) error {
	c.calls.Add(1)
	return c.UniversalClient.Process(ctx, cmd)
}

// scriptCalls returns how many script calls (EVALSHA, EVAL and their
// read-only forms) the server has run (INFO commandstats).
func scriptCalls(t *testing.T, admin redis.UniversalClient) int64 {
	t.Helper()
	info, err := admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls=", "cmdstat_evalsha_ro:calls=", "cmdstat_eval_ro:calls="} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				calls, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				if err != nil {
					t.Fatalf("INFO commandstats: %q: %v", line, err)
				}
				n += calls
			}
		}
	}
	return n
}

// TestPolicyOneScriptCall checks on a private Redis server, which nothing
// else uses, that each call behind a two-limit policy's interceptor,
// admitted or denied, is one round trip and one script call.
func TestPolicyOneScriptCall(t *testing.T) {
	srv := redistest.StartServer(t) // skips unless real Redis tests are on
	client := &counting{UniversalClient: redistest.GoRedis(t, srv.Target())}
	st, err := goredisstore.New(client, goredisstore.WithPrefix[string](redistest.Prefix(t)), goredisstore.WithTTLMargin[string](time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	c, _, _ := newPolicy(t, st)
	if _, err := call(c, "warm-up"); err != nil { // loads the script
		t.Fatal(err)
	}
	admin := redistest.GoRedis(t, srv.Target())
	scripts, trips := scriptCalls(t, admin), client.calls.Load()
	const n = 20
	var denied int
	for i := range n {
		_, err := call(c, fmt.Sprint("k", i%4))
		if status.Code(err) == codes.ResourceExhausted {
			denied++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if denied != n-8 { // two each for four keys, at one instant
		t.Errorf("%d of %d calls denied, want %d", denied, n, n-8)
	}
	if got := scriptCalls(t, admin) - scripts; got != n {
		t.Errorf("%d calls made %d script calls on the server, want %d", n, got, n)
	}
	if got := client.calls.Load() - trips; got != n {
		t.Errorf("%d calls made %d round trips to Redis, want %d", n, got, n)
	}
}
