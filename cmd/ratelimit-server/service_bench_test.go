package main

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/health"

	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
)

// cannedRunner answers every multi script as Redis would for fixed
// windows far from their limit: each unit admitted, each group's limit
// with 5 remaining. It measures the server's own work per request, with
// no Redis and no network.
type cannedRunner struct{}

func (cannedRunner) Eval(_ context.Context, _ *redisstore.Script, _ bool, _ []string, args redisstore.Args, reply []int64) ([]int64, error) {
	a := args.All()
	units, _ := strconv.Atoi(a[0])
	reply = reply[:0]
	at := 1
	for range units {
		groups, _ := strconv.Atoi(a[at])
		at++
		reply = append(reply, 1)
		for range groups {
			argc, _ := strconv.Atoi(a[at+1])
			at += 3 + argc
			reply = append(reply, 5, 0, 30_000_000)
		}
	}
	return reply, nil
}

func (cannedRunner) EvalStrings(context.Context, *redisstore.Script, []string, []string) ([]string, error) {
	return nil, nil
}

func (cannedRunner) Del(context.Context, []string) error { return nil }

// BenchmarkShouldRateLimit is the server's request path for requests of
// 1 and 2 descriptors on a Redis store whose calls return at once.
func BenchmarkShouldRateLimit(b *testing.B) {
	st, err := redisstore.New[string](cannedRunner{})
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := parseConfig(false, [2]string{"bench.yaml", "domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000}\n  - key: user_1\n    rate_limit: {unit: minute, requests_per_unit: 1000000}\n"})
	if err != nil {
		b.Fatal(err)
	}
	m := newMetrics()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := newService(st, clock.Local(), serviceOptions{}, m, newStoreHealth(log, health.NewServer(), m, nil, 0), log)
	if err := s.setConfig(cfg); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 2} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			req := &rlspb.RateLimitRequest{Domain: "bench", Descriptors: descs(desc("user", "alice"))}
			if n == 2 {
				req.Descriptors = append(req.Descriptors, desc("user_1", "alice"))
			}
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				res, err := s.ShouldRateLimit(ctx, req)
				if err != nil || res.OverallCode != rlspb.RateLimitResponse_OK {
					b.Fatal(res, err)
				}
			}
		})
	}
}
