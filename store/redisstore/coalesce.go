package redisstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"sync"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/store"
)

// Coalescing (docs/design/coalescing.md). While a Take's script for a key
// is in flight, further Takes of the key through the same table wait in
// the process, in a line; when the call in flight returns, one goroutine
// sends those waiting as batches (luascript.Batch), each deciding its
// requests in arrival order in one script call. A Take of a key with
// nothing in flight takes the single call's path, with no wait and no
// allocation more. Bookings, cancels and refunds (book.go) take the same
// line: a batch holds requests of one kind, the first waiting and those
// of its kind behind it (see ended).

// MaxBatch is the most limit decisions one batch script makes (its
// requests times the table's limits); MaxLogBatch is that for a table
// with a sliding log, whose decisions each cost O(log n) and may trim up
// to 1000 members. So a batch stays well within the 5 ms a script may take
// whatever the Policy: a batch of a Policy of 300 limits holds one
// request; 16 admissions on a full log of the largest limit once it has
// left the window, each trimming 1000, took 1.7–2.8 ms of Redis
// (TestSlidingLogWorstCase), twice that in the VM's slow spells, so a
// batch holds 8 of them. A log's decision is mostly its own work (about
// 15 µs against a call's few), so its batches gain little from more.
const (
	MaxBatch    = 64
	MaxLogBatch = 8
)

// batchBound returns the most requests a batch of a table of limits
// holds: MaxBatch (MaxLogBatch with a sliding log) limit decisions, and
// at least one request.
func batchBound(limits int, log bool) int {
	per := MaxBatch
	if log {
		per = MaxLogBatch
	}
	return max(1, per/max(limits, 1))
}

// lineShards is how many locks the lines of a table are spread over.
const lineShards = 32

// DefaultInFlight is the stores' default Config.InFlight: how many calls
// for one key a table has in flight at once before further Takes wait in
// line. 8, so that a key asked by a few
// callers at once goes as without coalescing (rueidis pipelines them on
// one connection, go-redis sends them on connections of its pool), and
// only a key hotter than that waits and batches. Measured on one key,
// rueidis, alternated rounds: with 8 goroutines, 1 in flight made
// 24–25k decisions/s against 29–35k without coalescing, 8 in flight
// 31–35k; with 64 goroutines, 1 in flight made 0.031 calls and 4.7–4.9
// Redis µs per decision, 8 in flight 0.17 calls and 5.7–6.1 µs, for the
// same decisions/s within noise (go-redis alike).
const DefaultInFlight = 8

// lines are a table's keys with a call in flight, by their first Redis
// key's name (what the table's scripts declare first).
type lines struct {
	seed   maphash.Seed
	shards [lineShards]lineShard
}

type lineShard struct {
	mu sync.Mutex
	// m holds a key's line while a call for it is in flight.
	m map[string]*line
	_ [40]byte // keeps shards' locks off one cache line
}

// line is what waits behind a key's call in flight, guarded by its
// shard's lock.
type line struct {
	keys     []string   // the key's Redis keys, as a call declares them, once a request waits
	waiting  []*request // in arrival order
	inflight int        // calls in flight: Takes alone and batches
}

func newLines() *lines {
	ls := &lines{seed: maphash.MakeSeed()}
	for i := range ls.shards {
		ls.shards[i].m = make(map[string]*line)
	}
	return ls
}

func (ls *lines) shard(name string) *lineShard {
	return &ls.shards[maphash.String(ls.seed, name)%lineShards]
}

// A request's states, under its shard's lock.
const (
	queued = iota // in its line's waiting
	sent          // in a batch taken from the line
)

// request is a Take, or a booking operation, waiting in a line.
type request struct {
	ctx       context.Context
	op        luascript.Op // 0 for a Take
	now, cost int64
	extra     []string // the op's own arguments (Book: maxDelay; Cancel: the booking's)
	state     int
	rs        []algorithm.Result // each limit's result, when decided
	outcome
	done chan struct{} // receives once rs and the outcome are set
}

// outcome is what a request's call left: its combined result or error,
// and, for a booking, whether it booked, the instant and the values
// Cancel needs.
type outcome struct {
	r      algorithm.Result
	err    error
	booked bool
	act    int64
	undo   []string
	given  int64 // an undo's: the least any limit gave back
}

