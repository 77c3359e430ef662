package main

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// fakeService answers OVER_LIMIT to values ending in 1, OK to the others,
// and remembers how many descriptors each call carried.
type fakeService struct {
	rlspb.UnimplementedRateLimitServiceServer
	mu     sync.Mutex
	counts map[int]int
	calls  int
}

func (f *fakeService) ShouldRateLimit(_ context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	f.mu.Lock()
	f.counts[len(req.Descriptors)]++
	f.calls++
	f.mu.Unlock()
	if strings.HasSuffix(req.Descriptors[0].Entries[0].Value, "1") {
		return &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OVER_LIMIT}, nil
	}
	return &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK}, nil
}

func TestRun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	fake := &fakeService{counts: map[int]int{}}
	rlspb.RegisterRateLimitServiceServer(srv, fake)
	go srv.Serve(ln)
	defer srv.Stop()

	r, err := run(context.Background(), config{
		addr: ln.Addr().String(), domain: "bench", key: "user", keys: 10, descriptors: 2,
		concurrency: 4, conns: 2, duration: 200 * time.Millisecond, warmup: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.calls == 0 || r.ok+r.over+r.errors != r.calls || r.errors != 0 {
		t.Fatalf("result %v: calls do not add up", r)
	}
	// One value in 10 ends in 1; each goroutine cycles through all.
	if r.over == 0 || r.ok < 5*r.over {
		t.Fatalf("result %v: want about 1 over in 10", r)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.counts[2] != fake.calls || fake.calls < r.calls {
		t.Fatalf("the service saw %v descriptors per call over %d calls, want 2 in each of at least %d", fake.counts, fake.calls, r.calls)
	}
	if !(r.p50 <= r.p99 && r.p99 <= r.p999 && r.p999 <= r.max) {
		t.Fatalf("percentiles out of order: %v", r)
	}
}

// TestCPU: with -pid and -redis, a run reports the CPU time the server
// and Redis spent per call while measuring. The server here is the test
// process itself; Redis is RATELIMIT_REDIS_ADDR's when set.
func TestCPU(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(srv, &fakeService{counts: map[int]int{}})
	go srv.Serve(ln)
	defer srv.Stop()
	c := config{
		addr: ln.Addr().String(), domain: "bench", key: "user", keys: 10, descriptors: 1,
		concurrency: 4, conns: 1, duration: 300 * time.Millisecond, warmup: 50 * time.Millisecond,
		pid: os.Getpid(), redis: os.Getenv("RATELIMIT_REDIS_ADDR"),
	}
	r, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.serverCPU <= 0 || r.perCall(r.serverCPU) > 10000 {
		t.Errorf("server CPU %v over %d calls: want some, and under 10 ms a call", r.serverCPU, r.calls)
	}
	if c.redis == "" && r.redisCPU != -1 || c.redis != "" && r.redisCPU < 0 {
		t.Errorf("Redis CPU %v with -redis %q", r.redisCPU, c.redis)
	}
	cols := strings.Split(r.TSV(), "\t")
	if len(cols) != len(strings.Split(tsvHeader, "\t")) || cols[6] == "-" || (c.redis == "") != (cols[7] == "-") {
		t.Errorf("TSV %q does not match its header %q", r.TSV(), tsvHeader)
	}
	if !strings.Contains(r.String(), "µs/call") {
		t.Errorf("%s: no CPU per call", r)
	}
}

// TestProcessCPU reads /proc/PID/stat: a process's CPU time only grows,
// and a process that does not exist is an error.
func TestProcessCPU(t *testing.T) {
	a, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for x, end := 0, time.Now().Add(50*time.Millisecond); time.Now().Before(end); x++ {
		_ = x * x
	}
	b, err := processCPU(os.Getpid())
	if err != nil || b < a {
		t.Fatalf("CPU time %v then %v, %v", a, b, err)
	}
	if _, err := processCPU(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
