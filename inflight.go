package ratelimit

import (
	"container/list"
	"context"
	"reflect"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// Holds (README, "In-flight limits per tenant"): a limit whose algorithm is an
// algorithm.Holder, such as package concurrency's in-flight limit, counts
// each admission until it is released or its lease ends. It is decided as
// any limit is, in the same store call as the others; what differs is how
// a caller waits for it and how it ends.
//
// ReserveN decides a hold now, whatever its delay: no store knows when a
// slot frees, and a ReserveN that waited for a release would block, where
// every other ReserveN returns a booking at once (and did block, for
// good, on a fake clock nobody advanced). A caller of WaitN waiting for a
// slot is never booked at a lease's end (a hold may be released long
// before): it queues behind the key's other waiters of
// the quota, in this process, first come, first served; every Limiter and
// Policy of the process deciding the quota on one store value shares the
// queue (sharedSlots). The first of the queue tries (one store call, an
// admission due now); denied, it sleeps until a hold of the key is given
// back through any of them (Release, Refund, Cancel, Refund by key), or
// until the denial's RetryAfter (the oldest leases' end, a rate limit's
// refill), and on a store that keeps its state outside the process
// (store.Local false) for at most slotPoll of real time, since a release
// in another process wakes nobody here. Admitted, it leaves the queue and
// the next one tries at once.

// slotPoll bounds the sleep of the first waiter for a slot on a store
// shared with other processes: a release there is seen within it, at the
// cost of one store call per slotPoll per key waited on, per process.
const slotPoll = 50 * time.Millisecond

// Release gives back the in-flight limits' slots (package concurrency) as
// Refund does, once, leaving the other limits charged (README).
func (r *Reservation[K]) Release(ctx context.Context) (int64, error) {
	if !r.holds {
		return 0, nil
	}
	return r.giveBack(ctx, OpRefund, true) // observed as the refund it is
}

// giveBack is Refund, or with release Release: it undoes the
// reservation's booking (store.Booking.Release: the holds alone), reports
// it to the hooks as op, wakes the key's first waiter for a slot when the
// reservation held one, and returns what the store gave back.
func (r *Reservation[K]) giveBack(ctx context.Context, op Op, release bool) (int64, error) {
	if !r.ok || r.table == nil || r.done.Load() {
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done.Swap(true) {
		return 0, nil
	}
	start := r.hooks.begin(r.e.clock)
	bk := r.booking
	bk.Release = release
	given, err := r.table.Undo(ctx, r.key, r.e.micros.UnixMicro(), bk)
	err = r.storeErr(ctx, err)
	if r.holds {
		r.slots.released(r.key)
	}
	d := r.decision
	d = d.booked() // the booking's, as it was booked: the event's outcome is the give-back's
	end(ctx, r.hooks, r.e.clock, op, r.key, bk.Cost, start, &d, err)
	return given, err
}

// slotQueues holds, per key, the callers waiting for a slot of a limit
// that holds, in the order they came.
type slotQueues[K comparable] struct {
	mu   sync.Mutex
	keys map[K]*list.List // of *slotWaiter; the first tries
}

// slotWaiter is one caller waiting for a slot.
type slotWaiter struct {
	turn chan struct{} // closed when it is first
	wake chan struct{} // a release while it is first; room for one
}

// join puts a waiter for key at the end of its queue.
func (q *slotQueues[K]) join(key K) (*slotWaiter, *list.Element) {
	w := &slotWaiter{turn: make(chan struct{}), wake: make(chan struct{}, 1)}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.keys == nil {
		q.keys = make(map[K]*list.List)
	}
	l := q.keys[key]
	if l == nil {
		l = list.New()
		q.keys[key] = l
	}
	if l.Len() == 0 {
		close(w.turn)
	}
	return w, l.PushBack(w)
}

// leave takes a waiter out of key's queue; when it was first, the next
// one's turn comes.
func (q *slotQueues[K]) leave(key K, e *list.Element) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.keys[key]
	first := l.Front() == e
	l.Remove(e)
	if l.Len() == 0 {
		delete(q.keys, key)
		return
	}
	if first {
		close(l.Front().Value.(*slotWaiter).turn)
	}
}

// released wakes the first waiter for a slot of key, if any.
func (q *slotQueues[K]) released(key K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if l := q.keys[key]; l != nil {
		select {
		case l.Front().Value.(*slotWaiter).wake <- struct{}{}:
		default:
		}
	}
}

// waitSlot is WaitN for limits that hold: it
// waits its turn among key's waiters, then tries (try: an admission due
// now) until it is admitted, sleeping in between as slotWait says.
// maxDelay bounds the whole wait (negative: ctx alone); once it has
// passed, waitSlot returns the last denial, not OK. A ctx that ends first
// ends the wait with its error.
func (e *engine[K]) waitSlot(ctx context.Context, key K, maxDelay time.Duration, try func() (*Reservation[K], error)) (*Reservation[K], error) {
	slots := e.cur.Load().slots
	w, el := slots.join(key)
	defer slots.leave(key, el)
	var expired <-chan time.Time
	if maxDelay >= 0 {
		t := e.clock.NewTimer(maxDelay)
		defer t.Stop()
		expired = t.C()
	}
	select {
	case <-w.turn:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-expired:
		return try() // not its turn in time: what it would get now, without queueing
	}
	for {
		r, err := try()
		if err != nil || r.OK() {
			return r, err
		}
		wait, byRelease, poll := e.slotWait(r)
		t := e.clock.NewTimer(wait)
		var woken <-chan struct{}
		var polled <-chan time.Time
		if byRelease {
			woken = w.wake
		}
		if poll {
			// Real time, whatever the limiter's clock: a release elsewhere
			// happens in it.
			p := time.NewTimer(slotPoll)
			defer p.Stop()
			polled = p.C
		}
		select {
		case <-woken:
		case <-polled:
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-expired:
			t.Stop()
			return r, nil
		}
		t.Stop()
	}
}

// slotWait says how the first waiter sleeps after r's denial: for the
// longest RetryAfter of the limits that do not hold, when one of them
// denies (a release does not help); otherwise for the holds' RetryAfter
// (the oldest lease's end), unless a release through a Limiter of this
// process wakes it first (byRelease), and, on a store shared with other
// processes, for at most slotPoll of real time (poll), since a release
// there wakes nobody here.
func (e *engine[K]) slotWait(r *Reservation[K]) (wait time.Duration, byRelease, poll bool) {
	ls := e.cur.Load()
	var rate, hold time.Duration
	ds := r.decision.Limits()
	if ds == nil {
		ds = []Decision{r.decision} // one limit's
	}
	for i, d := range ds {
		if d.Allowed() {
			continue
		}
		if i < len(ls.holding) && ls.holding[i] && d.Source() == FromStore {
			hold = max(hold, d.RetryAfter())
		} else {
			rate = max(rate, d.RetryAfter())
		}
	}
	if rate > 0 || hold == 0 {
		return max(rate, time.Microsecond), false, false
	}
	return hold, true, !ls.inProcess
}

// slotKey names the queues of waiters for the slots of one quota (a
// limit's ID) on one store value, which every Limiter and Policy of the
// process deciding that quota on that store value shares, so that a
// release through any of them wakes the first waiter of any.
type slotKey struct {
	st any
	id string
}

// slotRegistry holds the shared queues, each as a weak.Pointer to its
// *slotQueues[K], dropped once no Limiter or Policy holds it.
var slotRegistry sync.Map // slotKey → weak.Pointer[slotQueues[K]]

// sharedSlots returns the queues of waiters for the slots of the quota
// id on st, shared with every Limiter and Policy of the process on st
// under id, or queues of their own when st is no valid map key.
func sharedSlots[K comparable](st store.Store[K], id string) *slotQueues[K] {
	if t := reflect.TypeOf(st); t == nil || !t.Comparable() {
		return new(slotQueues[K])
	}
	k := slotKey{st: st, id: id}
	for {
		if v, ok := slotRegistry.Load(k); ok {
			if q := v.(weak.Pointer[slotQueues[K]]).Value(); q != nil {
				return q
			}
			slotRegistry.CompareAndDelete(k, v) // collected: replaced below
			continue
		}
		q := new(slotQueues[K])
		wp := weak.Make(q)
		if _, loaded := slotRegistry.LoadOrStore(k, wp); loaded {
			continue
		}
		runtime.AddCleanup(q, func(k slotKey) { slotRegistry.CompareAndDelete(k, wp) }, k)
		return q
	}
}

// waitHold is WaitN for limits that hold: try, an admission decided now,
// when the limits run dry (a dry run never keeps a request waiting);
// otherwise waitSlot's wait for a turn and a slot, bounded by ctx alone.
func (e *engine[K]) waitHold(ctx context.Context, h *hooks, key K, n int, try func() (*Reservation[K], error)) (*Reservation[K], error) {
	ls := e.cur.Load()
	if h.dryRun {
		return try()
	}
	if n < 1 || int64(n) > ls.limit {
		return nil, algorithm.CheckCost(int64(n), ls.limit)
	}
	return e.waitSlot(ctx, key, -1, try)
}
