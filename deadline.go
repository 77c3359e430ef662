package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// remoteTable calls a table whose calls wait on the network
// (store.Remote) so that no caller's deadline or cancellation reaches the
// client library: one caller's short deadline once failed a dial that
// every caller waiting on that connection shared. A call whose caller's
// context can end runs under a context of its own (callContext): the
// caller's values, none of its cancellation, and the table's own deadline,
// at most its CallTimeout away. Where the call runs depends on the
// caller's deadline:
//
//   - A caller whose context cannot end (context.Background()) calls the
//     table as it is: there is nothing to detach from.
//   - A caller with no deadline, or one no nearer than the call's own
//     (as one at least CallTimeout away always is), makes the call on its
//     own goroutine, the price of a plain call: the call ends, by its own
//     deadline at the latest, before the caller's. A caller cancelled
//     while the call is in flight gets the call's answer when it comes,
//     at most CallTimeout later.
//   - A caller with a nearer deadline, but at least half CallTimeout
//     away (as the deadlines of HTTP and gRPC requests are, a second or
//     more), makes the call on
//     its own goroutine too, under a deadline shared with the calls made
//     about the same time, at most a span before the caller's (see
//     deadlines.before): the call ends, by that deadline at the latest,
//     before the caller's. A store that cannot answer in so long is
//     failing, and the breaker counts it (its SlowCall rule). A caller
//     cancelled while the call is in flight gets the call's answer when
//     it comes, by its deadline.
//   - A caller with a deadline nearer still hands the call to a worker
//     (see startWork), and stops waiting when its context ends, with an
//     endedError; the call goes on to the store's answer, bounded by the
//     table's deadline, and charges what the store charges. Such a
//     deadline never reaches the client library: one too short for a
//     dial would fail the dial for every caller waiting on it.
//
// The circuit breaker sits below, so it counts the store's own failures,
// never a caller's impatience.
//
// The calls whose callers have left are at most maxLeftCalls per Limiter
// or Policy: without a bound, callers that leave at once and call again
// would pile calls on the store faster than it answers, until its own
// calls time out and the breaker opens for everyone. A caller that finds
// the bound reached waits under its own context for one of them to end,
// and leaves uncharged, the call not made, when its context ends first.
// Calls whose callers still wait have no bound of their own: they are as
// many as the callers.
type remoteTable[K comparable] struct {
	next      store.Table[K]
	calls     *remoteCalls[K]
	timeout   time.Duration // the table's CallTimeout
	deadlines *deadlines
	refuser   store.Refuser // the store's table, when it tells refused connections
}

// newRemoteTable returns next, a remote table, behind a remoteTable; raw
// is the store's own table, which next may wrap.
func newRemoteTable[K comparable](next, raw store.Table[K], calls *remoteCalls[K]) *remoteTable[K] {
	timeout := raw.(store.Remote).CallTimeout()
	t := &remoteTable[K]{next: next, calls: calls, timeout: timeout, deadlines: newDeadlines(timeout)}
	t.refuser, _ = raw.(store.Refuser)
	return t
}

// maxLeftCalls is how many calls a Limiter or Policy has in flight at
// once on a remote store for callers that have left: enough for a burst
// of callers that give up at once, few enough that such calls cannot pile
// up behind a slow server (256 did, on miniredis under load, until its
// own timeouts opened the breaker).
const maxLeftCalls = 64

// remoteCalls is what the remote tables of one Limiter or Policy share:
// how many of their calls go on for callers that have left, and a pool
// of calls.
type remoteCalls[K comparable] struct {
	left atomic.Int64 // calls in flight whose callers have left
	mu   sync.Mutex   // guards room, and left's decrements
	room chan struct{}
	pool sync.Pool // of *remoteCall[K]
}

func newRemoteCalls[K comparable]() *remoteCalls[K] {
	r := &remoteCalls[K]{}
	r.pool.New = func() any { return &remoteCall[K]{done: make(chan struct{}, 1)} }
	return r
}

// wait returns once fewer than maxLeftCalls calls go on for callers that
// have left, or an endedError when ctx ends first.
func (r *remoteCalls[K]) wait(ctx context.Context) error {
	for r.left.Load() >= maxLeftCalls {
		r.mu.Lock()
		if r.left.Load() < maxLeftCalls {
			r.mu.Unlock()
			return nil
		}
		if r.room == nil {
			r.room = make(chan struct{})
		}
		room := r.room
		r.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return &endedError{ctxErr: ctx.Err()}
		}
	}
	return nil
}

