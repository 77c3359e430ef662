package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// evalCall is a script call that reached fakeRunner, waiting for its
// answer.
type evalCall struct {
	ctx    context.Context
	script *Script
	argv   []string
	answer chan evalAnswer
}

type evalAnswer struct {
	reply []int64
	strs  []string // an EvalStrings's reply
	err   error
}

// fakeRunner hands every Eval to the test on calls and returns the
// answer the test gives, or the context's error when it ends first, as a
// client does.
type fakeRunner struct{ calls chan *evalCall }

func (r *fakeRunner) Eval(ctx context.Context, s *Script, _ bool, _ []string, args Args, _ []int64) ([]int64, error) {
	c := &evalCall{ctx: ctx, script: s, argv: args.All(), answer: make(chan evalAnswer, 1)}
	r.calls <- c
	select {
	case a := <-c.answer:
		return a.reply, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *fakeRunner) EvalStrings(ctx context.Context, s *Script, _ []string, args []string) ([]string, error) {
	c := &evalCall{ctx: ctx, script: s, argv: args, answer: make(chan evalAnswer, 1)}
	r.calls <- c
	select {
	case a := <-c.answer:
		return a.strs, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *fakeRunner) Del(context.Context, []string) error { return nil }

// requests returns the times and costs the call carries, in order.
func (c *evalCall) requests(t *testing.T) (nows, costs []string) {
	t.Helper()
	if c.script.Name[:6] != "batch:" {
		return c.argv[:1], c.argv[1:2]
	}
	n, err := strconv.Atoi(c.argv[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		nows, costs = append(nows, c.argv[1+2*i]), append(costs, c.argv[2+2*i])
	}
	return nows, costs
}

// replyFor is a well-formed reply to the call's requests: the i-th
// admitted with 1000 - now remaining.
func (c *evalCall) replyFor(t *testing.T) []int64 {
	nows, _ := c.requests(t)
	var reply []int64
	for _, now := range nows {
		n, _ := strconv.ParseInt(now, 10, 64)
		reply = append(reply, 1000-n, 0, 0)
	}
	return reply
}

func coalescingTable(t *testing.T) (*Table[string], *fakeRunner) {
	t.Helper()
	return coalescingTableOf(t, DefaultInFlight)
}

func coalescingTableOf(t *testing.T, inFlight int) (*Table[string], *fakeRunner) {
	t.Helper()
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1000, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	run := &fakeRunner{calls: make(chan *evalCall)}
	tab, err := open[string](run, config[string]{InFlight: inFlight}, store.LimitsOf(alg), clock.Local())
	if err != nil {
		t.Fatal(err)
	}
	return tab, run
}

// waitQueued waits until n requests wait in key's line.
func waitQueued(t *testing.T, tab *Table[string], key string, n int) {
	t.Helper()
	name, err := tab.Key(key)
	if err != nil {
		t.Fatal(err)
	}
	sh := tab.lines.shard(name)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		sh.mu.Lock()
		ln := sh.m[name]
		got := 0
		if ln != nil {
			got = len(ln.waiting)
		}
		sh.mu.Unlock()
		if got == n {
			return
		}
	}
	t.Fatalf("%d requests never waited in line", n)
}

// busy starts DefaultInFlight Takes of key, at 1, 2…, which go alone, and
// returns their calls, unanswered, and their outcomes.
func busy(t *testing.T, tab *Table[string], run *fakeRunner, key string) ([]*evalCall, []chan taken) {
	t.Helper()
	var calls []*evalCall
	var outs []chan taken
	for i := range tab.inFlight {
		outs = append(outs, take(t.Context(), tab, key, int64(1+i)))
		c := next(t, run)
		if c.script != runScript(tab.script) {
			t.Fatalf("a Take with fewer than DefaultInFlight in flight ran %s, want the decision script", c.script.Name)
		}
		calls = append(calls, c)
	}
	return calls, outs
}

// answer answers calls and checks their outcomes.
func answer(t *testing.T, calls []*evalCall, outs []chan taken) {
	t.Helper()
	for i, c := range calls {
		c.answer <- evalAnswer{reply: c.replyFor(t)}
		if o := result(t, outs[i]); o.err != nil {
			t.Fatalf("a Take alone: %v", o.err)
		}
	}
}

type taken struct {
	r   algorithm.Result
	err error
}

// take starts a Take of key at now; its result arrives on the channel.
func take(ctx context.Context, tab *Table[string], key string, now int64) chan taken {
	out := make(chan taken, 1)
	go func() {
		r, err := tab.Take(ctx, key, now, 1, nil)
		out <- taken{r, err}
	}()
	return out
}

func next(t *testing.T, run *fakeRunner) *evalCall {
	t.Helper()
	select {
	case c := <-run.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no call reached the runner")
		return nil
	}
}

// result receives what a call started in a goroutine returned (a Take's
// or a booking operation's).
func result[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("a call never returned")
		var zero T
		return zero
	}
}

// TestCoalesceInOrder: Takes that arrive while one is in flight go, once
// it returns, in one batch call carrying them in arrival order, and each
// gets its own result; the key is then forgotten.
func TestCoalesceInOrder(t *testing.T) {
	for _, inFlight := range []int{1, 3, DefaultInFlight} {
		t.Run(fmt.Sprint("inflight=", inFlight), func(t *testing.T) { testCoalesceInOrder(t, inFlight) })
	}
}

func testCoalesceInOrder(t *testing.T, inFlight int) {
	tab, run := coalescingTableOf(t, inFlight)
	ctx := t.Context()
	alone, first := busy(t, tab, run, "k")
	var later []chan taken
	for i := range 5 {
		later = append(later, take(ctx, tab, "k", int64(10+i)))
		waitQueued(t, tab, "k", i+1)
	}
	answer(t, alone[:1], first[:1])
	batch := next(t, run)
	if batch.script != runScript(tab.batch) {
		t.Fatalf("the waiting Takes ran %s, want the batch script", batch.script.Name)
	}
	nows, _ := batch.requests(t)
	if fmt.Sprint(nows) != "[10 11 12 13 14]" {
		t.Fatalf("batch of times %v, want them in arrival order", nows)
	}
	batch.answer <- evalAnswer{reply: batch.replyFor(t)}
	for i, ch := range later {
		if o := result(t, ch); o.err != nil || o.r.Remaining != int64(990-i) {
			t.Errorf("Take %d: %+v, want its own result", i, o)
		}
	}
	answer(t, alone[1:], first[1:])
	waitForgotten(t, tab)
}

// waitForgotten waits until no key is in flight.
func waitForgotten(t *testing.T, tab *Table[string]) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		n := 0
		for i := range tab.lines.shards {
			sh := &tab.lines.shards[i]
			sh.mu.Lock()
			n += len(sh.m)
			sh.mu.Unlock()
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("a key stayed in flight")
}

// TestCoalesceQueuedLeaves: a waiting Take whose context ends leaves the
// line at once, never sent (so never charged), with the context's error;
// the others go without it.
func TestCoalesceQueuedLeaves(t *testing.T) {
	tab, run := coalescingTable(t)
	alone, first := busy(t, tab, run, "k")
	ctx, cancel := context.WithCancel(t.Context())
	leaving := take(ctx, tab, "k", 2)
	waitQueued(t, tab, "k", 1)
	staying := take(t.Context(), tab, "k", 3)
	waitQueued(t, tab, "k", 2)
	cancel()
	if o := result(t, leaving); !errors.Is(o.err, store.ErrUnavailable) || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("the Take whose context ended: %v, want store.ErrUnavailable and context.Canceled", o.err)
	}
	waitQueued(t, tab, "k", 1)
	answer(t, alone, first)
	c := next(t, run)
	if nows, _ := c.requests(t); fmt.Sprint(nows) != "[3]" {
		t.Fatalf("sent %v, want only the Take that stayed", nows)
	}
	c.answer <- evalAnswer{reply: c.replyFor(t)}
	if o := result(t, staying); o.err != nil || o.r.Remaining != 997 {
		t.Fatalf("the Take that stayed: %+v", o)
	}
	waitForgotten(t, tab)
}

