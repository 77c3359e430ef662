package ratelimit_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// waitRun is what one run of waiters measured.
type waitRun struct {
	calls   float64         // script calls per admission
	late    []time.Duration // each admission's lateness, in order of admission
	order   int             // admissions out of booking order
	elapsed time.Duration
}

// runWaiters starts n goroutines that each book one request on one key of
// lim (a bucket of 1 refilled every interval) and sleep until it is due,
// as WaitN does, recording when each booking is due and when the sleep
// ends: how late each lands after its booked instant, and how many land
// before one booked ahead of them.
func runWaiters(tb testing.TB, lim *ratelimit.Limiter[string], key string, n int, interval time.Duration, stats func() (int64, int64)) waitRun {
	ctx := context.Background()
	type woke struct{ due, at time.Time }
	var mu sync.Mutex
	var all []woke
	var wg sync.WaitGroup
	calls0, _ := stats()
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := lim.Reserve(ctx, key)
			if err != nil || !r.OK() {
				tb.Errorf("Reserve: %v, %v", r, err)
				return
			}
			due := time.Now().Add(r.Delay())
			time.Sleep(r.Delay())
			mu.Lock()
			all = append(all, woke{due, time.Now()})
			mu.Unlock()
		}()
	}
	wg.Wait()
	run := waitRun{elapsed: time.Since(start)}
	calls1, _ := stats()
	run.calls = float64(calls1-calls0) / float64(n)
	slices.SortFunc(all, func(a, b woke) int { return a.at.Compare(b.at) })
	for k, w := range all {
		run.late = append(run.late, w.at.Sub(w.due))
		if k > 0 && w.due.Before(all[k-1].due.Add(-interval/2)) {
			run.order++
		}
	}
	return run
}

// scriptCounter counts the scripts a go-redis client has Redis run (EVAL
// and EVALSHA): the server's INFO commandstats would count the other test
// packages' calls too. An EVALSHA answered NOSCRIPT ran nothing and is
// not counted (the EVAL that follows is): other packages' tests SCRIPT
// FLUSH the same server at times of their own. With lag, each script is
// sent that much late, as by a slower server or network.
type scriptCounter struct {
	n   atomic.Int64
	lag time.Duration
}

func (h *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := cmd.Name()
		script := name == "eval" || name == "evalsha" || name == "eval_ro" || name == "evalsha_ro"
		if script && h.lag > 0 {
			time.Sleep(h.lag)
		}
		err := next(ctx, cmd)
		if script {
			if err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
				h.n.Add(1)
			}
		}
		return err
	}
}

func (h *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestWaitersOneCallEach: 200 goroutines waiting on one key of a real
// Redis make at most 1.05 script calls per admission (a herd that wakes
// together and asks again made 92.7 before bookings), every one is
// admitted, and the last no sooner than the bucket allows.
func TestWaitersOneCallEach(t *testing.T) {
	target := redistest.Standalone(t)
	client := redistest.GoRedis(t, target)
	var calls scriptCounter
	client.AddHook(&calls)
	st, err := goredisstore.New[string](client, goredisstore.WithPrefix[string](redistest.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	const n, interval = 200, 2 * time.Millisecond
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: float64(time.Second / interval)})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st, ratelimit.WithName("waiters"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d, err := lim.Wait(ctx, "waiters"); err != nil || !d.Allowed() {
				t.Errorf("Wait: %v, %v", d, err)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	perAdmission := float64(calls.n.Load()) / n
	t.Logf("%d waiters: %.3f script calls per admission, all admitted in %v", n, perAdmission, elapsed)
	if perAdmission > 1.05 {
		t.Errorf("%.3f script calls per admission, want at most 1.05", perAdmission)
	}
	if min := (n - 1) * interval; elapsed < min {
		t.Errorf("%d admitted in %v: the bucket admits them no faster than %v", n, elapsed, min)
	}
}

// BenchmarkWaiters measures 200 waiters on one key of a real Redis (a
// bucket of 1 refilled every 2 ms), through both clients: script calls per
// admission, how late each admission lands after the instant it
// was booked for (p50, p99, max), and how many land out of booking order:
//
//	RATELIMIT_REDIS_ADDR=127.0.0.1:16379 go test -run='^$' -bench=Waiters -benchtime=5x ./ratelimit
func BenchmarkWaiters(b *testing.B) {
	target := redistest.Standalone(b)
	info := redistest.GoRedis(b, target)
	const n, interval = 200, 2 * time.Millisecond
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: float64(time.Second / interval)})
	if err != nil {
		b.Fatal(err)
	}
	for _, st := range redisStores(b) {
		b.Run(fmt.Sprintf("%s/waiters=%d", st.Name, n), func(b *testing.B) {
			lim, err := ratelimit.New(alg, st.New(b), ratelimit.WithName("waiters"))
			if err != nil {
				b.Fatal(err)
			}
			var late []time.Duration
			var calls float64
			var order int
			for i := range b.N {
				run := runWaiters(b, lim, fmt.Sprintf("w%d", i), n, interval, func() (int64, int64) { return scriptStats(b, info) })
				late = append(late, run.late...)
				calls += run.calls
				order += run.order
				time.Sleep(5 * interval) // the bucket refills between runs
			}
			slices.Sort(late)
			b.ReportMetric(calls/float64(b.N), "calls/admission")
			b.ReportMetric(float64(late[len(late)/2].Microseconds())/1000, "p50-late-ms")
			b.ReportMetric(float64(late[len(late)*99/100].Microseconds())/1000, "p99-late-ms")
			b.ReportMetric(float64(late[len(late)-1].Microseconds())/1000, "max-late-ms")
			b.ReportMetric(float64(order)/float64(b.N), "out-of-order")
		})
	}
}