// ended counts out a call whose caller had left, and lets those waiting
// for room go.
func (r *remoteCalls[K]) ended() {
	r.mu.Lock()
	if r.left.Add(-1) < maxLeftCalls && r.room != nil {
		close(r.room)
		r.room = nil
	}
	r.mu.Unlock()
}

// get returns a call of op on t from the pool.
func (r *remoteCalls[K]) get(t *remoteTable[K], op remoteOp, key K) *remoteCall[K] {
	c := r.pool.Get().(*remoteCall[K])
	c.t, c.op, c.key = t, op, key
	return c
}

// put returns c to the pool, holding nothing of its caller's.
func (r *remoteCalls[K]) put(c *remoteCall[K]) {
	var zero K
	c.t, c.b, c.s, c.ctx, c.d, c.key, c.bk, c.out, c.r, c.given, c.err = nil, nil, nil, nil, nil, zero, store.Booking{}, nil, algorithm.Result{}, 0, nil
	clear(c.buf)
	r.pool.Put(c)
}

// remoteOp is the operation of a remoteCall.
type remoteOp uint8

const (
	opTake remoteOp = iota
	opPeek
	opReset
	opBook
	opCancel
	opUndo
	opRefund
	opSettle
)

// The states of a remoteCall a worker makes.
const (
	callWaiting  = iota // its caller waits
	callAnswered        // the worker answered: done receives
	callLeft            // its caller left: the worker puts the call back
)

// remoteCall is one call of a remote table: the operation and its
// arguments, then its outcome.
type remoteCall[K comparable] struct {
	t            *remoteTable[K]
	b            store.Booker[K]  // for the booking operations
	s            store.Settler[K] // for Settle
	ctx          context.Context  // the caller's
	d            *sharedDeadline  // the call's deadline
	op           remoteOp
	key          K
	now, cost, n int64              // n: Book's maxDelay, Refund's and Settle's n
	bk           store.Booking      // Cancel's, Undo's and Settle's, and Book's and Settle's outcome
	out          []algorithm.Result // buf[:len(caller's out)], or nil
	buf          []algorithm.Result
	r            algorithm.Result
	ok           bool
	given        int64 // Undo's outcome
	err          error
	state        atomic.Int32  // with a worker: callWaiting, callAnswered or callLeft
	done         chan struct{} // with a worker: receives once it answered
}

// results sizes c's out to n results (nil for 0).
func (c *remoteCall[K]) results(n int) {
	if n == 0 {
		c.out = nil
		return
	}
	if cap(c.buf) < n {
		c.buf = make([]algorithm.Result, n)
	}
	c.out = c.buf[:n]
}

// call makes the call under the call's own context.
func (c *remoteCall[K]) call() {
	t := c.t
	ctx := &callContext{parent: c.ctx, d: c.d}
	switch c.op {
	case opTake:
		c.r, c.err = t.next.Take(ctx, c.key, c.now, c.cost, c.out)
	case opPeek:
		c.r, c.err = t.next.Peek(ctx, c.key, c.now, c.out)
	case opReset:
		c.err = t.next.Reset(ctx, c.key)
	case opBook:
		c.r, c.bk, c.ok, c.err = c.b.Book(ctx, c.key, c.now, c.cost, c.n, c.out)
	case opCancel:
		c.err = c.b.Cancel(ctx, c.key, c.now, c.bk)
	case opUndo:
		c.given, c.err = c.b.Undo(ctx, c.key, c.now, c.bk)
	case opRefund:
		c.r, c.err = c.b.Refund(ctx, c.key, c.now, c.n, c.out)
	case opSettle:
		c.bk, c.err = c.s.Settle(ctx, c.key, c.now, c.bk, c.n)
	}
}

// run is the call on a worker: it makes it, then answers the caller, or,
// when the caller has left, puts the call back.
func (c *remoteCall[K]) run() {
	c.call()
	if c.state.CompareAndSwap(callWaiting, callAnswered) {
		c.done <- struct{}{}
		return
	}
	calls := c.t.calls
	calls.ended()
	calls.put(c)
}

