package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// binary is the server built once for the tests that run it.
var binary struct {
	once sync.Once
	path string
	err  error
}

func buildBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "ratelimit-server-test")
		if err != nil {
			binary.err = err
			return
		}
		binary.path = filepath.Join(dir, "ratelimit-server")
		args := []string{"build", "-o", binary.path}
		if raceEnabled {
			// The packages are in the build cache as the race
			// detector built them for this test: only the link is left.
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.path != "" {
		os.RemoveAll(filepath.Dir(binary.path))
	}
	os.Exit(code)
}

// TestBinaryBadConfigs: the built server refuses each of
// envoyproxy/ratelimit's bad configurations at start, exiting with status
// 1 and a message naming the file and the fault.
func TestBinaryBadConfigs(t *testing.T) {
	bin := buildBinary(t)
	for _, c := range badConfigs {
		path := filepath.Join("testdata", "bad", c.file)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, "-config", path, "-grpc-addr", "127.0.0.1:0")
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("%s: exit %v, want status 1; output:\n%s", c.file, err, out)
			continue
		}
		if !strings.Contains(string(out), path+":") || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: output %q, want the file and %q", c.file, out, c.want)
		}
	}
}

// TestBinaryCheck: -check loads the configuration and exits, 0 when it
// loads and 1 with the fault when it does not, serving nothing.
func TestBinaryCheck(t *testing.T) {
	bin := buildBinary(t)
	out, err := exec.Command(bin, "-check", "-config", "examples").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "examples: 2 domains in 2 files") {
		t.Errorf("-check of examples: %v, %q", err, out)
	}
	path := filepath.Join("testdata", "bad", "replaces_self.yaml")
	out, err = exec.Command(bin, "-check", "-config", path).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), path+":") {
		t.Errorf("-check of %s: %v, %q", path, err, out)
	}
}

// process is a running server binary.
type process struct {
	cmd      *exec.Cmd
	grpcAddr string
	httpAddr string
	// debugAddr is -debug-addr's, when the arguments ask for one.
	debugAddr string
	exited    chan error
	logs      *strings.Builder
	logMu     *sync.Mutex
}

var servingLine = regexp.MustCompile(`msg=serving grpc=(\S+) .*http=(\S+)(?: debug=(\S+))?`)

// startBinary runs the server with args (and gRPC and HTTP on free ports)
// and waits for it to say where it serves.
func startBinary(t *testing.T, args ...string) *process {
	t.Helper()
	bin := buildBinary(t)
	args = append(args, "-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0")
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, exited: make(chan error, 1), logs: &strings.Builder{}, logMu: &sync.Mutex{}}
	addrs := make(chan [3]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.logMu.Lock()
			p.logs.WriteString(line + "\n")
			p.logMu.Unlock()
			if m := servingLine.FindStringSubmatch(line); m != nil {
				addrs <- [3]string{m[1], m[2], m[3]}
			}
		}
		io.Copy(io.Discard, stderr)
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	select {
	case a := <-addrs:
		p.grpcAddr, p.httpAddr, p.debugAddr = a[0], a[1], a[2]
	case err := <-p.exited:
		t.Fatalf("server exited before serving: %v\n%s", err, p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not say where it serves within 30s:\n%s", p.log())
	}
	return p
}

func (p *process) log() string {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return p.logs.String()
}

