//go:build unix

package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// contextCallers is how many goroutines decide at once in
// BenchmarkCallerContext: a busy service's requests in flight.
const contextCallers = 256

// BenchmarkCallerContext compares callers whose contexts can end with the
// same callers on context.Background(), on both clients' stores (issue
// 53): 256 goroutines deciding round robin over 10,000 keys, far below a
// generous limit. The contexts:
//
//   - background: context.Background(), which cannot end;
//   - cancel: a context.WithCancel per caller, as an HTTP request's;
//   - deadline=10s: a context.WithTimeout of 10 s per caller, made anew
//     when half of it has passed: a deadline beyond the store's own
//     timeout (3 s, its default);
//   - deadline=2s: the same with 2 s, made anew each second: a deadline
//     shorter than the store's timeout;
//   - deadline=2s-per-call: a context.WithTimeout of 2 s made for each
//     decision, as a gRPC server's per request: the caller's own
//     WithTimeout and cancel are part of its cost.
//
// The callers that make a context per caller measure what the Limiter
// does with a context that can end; the last also what making one costs.
// Besides decisions/s it reports the process's CPU time per decision
// (getrusage: user and system, every goroutine's, the client library's
// included), which a shared machine's load moves far less than wall time.
// Run rounds interleaved (-count repeats the whole set, each store's
// contexts one after the other) and compare medians:
//
//	RATELIMIT_REDIS_ADDR=127.0.0.1:16379 go test -run='^$' -bench=CallerContext -benchtime=4s -count=5 ./ratelimit
func BenchmarkCallerContext(b *testing.B) {
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1 << 30, Rate: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	for _, st := range redisStores(b) {
		lim, err := ratelimit.New(alg, st.New(b), ratelimit.WithName("caller-context"))
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range callerContexts {
			b.Run(st.Name+"/ctx="+c.name, func(b *testing.B) {
				decide(b, lim, keys, c)
			})
		}
	}
}

// callerContext is how a caller of BenchmarkCallerContext makes the
// contexts it decides under.
type callerContext struct {
	name string
	// cancel: a context.WithCancel per caller. timeout: a context with
	// this timeout, per caller made anew when half of it has passed, or
	// per decision with perCall.
	cancel  bool
	timeout time.Duration
	perCall bool
}

var callerContexts = []callerContext{
	{name: "background"},
	{name: "cancel", cancel: true},
	{name: "deadline=10s", timeout: 10 * time.Second},
	{name: "deadline=2s", timeout: 2 * time.Second},
	{name: "deadline=2s-per-call", timeout: 2 * time.Second, perCall: true},
}

// decide makes b.N decisions of lim with contextCallers goroutines, each
// on contexts made as cc says, and reports decisions/s and CPU µs per
// decision.
func decide(b *testing.B, lim *ratelimit.Limiter[string], keys []string, cc callerContext) {
	var next, failed, denied atomic.Int64
	var wg sync.WaitGroup
	cpu0 := processCPU(b)
	b.ReportAllocs()
	b.ResetTimer()
	for c := range contextCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ctx callerCtx
			defer ctx.end()
			if cc.cancel {
				ctx.ctx, ctx.cancel = context.WithCancel(context.Background())
			}
			i := c * 7919 % len(keys)
			for next.Add(1) <= int64(b.N) {
				if cc.timeout > 0 && (cc.perCall || time.Now().After(ctx.renew)) {
					ctx.end()
					ctx.ctx, ctx.cancel = context.WithTimeout(context.Background(), cc.timeout)
					if !cc.perCall {
						ctx.renew = time.Now().Add(cc.timeout / 2)
					}
				}
				d, err := lim.Allow(ctx.context(), keys[i])
				if err != nil {
					if failed.Add(1) == 1 {
						b.Error(err)
					}
				} else if !d.Allowed() {
					denied.Add(1)
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cpu := processCPU(b) - cpu0
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d decisions failed", n, b.N)
	}
	if n := denied.Load(); n > 0 {
		b.Fatalf("%d of %d decisions denied; the limit should never be reached", n, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/decision")
}

// callerCtx is a caller's context, and how it ends.
type callerCtx struct {
	ctx    context.Context // nil: context.Background()
	cancel context.CancelFunc
	renew  time.Time // when to make it anew
}

func (c *callerCtx) context() context.Context {
	if c.ctx == nil {
		return context.Background()
	}
	return c.ctx
}

func (c *callerCtx) end() {
	if c.cancel != nil {
		c.cancel()
	}
}

// processCPU is the CPU time the process has used so far, user and
// system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