var requests = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

// join reports whether the caller's Take (op 0) or booking operation of
// the key named name, whose Redis keys are keys, goes alone (fewer than
// Config.InFlight calls for the key are in flight and nothing waits: the
// call is counted in flight, and the caller calls settle when it is
// over), or else returns the request it waits on, queued in the key's
// line.
func (t *Table[K]) join(ctx context.Context, sh *lineShard, name string, keys []string, op luascript.Op, now, cost int64, extra []string) *request {
	sh.mu.Lock()
	ln := sh.m[name]
	if ln == nil {
		ln = idleLines.Get().(*line)
		sh.m[name] = ln
	}
	if ln.inflight < t.inFlight && len(ln.waiting) == 0 {
		ln.inflight++
		sh.mu.Unlock()
		return nil
	}
	if ln.keys == nil {
		ln.keys = slices.Clone(keys)
	}
	req := t.newRequest(ctx, op, now, cost, extra)
	ln.waiting = append(ln.waiting, req)
	sh.mu.Unlock()
	return req
}

// newRequest returns a request from the pool, queued, for t's limits.
func (t *Table[K]) newRequest(ctx context.Context, op luascript.Op, now, cost int64, extra []string) *request {
	req := requests.Get().(*request)
	req.ctx, req.op, req.now, req.cost, req.extra, req.state = ctx, op, now, cost, extra, queued
	if cap(req.rs) < len(t.limits) {
		req.rs = make([]algorithm.Result, len(t.limits))
	}
	req.rs = req.rs[:len(t.limits)]
	return req
}

// release returns req to the pool, holding nothing of its caller's.
func (req *request) release() {
	req.ctx, req.extra, req.outcome = nil, nil, outcome{}
	requests.Put(req)
}

// idleLines are lines of no key, for join to take.
var idleLines = sync.Pool{New: func() any { return new(line) }}

// settle ends a call in flight for the key named name, the caller's own:
// a goroutine sends what waits behind it, if anything does.
func (t *Table[K]) settle(sh *lineShard, name string) {
	sh.mu.Lock()
	ln := sh.m[name]
	batch := t.ended(sh, name, ln)
	sh.mu.Unlock()
	if batch != nil {
		go t.serve(sh, name, ln, batch)
	}
}

// ended counts a call for the key out of flight, and returns the next
// batch to send (counted in flight), or nil when nothing waits; the key
// is forgotten when nothing is left in flight either. The caller holds
// the shard's lock.
//
// A batch is of one kind (Takes, or one booking operation): the first
// request waiting and those of its kind behind it, in arrival order, at
// most maxBatch; requests of other kinds keep their places. Every request
// waiting is in its caller's call (none has returned), so they are all
// concurrent, and any order of them is one in which they could have
// arrived: a Take that arrived after a booking may be decided before it.
// Taking the run of one kind at the head alone would make a key that
// mixes kinds send batches of one request. The head goes first, so no
// kind waits behind another for long.
func (t *Table[K]) ended(sh *lineShard, name string, ln *line) []*request {
	ln.inflight--
	if len(ln.waiting) == 0 {
		if ln.inflight == 0 {
			delete(sh.m, name)
			ln.keys = nil
			ln.waiting = ln.waiting[:0]
			idleLines.Put(ln)
		}
		return nil
	}
	ln.inflight++
	op := ln.waiting[0].op
	batch := make([]*request, 0, min(len(ln.waiting), t.maxBatch))
	rest := ln.waiting[:0]
	for i, req := range ln.waiting {
		if len(batch) == t.maxBatch {
			rest = append(rest, ln.waiting[i:]...)
			break
		}
		if req.op == op {
			req.state = sent
			batch = append(batch, req)
		} else {
			rest = append(rest, req)
		}
	}
	clear(ln.waiting[len(rest):])
	ln.waiting = rest
	return batch
}

// serve sends batch, then every batch that waits behind it, until none
// does.
func (t *Table[K]) serve(sh *lineShard, name string, ln *line, batch []*request) {
	for batch != nil {
		t.send(ln.keys, batch)
		sh.mu.Lock()
		batch = t.ended(sh, name, ln)
		sh.mu.Unlock()
	}
}

