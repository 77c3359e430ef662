package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/go-ratelimit/ratelimit/clock"
)

// The environment variables naming real Redis servers, as for the
// library's own tests (.ci/run sets both).
const (
	envRedis   = "RATELIMIT_REDIS_ADDR"
	envCluster = "RATELIMIT_REDIS_CLUSTER_ADDRS"
)

// target is a store the server is tested on.
type target struct {
	name  string
	store string // memory or redis
	addrs func(t *testing.T) string
}

// targets are the stores every server test runs on: memory, an embedded
// miniredis, and the real Redis and Redis Cluster when the environment
// names them (their subtests skip otherwise).
var targets = []target{
	{name: "memory", store: "memory"},
	{name: "miniredis", store: "redis", addrs: func(t *testing.T) string { return miniredis.RunT(t).Addr() }},
	{name: "redis", store: "redis", addrs: func(t *testing.T) string {
		addr := os.Getenv(envRedis)
		if addr == "" {
			t.Skipf("no real Redis: set %s=host:port to run this test", envRedis)
		}
		return addr
	}},
	{name: "cluster", store: "redis", addrs: func(t *testing.T) string {
		addrs := os.Getenv(envCluster)
		if addrs == "" {
			t.Skipf("no Redis Cluster: set %s=host:port,host:port,… to run this test", envCluster)
		}
		return addrs
	}},
}

// forEachTarget runs f as a subtest on every target.
func forEachTarget(t *testing.T, f func(t *testing.T, tg target)) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) { f(t, tg) })
	}
}

// start is the fake clock's first instant: 10 s into a minute, so that
// a minute's window ends 50 s later.
var start = time.Date(2026, 11, 27, 12, 0, 10, 0, time.UTC)

// testServer is a server running in this process on a 127.0.0.1:0
// listener, deciding on a fake clock, with a gRPC client of go-control-plane.
type testServer struct {
	app    *app
	clk    *clock.Fake
	client rlspb.RateLimitServiceClient
	conn   *grpc.ClientConn
	addr   string
}

// startServer serves the configuration at configPath on tg.
func startServer(t *testing.T, tg target, configPath string, mod ...func(*options)) *testServer {
	t.Helper()
	return startServerLogging(t, tg, configPath, io.Discard, mod...)
}

// startServerLogging is startServer with the server's log written to w.
func startServerLogging(t *testing.T, tg target, configPath string, w io.Writer, mod ...func(*options)) *testServer {
	t.Helper()
	o := options{
		configPath:  configPath,
		storeKind:   tg.store,
		redisPrefix: fmt.Sprintf("rltest:server:%d:", rand.Uint64()),
		// Real Redis counts TTLs in real time, which passes while the
		// fake clock stands still: keep keys long enough that a slow
		// machine cannot expire one a test still reads (each test
		// deletes its keys at its end).
		redisMargin: 10 * time.Minute,
		stopTimeout: 5 * time.Second,
		// As the flags' defaults.
		redisClient:   "auto",
		redisInFlight: defaultRedisInFlight,
		service: serviceOptions{
			limitHeader: "RateLimit-Limit", remainingHeader: "RateLimit-Remaining", resetHeader: "RateLimit-Reset",
		},
	}
	if tg.addrs != nil {
		o.redisAddrs = tg.addrs(t)
	}
	for _, f := range mod {
		f(&o)
	}
	clk := clock.NewFake(start)
	a, err := newApp(o, clk, slog.New(slog.NewTextHandler(w, nil)))
	if err != nil {
		t.Fatalf("newApp: %v", err)
	}
	if tg.store == "redis" && tg.name != "miniredis" {
		t.Cleanup(func() { deleteKeys(t, o.redisAddrs, o.redisPrefix) })
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- a.serve(ln, nil, nil) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		a.stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testServer{app: a, clk: clk, client: rlspb.NewRateLimitServiceClient(conn), conn: conn, addr: ln.Addr().String()}
}

// deleteKeys removes what a test wrote to a real Redis or cluster.
func deleteKeys(t *testing.T, addrs, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	del := func(c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := c.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	list := strings.Split(addrs, ",")
	var err error
	if len(list) == 1 {
		c := redis.NewClient(&redis.Options{Addr: list[0]})
		err = del(c)
		c.Close()
	} else {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: list})
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return del(m) })
		c.Close()
	}
	if err != nil {
		t.Logf("deleting the test's keys under %s: %v", prefix, err)
	}
}

// exampleConfig is envoyproxy/ratelimit's example configuration, copied.
const exampleConfig = "examples/example.yaml"

// writeConfig writes a configuration file for a test and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// desc is a descriptor of key, value pairs.
func desc(kv ...string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// withHits sets a descriptor's own hits_addend.
func withHits(d *rlcommon.RateLimitDescriptor, n uint64) *rlcommon.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// ask sends ShouldRateLimit for domain and descs.
func (s *testServer) ask(t *testing.T, domain string, descs ...*rlcommon.RateLimitDescriptor) *rlspb.RateLimitResponse {
	t.Helper()
	return s.askReq(t, &rlspb.RateLimitRequest{Domain: domain, Descriptors: descs})
}

func (s *testServer) askReq(t *testing.T, req *rlspb.RateLimitRequest) *rlspb.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.client.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	return res
}

// expectCodes asks and checks the overall code of each answer in turn.
func (s *testServer) expectCodes(t *testing.T, domain string, descs []*rlcommon.RateLimitDescriptor, want ...rlspb.RateLimitResponse_Code) {
	t.Helper()
	for i, w := range want {
		if got := s.ask(t, domain, descs...).OverallCode; got != w {
			t.Fatalf("request %d of %v: overall code %v, want %v", i+1, descs, got, w)
		}
	}
}

const (
	ok   = rlspb.RateLimitResponse_OK
	over = rlspb.RateLimitResponse_OVER_LIMIT
)

// metricsText is what /metrics serves.
func metricsText(t *testing.T, m *metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// syncBuffer is a buffer safe for concurrent writes and reads: a log.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
