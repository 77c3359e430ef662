// Command loadgen measures a rate limit service: it sends ShouldRateLimit
// calls over gRPC from many goroutines for a while and reports the calls
// per second and the latency percentiles. It works against any server of
// envoy.service.ratelimit.v3.RateLimitService (this module's server,
// envoyproxy/ratelimit).
//
// Usage:
//
//	loadgen -addr 127.0.0.1:8081 -domain bench -key user -keys 10000 -concurrency 64 -duration 10s
//
// Each call carries -descriptors descriptors, the i-th of them
// (KEY_i: vN) for the call's key number N (KEY alone for the first), keys
// taken in turn from 0 to -keys−1 by each goroutine from its own offset.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// config is what the flags say.
type config struct {
	addr        string
	domain      string
	key         string
	keys        int
	descriptors int
	concurrency int
	conns       int
	duration    time.Duration
	warmup      time.Duration
}

// result is what a run measured.
type result struct {
	calls, ok, over, errors int
	elapsed                 time.Duration
	p50, p99, p999, max     time.Duration
	firstErr                error
}

func (r result) String() string {
	return fmt.Sprintf("calls %d in %v: %.0f calls/s (OK %d, OVER_LIMIT %d, errors %d); latency p50 %v, p99 %v, p99.9 %v, max %v",
		r.calls, r.elapsed.Round(time.Millisecond), float64(r.calls)/r.elapsed.Seconds(), r.ok, r.over, r.errors,
		r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.p999.Round(time.Microsecond), r.max.Round(time.Microsecond))
}

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

func cli(args []string, stdout, stderr io.Writer) int {
	var c config
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8081", "the rate limit service's gRPC `address`")
	fs.StringVar(&c.domain, "domain", "bench", "the requests' domain")
	fs.StringVar(&c.key, "key", "user", "the descriptors' key")
	fs.IntVar(&c.keys, "keys", 10000, "how many distinct values to cycle through")
	fs.IntVar(&c.descriptors, "descriptors", 1, "descriptors per call")
	fs.IntVar(&c.concurrency, "concurrency", 64, "calls in flight")
	fs.IntVar(&c.conns, "conns", 4, "gRPC connections the callers share")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to measure")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "how long to call before measuring")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if c.keys < 1 || c.descriptors < 1 || c.concurrency < 1 || c.conns < 1 || c.duration <= 0 {
		fmt.Fprintln(stderr, "loadgen: -keys, -descriptors, -concurrency, -conns and -duration must be positive")
		return 2
	}
	r, err := run(context.Background(), c)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	fmt.Fprintln(stdout, r)
	if r.firstErr != nil {
		fmt.Fprintln(stderr, "loadgen: first error:", r.firstErr)
		return 1
	}
	return 0
}

// run calls the service for c.warmup, then measures for c.duration.
func run(ctx context.Context, c config) (result, error) {
	conns := make([]*grpc.ClientConn, c.conns)
	for i := range conns {
		conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return result{}, err
		}
		defer conn.Close()
		conns[i] = conn
	}
	reqs := requests(c)
	workers := make([]worker, c.concurrency)
	measuring := time.Now().Add(c.warmup)
	stop := measuring.Add(c.duration)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(w *worker, client rlspb.RateLimitServiceClient, next int) {
			defer wg.Done()
			w.call(ctx, client, reqs, next, measuring, stop)
		}(&workers[w], rlspb.NewRateLimitServiceClient(conns[w%len(conns)]), w*len(reqs)/len(workers))
	}
	wg.Wait()
	return summary(workers, measuring)
}

// requests returns the requests of a run, one per key, made before the
// run so that the measure is the service's and the client's gRPC, not
// building messages.
func requests(c config) []*rlspb.RateLimitRequest {
	reqs := make([]*rlspb.RateLimitRequest, c.keys)
	for n := range reqs {
		v := "v" + strconv.Itoa(n)
		req := &rlspb.RateLimitRequest{Domain: c.domain}
		for i := range c.descriptors {
			k := c.key
			if i > 0 {
				k += "_" + strconv.Itoa(i)
			}
			req.Descriptors = append(req.Descriptors, &rlcommon.RateLimitDescriptor{
				Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: k, Value: v}},
			})
		}
		reqs[n] = req
	}
	return reqs
}

// worker is what one of a run's callers saw while measuring.
type worker struct {
	lat              []time.Duration
	ok, over, errors int
	firstErr         error
}

// call calls the service with reqs in turn, from reqs[next], until stop,
// and records the calls that start at measuring or later.
func (w *worker) call(ctx context.Context, client rlspb.RateLimitServiceClient, reqs []*rlspb.RateLimitRequest, next int, measuring, stop time.Time) {
	w.lat = make([]time.Duration, 0, 1<<16)
	for {
		t0 := time.Now()
		if !t0.Before(stop) {
			return
		}
		res, err := client.ShouldRateLimit(ctx, reqs[next])
		t1 := time.Now()
		next = (next + 1) % len(reqs)
		if t0.Before(measuring) {
			continue
		}
		w.lat = append(w.lat, t1.Sub(t0))
		switch {
		case err != nil:
			w.errors++
			if w.firstErr == nil {
				w.firstErr = err
			}
		case res.OverallCode == rlspb.RateLimitResponse_OVER_LIMIT:
			w.over++
		default:
			w.ok++
		}
	}
}

// summary adds up the workers' calls since measuring, with their
// latencies' percentiles.
func summary(workers []worker, measuring time.Time) (result, error) {
	var r result
	var all []time.Duration
	for i := range workers {
		w := &workers[i]
		all = append(all, w.lat...)
		r.ok += w.ok
		r.over += w.over
		r.errors += w.errors
		if r.firstErr == nil {
			r.firstErr = w.firstErr
		}
	}
	r.calls = len(all)
	r.elapsed = time.Since(measuring) // the last calls end after stop
	if len(all) == 0 {
		return r, errors.New("no call completed while measuring")
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	r.p50, r.p99, r.p999, r.max = pct(0.50), pct(0.99), pct(0.999), all[len(all)-1]
	return r, nil
}