// send decides batch in one script call and hands each request its
// result. The call runs under the first request's values but none of
// their callers' cancellation, bounded by the table's Timeout (call): a
// caller cannot make the others' call fail by choosing a short deadline;
// each caller stops waiting at its own (await).
func (t *Table[K]) send(keys []string, batch []*request) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), t.timeout)
	defer cancel()
	if batch[0].op != 0 {
		t.sendOps(ctx, keys, batch)
		return
	}
	if len(batch) == 1 {
		req := batch[0]
		req.r, req.err = t.callAlone(ctx, keys, t.nowArg(req.now), req.cost, req.rs)
		req.done <- struct{}{}
		return
	}
	argv := make([]string, 1+2*len(batch))
	argv[0] = strconv.Itoa(len(batch))
	for i, req := range batch {
		argv[1+2*i], argv[2+2*i] = t.nowArg(req.now), strconv.FormatInt(req.cost, 10)
	}
	reply, err := t.retry(ctx, t.batch, false, keys, Args{Batch: argv, Rest: t.rest, RestAny: t.restAny}, nil)
	per := 3 * len(t.limits)
	if err == nil && (len(reply)%per != 0 || len(reply) > per*len(batch) || len(reply) == 0) {
		err = fmt.Errorf("%w: %s script replied %d values for %d requests of %d limits", store.ErrUnavailable, t.batch.Name, len(reply), len(batch), len(t.limits))
	}
	for i, req := range batch {
		switch {
		case err != nil:
			req.r, req.err = algorithm.Result{}, err
		case (i+1)*per <= len(reply):
			req.r, req.err = t.result(reply[i*per:(i+1)*per], req.rs)
		default:
			// A request before it found a state it cannot read, so the
			// batch stopped there: this one was not decided, nor charged.
			req.r, req.err = algorithm.Result{}, fmt.Errorf("%w: %s script stopped before this request, at a state it cannot read", store.ErrStateMismatch, t.batch.Name)
		}
		req.done <- struct{}{}
	}
}

// await waits for req's result, or for its caller's context to end: a
// request still queued then leaves its line, never sent and never
// charged; one already sent has an unknown outcome, as a single call
// whose context ends in flight has. Either way the error is
// store.ErrUnavailable with the context's error.
func (t *Table[K]) await(ctx context.Context, sh *lineShard, name string, req *request, out []algorithm.Result) outcome {
	select {
	case <-req.done:
		return req.took(out)
	case <-ctx.Done():
	}
	sh.mu.Lock()
	state := req.state
	if state == queued {
		if ln := sh.m[name]; ln != nil {
			if i := slices.Index(ln.waiting, req); i >= 0 {
				ln.waiting = slices.Delete(ln.waiting, i, i+1)
			}
		}
	}
	sh.mu.Unlock()
	s := t.script
	if req.op != 0 {
		s = t.ops[req.op]
	}
	if state == queued {
		return outcome{err: fmt.Errorf("%w: %s script: %w (before it was sent)", store.ErrUnavailable, s.Name, ctx.Err())}
	}
	// Sent: the batch goroutine still writes req and its done; it is
	// left to the collector, not pooled.
	return outcome{err: fmt.Errorf("%w: %s script: %w (its batch was in flight)", store.ErrUnavailable, s.Name, ctx.Err())}
}

// took returns req's outcome, its limits' results copied to out (when
// not nil and it has no error), and returns req to the pool.
func (req *request) took(out []algorithm.Result) outcome {
	o := req.outcome
	if out != nil && o.err == nil {
		copy(out, req.rs)
	}
	req.release()
	return o
}

// nowArg is ARGV's time for now: empty with the server clock.
func (t *Table[K]) nowArg(now int64) string {
	if t.server {
		return ""
	}
	return strconv.FormatInt(now, 10)
}

// callAlone runs the table's decision script alone for keys at now (nowArg)
// and cost, and returns its combined result, each limit's in out when
// not nil.
func (t *Table[K]) callAlone(ctx context.Context, keys []string, now string, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	reply, err := t.retry(ctx, t.script, false, keys, t.decisionArgs(now, cost), nil)
	if err != nil {
		return algorithm.Result{}, err
	}
	return t.result(reply, out)
}
