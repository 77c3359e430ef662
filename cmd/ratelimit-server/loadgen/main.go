// Command loadgen measures a rate limit service: it sends ShouldRateLimit
// calls over gRPC from many goroutines for a while and reports the calls
// per second and the latency percentiles. It works against any server of
// envoy.service.ratelimit.v3.RateLimitService (this module's server,
// envoyproxy/ratelimit).
//
// Usage:
//
//	loadgen -addr 127.0.0.1:8081 -domain bench -key user -keys 10000 -concurrency 64 -duration 10s
//	loadgen -addr 127.0.0.1:8081 -pid 1234 -redis 127.0.0.1:6379 -format tsv
//
// Each call carries -descriptors descriptors, the i-th of them
// (KEY_i: vN) for the call's key number N (KEY alone for the first), keys
// taken in turn from 0 to -keys−1 by each goroutine from its own offset.
//
// With -pid, the CPU time the server's process spent while measuring
// (user and system, from /proc/PID/stat) is reported per call; with
// -redis, Redis's (used_cpu_user and used_cpu_sys of INFO cpu). CPU per
// call is the figure that holds on a machine others share, where calls
// per second move with their load.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
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
	pid         int    // the server's process, for its CPU time; 0: none
	redis       string // the Redis whose CPU time to read; "": none
	format      string // text or tsv
}

// result is what a run measured.
type result struct {
	calls, ok, over, errors int
	elapsed                 time.Duration
	p50, p99, p999, max     time.Duration
	firstErr                error
	// CPU time the server and Redis spent while measuring; -1 when not
	// measured.
	serverCPU, redisCPU time.Duration
}

func (r result) String() string {
	s := fmt.Sprintf("calls %d in %v: %.0f calls/s (OK %d, OVER_LIMIT %d, errors %d); latency p50 %v, p99 %v, p99.9 %v, max %v",
		r.calls, r.elapsed.Round(time.Millisecond), float64(r.calls)/r.elapsed.Seconds(), r.ok, r.over, r.errors,
		r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.p999.Round(time.Microsecond), r.max.Round(time.Microsecond))
	if r.serverCPU >= 0 {
		s += fmt.Sprintf("; server CPU %.1f µs/call", r.perCall(r.serverCPU))
	}
	if r.redisCPU >= 0 {
		s += fmt.Sprintf("; Redis CPU %.1f µs/call", r.perCall(r.redisCPU))
	}
	return s
}

// perCall is d per call, in microseconds.
func (r result) perCall(d time.Duration) float64 {
	return float64(d) / float64(time.Microsecond) / float64(r.calls)
}

// tsvHeader heads the columns of result.TSV.
const tsvHeader = "calls_per_s\tp50_us\tp99_us\tok\tover\terrors\tserver_cpu_us_per_call\tredis_cpu_us_per_call"

// TSV is r as one line of tab-separated columns (tsvHeader); a CPU time
// not measured is "-".
func (r result) TSV() string {
	cpu := func(d time.Duration) string {
		if d < 0 {
			return "-"
		}
		return strconv.FormatFloat(r.perCall(d), 'f', 2, 64)
	}
	us := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 0, 64)
	}
	return fmt.Sprintf("%.0f\t%s\t%s\t%d\t%d\t%d\t%s\t%s", float64(r.calls)/r.elapsed.Seconds(), us(r.p50), us(r.p99),
		r.ok, r.over, r.errors, cpu(r.serverCPU), cpu(r.redisCPU))
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
	fs.IntVar(&c.pid, "pid", 0, "the server's process `id`, to report its CPU time per call (Linux /proc)")
	fs.StringVar(&c.redis, "redis", "", "Redis `addresses` (comma-separated: a cluster's masters), to report their CPU time per call (INFO cpu, summed)")
	fs.StringVar(&c.format, "format", "text", "output: text, or tsv (a header line and a line of columns)")
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
	if c.format != "text" && c.format != "tsv" {
		fmt.Fprintf(stderr, "loadgen: -format %q: want text or tsv\n", c.format)
		return 2
	}
	r, err := run(context.Background(), c)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	if c.format == "tsv" {
		fmt.Fprintln(stdout, tsvHeader)
		fmt.Fprintln(stdout, r.TSV())
	} else {
		fmt.Fprintln(stdout, r)
	}
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
	var rdbs []*redis.Client
	if c.redis != "" {
		for addr := range strings.SplitSeq(c.redis, ",") {
			rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSpace(addr)})
			defer rdb.Close()
			rdbs = append(rdbs, rdb)
		}
	}
	cpu := func() (server, redis time.Duration, err error) {
		server, redis = -1, -1
		if c.pid != 0 {
			if server, err = processCPU(c.pid); err != nil {
				return
			}
		}
		if rdbs != nil {
			redis = 0
			for _, rdb := range rdbs {
				var d time.Duration
				if d, err = redisCPU(ctx, rdb); err != nil {
					return
				}
				redis += d
			}
		}
		return
	}
	if _, _, err := cpu(); err != nil {
		return result{}, err
	}
	reqs := requests(c)
	workers := make([]worker, c.concurrency)
	measuring := time.Now().Add(c.warmup)
	stop := measuring.Add(c.duration)
	var (
		server0, redis0 time.Duration
		cpuErr          error
		sampled         = make(chan struct{})
	)
	go func() { // the CPU times when measuring begins
		defer close(sampled)
		time.Sleep(time.Until(measuring))
		server0, redis0, cpuErr = cpu()
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(w *worker, client rlspb.RateLimitServiceClient, next int) {
			defer wg.Done()
			w.call(ctx, client, reqs, next, measuring, stop)
		}(&workers[w], rlspb.NewRateLimitServiceClient(conns[w%len(conns)]), w*len(reqs)/len(workers))
	}
	wg.Wait()
	<-sampled
	server1, redis1, err := cpu()
	if err = errors.Join(cpuErr, err); err != nil {
		return result{}, err
	}
	r, err := summary(workers, measuring)
	r.serverCPU, r.redisCPU = -1, -1
	if server0 >= 0 {
		r.serverCPU = server1 - server0
	}
	if redis0 >= 0 {
		r.redisCPU = redis1 - redis0
	}
	return r, err
}

// clockTicks is the unit of /proc/PID/stat's times (USER_HZ, 100 on
// every Linux architecture Go runs on).
const clockTicks = 100

// processCPU is the CPU time (user and system) process pid has used, all
// its threads, those that ended included.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid …: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// redisCPU is the CPU time (used_cpu_user plus used_cpu_sys) Redis has
// used.
func redisCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO cpu: %w", err)
	}
	var total float64
	found := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("redis INFO cpu: %s: %w", k, err)
			}
			total += f
			found++
		}
	}
	if found != 2 {
		return 0, fmt.Errorf("redis INFO cpu has no used_cpu_user and used_cpu_sys: %q", info)
	}
	return time.Duration(total * float64(time.Second)), nil
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
