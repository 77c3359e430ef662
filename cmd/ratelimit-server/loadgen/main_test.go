package main

import (
	"context"
	"net"
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