// TestCoalesceDeadlines: a batch's call is bounded by the table's own
// Timeout, whatever its requests' deadlines (none, or an hour): a client
// choosing a short deadline cannot fail the others' requests, nor a long
// one hold the call. Its own Take returns at its deadline, with an
// unknown taken.
func TestCoalesceDeadlines(t *testing.T) {
	for _, latest := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprint("latest=", latest), func(t *testing.T) {
			tab, run := coalescingTable(t)
			alone, first := busy(t, tab, run, "k")
			short, cancelShort := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancelShort()
			hurried := take(short, tab, "k", 2)
			waitQueued(t, tab, "k", 1)
			long := t.Context()
			if latest > 0 {
				var cancel context.CancelFunc
				long, cancel = context.WithTimeout(long, latest)
				defer cancel()
			}
			patient := take(long, tab, "k", 3)
			waitQueued(t, tab, "k", 2)
			sent := time.Now()
			answer(t, alone, first)
			batch := next(t, run)
			checkOwnBound(t, tab, batch.ctx, sent)
			if o := result(t, hurried); !errors.Is(o.err, store.ErrUnavailable) || !errors.Is(o.err, context.DeadlineExceeded) {
				t.Fatalf("the Take with the short deadline: %v", o.err)
			}
			if err := batch.ctx.Err(); err != nil {
				t.Fatalf("the batch's call ended with the short deadline: %v", err)
			}
			batch.answer <- evalAnswer{reply: batch.replyFor(t)}
			if o := result(t, patient); o.err != nil || o.r.Remaining != 997 {
				t.Fatalf("the Take with the long deadline: %+v", o)
			}
			waitForgotten(t, tab)
		})
	}
}