// metric reads a counter from /metrics.
func (p *process) metric(t *testing.T, name string) string {
	t.Helper()
	res, err := http.Get("http://" + p.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// waitMetric polls a counter until it reads want, for up to 10 seconds.
func (p *process) waitMetric(t *testing.T, name, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := p.metric(t, name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %q, want %q within 10s; log:\n%s", name, got, want, p.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBinary runs the built server on envoyproxy/ratelimit's example
// configuration, on every store the environment offers: the trigger case,
// health, metrics, a reload that fails and one that works, and a
// graceful stop on SIGTERM.
func TestBinary(t *testing.T) {
	for _, tg := range targets {
		if tg.name == "miniredis" {
			continue // the in-process tests cover it
		}
		t.Run(tg.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "example.yaml")
			example, err := os.ReadFile(exampleConfig)
			if err != nil {
				t.Fatal(err)
			}
			rewrite(t, path, string(example))
			args := []string{"-config", dir, "-store", tg.store, "-watch=false"}
			if tg.addrs != nil {
				prefix := fmt.Sprintf("rltest:server:%d:", rand.Uint64())
				addrs := tg.addrs(t)
				args = append(args, "-redis", addrs, "-redis-prefix", prefix)
				t.Cleanup(func() { deleteKeys(t, addrs, prefix) })
			}
			p := startBinary(t, args...)
			conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			s := &testServer{client: rlspb.NewRateLimitServiceClient(conn)}

			h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
			if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health: %v %v", h, err)
			}
			res, err := http.Get("http://" + p.httpAddr + "/healthcheck")
			if err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("/healthcheck: %v %v", res, err)
			}
			res.Body.Close()
			triggerOnRealClock(t, s)

			// A reload that fails keeps the configuration in force.
			rewrite(t, path, "domain: rl\ndescriptors:\n  - key: foo\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
			p.cmd.Process.Signal(syscall.SIGHUP)
			p.waitMetric(t, "ratelimit_service_config_load_error", "1")
			if !strings.Contains(p.log(), "invalid rate limit unit 'fortnight'") {
				t.Errorf("the failed reload's fault is not logged:\n%s", p.log())
			}
			s.expectCodes(t, "rl", descs(desc("qux", "q")), ok)
			s.expectCodes(t, "rl", descs(desc("foo", "b", "bar", "banned")), over)
			// One that loads replaces it: (foo, bar: banned) gets a bucket of
			// 1, refilled once an hour (no window edge for the two requests
			// to straddle).
			rewrite(t, path, "domain: rl\ndescriptors:\n  - key: foo\n    descriptors:\n      - key: bar\n        rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket}\n")
			p.cmd.Process.Signal(syscall.SIGHUP)
			p.waitMetric(t, "ratelimit_service_config_load_success", "2")
			s.expectCodes(t, "rl", descs(desc("foo", "b", "bar", "banned")), ok, over)

			p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-p.exited:
				if err != nil {
					t.Fatalf("exit after SIGTERM: %v\n%s", err, p.log())
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no exit within 20s of SIGTERM:\n%s", p.log())
			}
		})
	}
}

// triggerOnRealClock is the done-when case on the wall clock: (foo,
// baz: not-so-shady) is OK 3 times with 2, 1, 0 remaining of 3 per
// MINUTE, then over; (foo, baz: shady) never is. The four requests must
// fall in one minute; when a minute ends amid them they are tried again
// on another foo.
func triggerOnRealClock(t *testing.T, s *testServer) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		begin := time.Now()
		d := desc("foo", fmt.Sprintf("pelle-%d", attempt), "baz", "not-so-shady")
		var got []string
		for range 4 {
			res := s.ask(t, "rl", d)
			st := res.Statuses[0]
			got = append(got, fmt.Sprintf("%v %d %d/%v", res.OverallCode, st.LimitRemaining, st.CurrentLimit.GetRequestsPerUnit(), st.CurrentLimit.GetUnit()))
		}
		if begin.Truncate(time.Minute) != time.Now().Truncate(time.Minute) && attempt < 3 {
			continue
		}
		want := []string{"OK 2 3/MINUTE", "OK 1 3/MINUTE", "OK 0 3/MINUTE", "OVER_LIMIT 0 3/MINUTE"}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Fatalf("(foo, baz: not-so-shady): %v, want %v", got, want)
		}
		break
	}
	s.expectCodes(t, "rl", descs(desc("foo", "pelle", "baz", "shady")), ok, ok, ok, ok, ok)
}

// TestRedisClientFlags: -redis-client picks go-redis for one address and
// rueidis for a cluster unless told, -redis-in-flight defaults to one
// call in flight, and values outside them are refused.
func TestRedisClientFlags(t *testing.T) {
	o, err := parseFlags([]string{"-config", "x.yaml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.redisClient != "auto" || o.redisInFlight != defaultRedisInFlight {
		t.Errorf("defaults: -redis-client %q, -redis-in-flight %d; want auto, %d", o.redisClient, o.redisInFlight, defaultRedisInFlight)
	}
	for _, args := range [][]string{{"-redis-client", "redigo"}, {"-redis-in-flight", "-1"}} {
		if _, err := parseFlags(append([]string{"-config", "x.yaml"}, args...), io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	for _, args := range [][]string{{"-redis-client", "rueidis"}, {"-redis-client", "go-redis", "-redis-in-flight", "0"}} {
		if _, err := parseFlags(append([]string{"-config", "x.yaml"}, args...), io.Discard); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}