// detached makes c for the caller of ctx, on the caller's goroutine or a
// worker's (see remoteTable), and returns once it has c's outcome. It
// returns an endedError, c put back, when ctx ends first (or had ended,
// or ends while waiting for room: the call is then not made).
func (t *remoteTable[K]) detached(ctx context.Context, c *remoteCall[K]) error {
	if err := ctx.Err(); err != nil {
		t.calls.put(c)
		return &endedError{ctxErr: err}
	}
	c.ctx, c.d = ctx, t.deadlines.current()
	deadline, ok := ctx.Deadline()
	if !ok || !deadline.Before(c.d.at) {
		c.call()
		return nil
	}
	left := time.Until(deadline) // reads only the monotonic clock, cheaper than time.Now
	if left <= 0 {
		// Past its deadline: ctx.Err can be nil still, until the
		// context's timer has run.
		t.calls.put(c)
		return &endedError{ctxErr: context.DeadlineExceeded}
	}
	if left >= t.deadlines.direct {
		c.d = t.deadlines.before(deadline)
		c.call()
		return nil
	}
	if err := t.calls.wait(ctx); err != nil {
		t.calls.put(c)
		return err
	}
	c.state.Store(callWaiting)
	startWork(c)
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
	}
	t.calls.left.Add(1)
	if c.state.CompareAndSwap(callWaiting, callLeft) {
		return t.left(ctx.Err())
	}
	t.calls.ended()
	<-c.done // answered as the context ended: the answer counts
	return nil
}

// left returns the error of a caller that left, with ctxErr, while its
// call was in flight: a refusedError when the store's table says that its
// server refuses connections (the client may retry the dial for longer
// than the caller waited), else an endedError.
func (t *remoteTable[K]) left(ctxErr error) error {
	if t.refuser != nil {
		if refusal := t.refuser.Refused(); refusal != nil {
			return &refusedError{ctxErr: ctxErr, refusal: refusal}
		}
	}
	return &endedError{ctxErr: ctxErr, inFlight: true}
}

// answer copies c's results to out, puts c back and returns its outcome.
func (t *remoteTable[K]) answer(c *remoteCall[K], out []algorithm.Result) (algorithm.Result, error) {
	copy(out, c.out)
	r, err := c.r, c.err
	t.calls.put(c)
	return r, err
}

func (t *remoteTable[K]) Take(ctx context.Context, key K, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	if ctx.Done() == nil { // cannot end: nothing to detach from
		return t.next.Take(ctx, key, now, cost, out)
	}
	c := t.calls.get(t, opTake, key)
	c.now, c.cost = now, cost
	c.results(len(out))
	if err := t.detached(ctx, c); err != nil {
		return algorithm.Result{}, err
	}
	return t.answer(c, out)
}

func (t *remoteTable[K]) Peek(ctx context.Context, key K, now int64, out []algorithm.Result) (algorithm.Result, error) {
	if ctx.Done() == nil {
		return t.next.Peek(ctx, key, now, out)
	}
	c := t.calls.get(t, opPeek, key)
	c.now = now
	c.results(len(out))
	if err := t.detached(ctx, c); err != nil {
		return algorithm.Result{}, err
	}
	return t.answer(c, out)
}

func (t *remoteTable[K]) Reset(ctx context.Context, key K) error {
	if ctx.Done() == nil {
		return t.next.Reset(ctx, key)
	}
	c := t.calls.get(t, opReset, key)
	c.results(0)
	if err := t.detached(ctx, c); err != nil {
		return err
	}
	_, err := t.answer(c, nil)
	return err
}

// Book, Cancel, Undo and Refund detach the booking operations (store.Booker)
// as Take does.
func (t *remoteTable[K]) Book(ctx context.Context, key K, now, cost, maxDelay int64, out []algorithm.Result) (algorithm.Result, store.Booking, bool, error) {
	b, err := bookerOf(t.next)
	if err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	if ctx.Done() == nil {
		return b.Book(ctx, key, now, cost, maxDelay, out)
	}
	c := t.calls.get(t, opBook, key)
	c.b, c.now, c.cost, c.n = b, now, cost, maxDelay
	c.results(len(out))
	if err := t.detached(ctx, c); err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	bk, ok := c.bk, c.ok
	r, err := t.answer(c, out)
	return r, bk, ok, err
}