// batchOf starts a call in flight with n Takes waiting behind it,
// answers the call, and returns the batch call and the waiting Takes.
func batchOf(t *testing.T, tab *Table[string], run *fakeRunner, n int) (*evalCall, []chan taken) {
	t.Helper()
	alone, first := busy(t, tab, run, "k")
	var waiting []chan taken
	for i := range n {
		waiting = append(waiting, take(t.Context(), tab, "k", int64(10+i)))
		waitQueued(t, tab, "k", i+1)
	}
	answer(t, alone, first)
	return next(t, run), waiting
}

// TestCoalesceFailures: a batch's failure reaches every request of it as
// a single call's would have, and nothing is sent again but after
// TRYAGAIN (which ran nothing).
func TestCoalesceFailures(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"lost reply", errors.New("read tcp: connection reset by peer"), store.ErrUnavailable},
		{"mismatch", errors.New("RLMISMATCH k holds junk"), store.ErrStateMismatch},
		{"oom", errors.New("OOM command not allowed when used memory > 'maxmemory'."), store.ErrFull},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab, run := coalescingTable(t)
			batch, waiting := batchOf(t, tab, run, 3)
			batch.answer <- evalAnswer{err: c.err}
			for i, ch := range waiting {
				if o := result(t, ch); !errors.Is(o.err, c.want) {
					t.Errorf("Take %d: %v, want %v", i, o.err, c.want)
				}
			}
			waitForgotten(t, tab)
			select {
			case again := <-run.calls:
				t.Fatalf("sent again: %v", again.argv)
			default:
			}
		})
	}
	t.Run("tryagain", func(t *testing.T) {
		tab, run := coalescingTable(t)
		batch, waiting := batchOf(t, tab, run, 3)
		batch.answer <- evalAnswer{err: errors.New("TRYAGAIN Multiple keys request during rehashing of slot")}
		again := next(t, run)
		if fmt.Sprint(again.argv) != fmt.Sprint(batch.argv) {
			t.Fatalf("retried %v, want %v", again.argv, batch.argv)
		}
		again.answer <- evalAnswer{reply: again.replyFor(t)}
		for i, ch := range waiting {
			if o := result(t, ch); o.err != nil {
				t.Errorf("Take %d: %v", i, o.err)
			}
		}
	})
	t.Run("stopped", func(t *testing.T) {
		// The script stopped at a state it could not read after the first
		// request: the others were not decided.
		tab, run := coalescingTable(t)
		batch, waiting := batchOf(t, tab, run, 3)
		batch.answer <- evalAnswer{reply: batch.replyFor(t)[:3]}
		for i, ch := range waiting {
			o := result(t, ch)
			if i == 0 && o.err != nil || i > 0 && !errors.Is(o.err, store.ErrStateMismatch) {
				t.Errorf("Take %d: %+v", i, o)
			}
		}
	})
	t.Run("bad reply", func(t *testing.T) {
		tab, run := coalescingTable(t)
		batch, waiting := batchOf(t, tab, run, 3)
		batch.answer <- evalAnswer{reply: batch.replyFor(t)[:4]}
		for i, ch := range waiting {
			if o := result(t, ch); !errors.Is(o.err, store.ErrUnavailable) {
				t.Errorf("Take %d: %+v, want store.ErrUnavailable", i, o)
			}
		}
	})
}

