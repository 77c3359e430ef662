package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// envSparePorts names the ports tests may start servers of their own on
// (first-last), as for the failover tests; the outage test takes the last.
const envSparePorts = "RATELIMIT_REDIS_SPARE_PORTS"

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// TestBinaryOps: the built server's operations endpoints, as an operator
// meets them: /metrics with histograms and the runtime's and process's
// metrics, pprof on -debug-addr, /json, and a configuration file changed
// on disk taking effect with no signal.
func TestBinaryOps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rl.yaml")
	rewrite(t, path, domainConfig("d", "a"))
	p := startBinary(t, "-config", path, "-debug-addr", "127.0.0.1:0")
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s := &testServer{client: rlspb.NewRateLimitServiceClient(conn)}
	if !s.limited(t, "d", "a") {
		t.Fatal("the configuration is not in force")
	}

	code, body := get(t, "http://"+p.httpAddr+"/metrics")
	for _, want := range []string{"ratelimit_service_response_time_seconds_bucket{", "go_goroutines ", "process_resident_memory_bytes "} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics: %d, lacks %q", code, want)
		}
	}
	if code, body := get(t, "http://"+p.debugAddr+"/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile") {
		t.Errorf("pprof: %d %.200s", code, body)
	}
	res, err := http.Post("http://"+p.httpAddr+"/json", "application/json", strings.NewReader(`{"domain":"d","descriptors":[{"entries":[{"key":"a","value":"x"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), `"requestsPerUnit":1000`) {
		t.Errorf("/json: %d %s", res.StatusCode, b)
	}

	rewrite(t, path, domainConfig("d", "b"))
	waitFor(t, "a changed file in force, no signal", 20*time.Second, func() bool { return s.limited(t, "d", "b") })
	if !strings.Contains(p.log(), `msg="configuration reloaded" cause="change on disk"`) {
		t.Errorf("the reload is not logged:\n%s", p.log())
	}
}

// TestBinaryStoreOutage: the built server on a redis-server of the test's
// own, killed by its PID and started again on its port, with no traffic
// during the outage but the health checks: the probe alone marks the
// health NOT_SERVING (gRPC and /healthcheck), calls are UNAVAILABLE at
// once, the outage and the recovery are logged once each, and the server
// is SERVING again by itself. It runs when RATELIMIT_REDIS_SPARE_PORTS
// names ports (it takes the last) and redis-server is on the PATH.
func TestBinaryStoreOutage(t *testing.T) {
	spec := os.Getenv(envSparePorts)
	if spec == "" {
		t.Skipf("no spare ports: set %s=first-last to run this test", envSparePorts)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not on the PATH")
	}
	_, last, _ := strings.Cut(spec, "-")
	port, err := strconv.Atoi(last)
	if err != nil {
		t.Fatalf("%s=%q: want first-last", envSparePorts, spec)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := t.TempDir()
	var redisCmd *exec.Cmd
	startRedis := func() {
		t.Helper()
		redisCmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--save", "", "--appendonly", "no")
		if err := redisCmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		for i := 0; ; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			info, err := c.Info(ctx, "server").Result()
			cancel()
			if err == nil {
				if !strings.Contains(info, "process_id:"+strconv.Itoa(redisCmd.Process.Pid)+"\r") {
					t.Fatalf("port %d is held by another redis-server", port)
				}
				return
			}
			if i == 100 {
				t.Fatalf("redis-server on %s did not start: %v", addr, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	killRedis := func() {
		redisCmd.Process.Kill()
		redisCmd.Wait()
	}
	startRedis()
	t.Cleanup(func() { killRedis() })

	p := startBinary(t, "-config", exampleConfig, "-store", "redis", "-redis", addr, "-redis-prefix", fmt.Sprintf("rltest:outage:%d:", rand.Uint64()))
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlspb.NewRateLimitServiceClient(conn)
	hc := healthpb.NewHealthClient(conn)
	health := func() (healthpb.HealthCheckResponse_ServingStatus, int) {
		res, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: rlspb.RateLimitService_ServiceDesc.ServiceName})
		if err != nil {
			t.Fatal(err)
		}
		code, _ := get(t, "http://"+p.httpAddr+"/healthcheck")
		return res.Status, code
	}
	call := func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		begin := time.Now()
		_, err := client.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "rl", Descriptors: descs(desc("foo", "x", "baz", "shady"))})
		return time.Since(begin), err
	}
	if _, err := call(); err != nil {
		t.Fatalf("before the outage: %v", err)
	}
	if st, code := health(); st != healthpb.HealthCheckResponse_SERVING || code != 200 {
		t.Fatalf("before the outage: %v, /healthcheck %d", st, code)
	}

	killRedis()
	waitFor(t, "NOT_SERVING and /healthcheck 503, no traffic", 30*time.Second, func() bool {
		st, code := health()
		return st == healthpb.HealthCheckResponse_NOT_SERVING && code == http.StatusServiceUnavailable
	})
	var took []time.Duration
	for range 100 {
		d, err := call()
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("a call during the outage: %v, want UNAVAILABLE", err)
		}
		took = append(took, d)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("100 UNAVAILABLE answers: median %v, p90 %v, max %v", took[50], took[90], took[99])
	if took[50] > time.Second {
		t.Errorf("median UNAVAILABLE answer %v: not at once", took[50])
	}

	startRedis()
	waitFor(t, "SERVING and /healthcheck 200 again", 30*time.Second, func() bool {
		st, code := health()
		return st == healthpb.HealthCheckResponse_SERVING && code == 200
	})
	waitFor(t, "calls decided again", 30*time.Second, func() bool {
		_, err := call()
		return err == nil
	})
	log := p.log()
	if n := strings.Count(log, `msg="store unavailable`); n != 1 {
		t.Errorf("the outage was logged %d times, want once:\n%s", n, log)
	}
	if n := strings.Count(log, `msg="store available again`); n != 1 {
		t.Errorf("the recovery was logged %d times, want once:\n%s", n, log)
	}
	if n := strings.Count(log, "\n"); n > 3 {
		t.Errorf("%d log lines for serving and one outage, want 3:\n%s", n, log)
	}
}