func (t *remoteTable[K]) Cancel(ctx context.Context, key K, now int64, bk store.Booking) error {
	b, err := bookerOf(t.next)
	if err != nil {
		return err
	}
	if ctx.Done() == nil {
		return b.Cancel(ctx, key, now, bk)
	}
	c := t.calls.get(t, opCancel, key)
	c.b, c.now, c.bk = b, now, bk
	c.results(0)
	if err := t.detached(ctx, c); err != nil {
		return err
	}
	_, err = t.answer(c, nil)
	return err
}

func (t *remoteTable[K]) Undo(ctx context.Context, key K, now int64, bk store.Booking) (int64, error) {
	b, err := bookerOf(t.next)
	if err != nil {
		return 0, err
	}
	if ctx.Done() == nil {
		return b.Undo(ctx, key, now, bk)
	}
	c := t.calls.get(t, opUndo, key)
	c.b, c.now, c.bk = b, now, bk
	c.results(0)
	if err := t.detached(ctx, c); err != nil {
		return 0, err
	}
	given := c.given
	_, err = t.answer(c, nil)
	return given, err
}

// Settle detaches store.Settler's Settle as Take does.
func (t *remoteTable[K]) Settle(ctx context.Context, key K, now int64, bk store.Booking, n int64) (store.Booking, error) {
	s, err := settlerOf(t.next)
	if err != nil {
		return bk, err
	}
	if ctx.Done() == nil {
		return s.Settle(ctx, key, now, bk, n)
	}
	c := t.calls.get(t, opSettle, key)
	c.s, c.now, c.bk, c.n = s, now, bk, n
	c.results(0)
	if err := t.detached(ctx, c); err != nil {
		return bk, err
	}
	settled := c.bk
	_, err = t.answer(c, nil)
	if err != nil {
		return bk, err
	}
	return settled, nil
}

func (t *remoteTable[K]) Refund(ctx context.Context, key K, now, n int64, out []algorithm.Result) (algorithm.Result, error) {
	b, err := bookerOf(t.next)
	if err != nil {
		return algorithm.Result{}, err
	}
	if ctx.Done() == nil {
		return b.Refund(ctx, key, now, n, out)
	}
	c := t.calls.get(t, opRefund, key)
	c.b, c.now, c.n = b, now, n
	c.results(len(out))
	if err := t.detached(ctx, c); err != nil {
		return algorithm.Result{}, err
	}
	return t.answer(c, out)
}

// job is a call a worker makes.
type job interface{ run() }

// worker is a goroutine kept to make remote calls for callers that may
// leave before their calls end. Workers are reused from call to call, so
// that a call costs neither a goroutine's start nor the growth of its
// stack (a fresh goroutine grew its stack on every call into a client
// library). They are shared by every Limiter and Policy in the process:
// as many as such calls in flight at the busiest moment of the last
// workerIdle or two.
type worker struct {
	jobs chan job // receives the worker's next job, or nil to exit
	gen  uint64   // workers.gen when it went idle
}

// workerIdle is how long a worker stays idle, at least, before it exits.
const workerIdle = 10 * time.Second

// workers are the idle workers.
var workers struct {
	mu sync.Mutex
	// idle holds the idle workers in the order they went idle: the last
	// is handed the next job, so those at the front are idle longest.
	idle    []*worker
	gen     uint64 // how many times reap has run
	reaping bool   // reap is to run
}

// startWork hands j to the worker that went idle last, or to a new one
// when none is idle.
func startWork(j job) {
	workers.mu.Lock()
	if n := len(workers.idle); n > 0 {
		w := workers.idle[n-1]
		workers.idle[n-1] = nil
		workers.idle = workers.idle[:n-1]
		workers.mu.Unlock()
		w.jobs <- j
		return
	}
	workers.mu.Unlock()
	go work(&worker{jobs: make(chan job, 1)}, j)
}

// work is a worker: it runs j, then each job handed to it, until reap
// tells it to exit.
func work(w *worker, j job) {
	for j != nil {
		j.run()
		workers.mu.Lock()
		w.gen = workers.gen
		workers.idle = append(workers.idle, w)
		if !workers.reaping {
			workers.reaping = true
			time.AfterFunc(workerIdle, reap)
		}
		workers.mu.Unlock()
		j = <-w.jobs
	}
}