// TestCoalesceEveryRequestOnce: many goroutines on a few keys, a runner
// answering at once: every request is sent exactly once, in a call of at
// most MaxBatch (the table has one limit), and gets its own answer;
// nothing stays in flight.
func TestCoalesceEveryRequestOnce(t *testing.T) {
	tab, run := coalescingTable(t)
	var sent atomic.Int64
	stop := make(chan struct{})
	var answering sync.WaitGroup
	answering.Add(1)
	go func() {
		defer answering.Done()
		for {
			select {
			case c := <-run.calls:
				nows, _ := c.requests(t)
				if len(nows) > tab.maxBatch || tab.maxBatch != MaxBatch {
					t.Errorf("a batch of %d", len(nows))
				}
				sent.Add(int64(len(nows)))
				c.answer <- evalAnswer{reply: c.replyFor(t)}
			case <-stop:
				return
			}
		}
	}()
	const goroutines, each = 64, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				now := int64(g*each + i)
				r, err := tab.Take(t.Context(), fmt.Sprint("k", g%3), now%1000, 1, nil)
				if err != nil || r.Remaining != 1000-now%1000 {
					t.Errorf("Take at %d: %+v, %v", now%1000, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	answering.Wait()
	if got := sent.Load(); got != goroutines*each {
		t.Errorf("%d requests sent, want %d", got, goroutines*each)
	}
	waitForgotten(t, tab)
}

// TestInFlightChecked: a negative number of calls in flight is a
// configuration error, not a panic or coalescing off.
func TestInFlightChecked(t *testing.T) {
	cfg := config[string]{InFlight: -1}
	if err := cfg.check(); !errors.Is(err, algorithm.ErrInvalidConfig) {
		t.Fatalf("InFlight -1: %v, want algorithm.ErrInvalidConfig", err)
	}
}

// A batch holds at most MaxBatch limit decisions (MaxLogBatch with a
// sliding log), and at least one request: a Policy's batches are shorter,
// so that no script runs long.
func TestBatchBound(t *testing.T) {
	for _, c := range []struct {
		limits int
		log    bool
		want   int
	}{
		{1, false, 64}, {2, false, 32}, {3, false, 21}, {64, false, 1}, {300, false, 1},
		{1, true, 8}, {2, true, 4}, {3, true, 2}, {8, true, 1}, {16, true, 1}, {40, true, 1},
	} {
		if got := batchBound(c.limits, c.log); got != c.want {
			t.Errorf("batchBound(%d, %v) = %d, want %d", c.limits, c.log, got, c.want)
		}
	}
}

// checkOwnBound fails t unless ctx, a call's, has the table's own
// deadline: its Timeout after a moment between sent and now.
func checkOwnBound(t *testing.T, tab *Table[string], ctx context.Context, sent time.Time) {
	t.Helper()
	d, ok := ctx.Deadline()
	if !ok || d.Before(sent.Add(tab.CallTimeout())) || d.After(time.Now().Add(tab.CallTimeout())) {
		t.Fatalf("the call's deadline: %v %v, want the table's own, %v after it was sent (%v)", d, ok, tab.CallTimeout(), sent)
	}
}