// reap tells the workers idle since before its last run to exit, and
// runs again after workerIdle while any worker is idle.
func reap() {
	workers.mu.Lock()
	defer workers.mu.Unlock()
	n := 0
	for n < len(workers.idle) && workers.idle[n].gen < workers.gen {
		workers.idle[n].jobs <- nil
		n++
	}
	kept := copy(workers.idle, workers.idle[n:])
	clear(workers.idle[kept:])
	workers.idle = workers.idle[:kept]
	workers.gen++
	if workers.reaping = kept > 0; workers.reaping {
		time.AfterFunc(workerIdle, reap)
	}
}

// callContext is a call's context: the values of the context it was made
// from (the caller's, as context.WithoutCancel gives them) and a deadline
// that the calls made about the same time share.
type callContext struct {
	parent context.Context
	d      *sharedDeadline
}

func (c *callContext) Deadline() (time.Time, bool) { return c.d.at, true }
func (c *callContext) Done() <-chan struct{}       { return c.d.done }
func (c *callContext) Value(key any) any           { return context.WithoutCancel(c.parent).Value(key) }

func (c *callContext) Err() error {
	select {
	case <-c.d.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *callContext) String() string { return "ratelimit.callContext" }

// sharedDeadline is the deadline of the calls made in one span of time:
// done is closed at it.
type sharedDeadline struct {
	at   time.Time
	done chan struct{}
	span int64 // for deadlines.before's: the number of spans since the epoch
}

// deadlines hands out the deadlines of a table's calls: a call gets the
// current one, made at most span ago and timeout after it was made, so
// between timeout-span and timeout after the call (later only as far as
// the timer that retires it runs late). Calls made about the same time
// share one: a call costs no timer of its own (a context.WithTimeout per
// call cost about 1 µs of CPU, with 256 callers on 2 cores), nor a read
// of the clock (which costs 100–500 ns on the VMs the benchmarks run on).
// The span is a 64th of the timeout.
type deadlines struct {
	timeout, span time.Duration
	// direct is how far away a caller's deadline must be for its call to
	// run on its goroutine under a deadline near the caller's (before):
	// half the timeout, far enough that a dial or call that cannot end
	// in time meets a failing store, not a hasty caller.
	direct time.Duration
	cur    atomic.Pointer[sharedDeadline] // nil once retired, until the next call
	// early holds the deadlines before which callers need their calls
	// to end (before), one per span of time, in the slot of its number
	// of spans since the epoch modulo earlySlots.
	early [earlySlots]atomic.Pointer[sharedDeadline]
}

// earlySlots is how many deadlines.early holds: more than the spans in a
// timeout (64), so that the slot of a deadline before the table's own is
// never that of another deadline still to come.
const earlySlots = 128

func newDeadlines(timeout time.Duration) *deadlines {
	return &deadlines{timeout: timeout, span: max(timeout/64, time.Nanosecond), direct: timeout / 2}
}

// current returns the deadline of a call made now.
func (d *deadlines) current() *sharedDeadline {
	for {
		if cur := d.cur.Load(); cur != nil {
			return cur
		}
		next := &sharedDeadline{at: time.Now().Add(d.timeout), done: make(chan struct{})}
		if d.cur.CompareAndSwap(nil, next) {
			time.AfterFunc(d.span, func() { d.cur.CompareAndSwap(next, nil) })
			time.AfterFunc(d.timeout, func() { close(next.done) })
			return next
		}
	}
}

// before returns a deadline at most a span before deadline, and after
// it only as far as span's rounding goes (none: at is a multiple of span
// at or before deadline), shared by the calls whose callers' deadlines
// fall in the same span. deadline is before the table's own, which is at
// most timeout away: its span's slot holds it, or a deadline past.
func (d *deadlines) before(deadline time.Time) *sharedDeadline {
	n := deadline.UnixNano() / int64(d.span)
	slot := &d.early[n%earlySlots]
	for {
		cur := slot.Load()
		if cur != nil && cur.span == n {
			return cur
		}
		at := time.Unix(0, n*int64(d.span))
		next := &sharedDeadline{at: at, done: make(chan struct{}), span: n}
		if slot.CompareAndSwap(cur, next) {
			time.AfterFunc(time.Until(at), func() { close(next.done) })
			return next
		}
	}
}
