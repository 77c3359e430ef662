package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/store"
)

// The booking operations (store.Booker): one script each (luascript.ForOp),
// one round trip, atomic like a decision.

var (
	_ store.Booker[string]  = (*Table[string])(nil)
	_ store.Settler[string] = (*Table[string])(nil)
)

// opArgs returns the ARGV of an op's script: now (empty with the server
// clock), cost, the table's own, then extra.
func (t *Table[K]) opArgs(now, cost int64, extra ...string) Args {
	a := Args{Cost: strconv.FormatInt(cost, 10), Rest: append(t.rest[:len(t.rest):len(t.rest)], extra...)}
	if !t.server {
		a.Now = strconv.FormatInt(now, 10)
	}
	a.RestAny = make([]any, len(a.Rest))
	for i, s := range a.Rest {
		a.RestAny[i] = s
	}
	return a
}

// call runs call, a call of the script s, sending it again after a
// TRYAGAIN reply (which did not run it), and after a plain script's
// RLCONVERT (or WRONGTYPE) reply, which wrote nothing, as the conversion
// form of s that reads what it found (luascript.Conversion); and returns
// its error wrapped as the store contract wants: RLMISMATCH and WRONGTYPE
// as store.ErrStateMismatch (a configuration error, not an outage; never
// retried), RLTOOMANY as store.ErrTooManyStates (the caller's: never
// retried), OOM as store.ErrFull (the server is up and answered),
// anything else as store.ErrUnavailable.
func (t *Table[K]) call(ctx context.Context, s *luascript.Script, call func(context.Context, *luascript.Script) error) error {
	for attempt := 0; ; attempt++ {
		err := call(ctx, s)
		if letters, ok := luascript.Conversion(err); ok {
			if next := s.Converting(letters, t.modes); next != s {
				s, attempt = next, attempt-1 // a conversion is no retry of the same call
				continue
			}
		}
		switch {
		case err == nil:
			return nil
		case isMismatch(err):
			return fmt.Errorf("%w: %s%s script: %w", store.ErrStateMismatch, t.mismatch(err), s.Name, err)
		case isTooMany(err):
			return fmt.Errorf("%w: %s script: %w", store.ErrTooManyStates, s.Name, err)
		case isOOM(err):
			t.evict.check.Soon() // a server out of memory may be switched to a policy that evicts
			return fmt.Errorf("%w: %s script: %w", store.ErrFull, s.Name, err)
		case !isTryAgain(err) || attempt == len(tryAgainBackoff):
			return fmt.Errorf("%w: %s script: %w", store.ErrUnavailable, s.Name, err)
		}
		pause := time.NewTimer(tryAgainBackoff[attempt])
		select {
		case <-ctx.Done():
			pause.Stop()
			return fmt.Errorf("%w: %s script: %w (%w while waiting to retry)", store.ErrUnavailable, s.Name, err, ctx.Err())
		case <-pause.C:
		}
	}
}

// op returns the script of op, or why the table has none.
func (t *Table[K]) op(op luascript.Op) (*luascript.Script, error) {
	if t.ops[op] == nil {
		return nil, t.opsErr
	}
	return t.ops[op], nil
}

// Book runs the booking script (luascript.OpBook).
func (t *Table[K]) Book(ctx context.Context, key K, now, cost, maxDelay int64, out []algorithm.Result) (algorithm.Result, store.Booking, bool, error) {
	if _, err := t.op(luascript.OpBook); err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	keys, _, err := t.keys(nil, key, t.declared, nil)
	if err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	if maxDelay < 0 || maxDelay > algorithm.MaxDuration {
		maxDelay = algorithm.MaxDuration
	}
	o := t.submit(ctx, keys, luascript.OpBook, now, cost, []string{strconv.FormatInt(maxDelay, 10), nonce()}, out)
	if o.err != nil || !o.booked {
		return o.r, store.Booking{}, false, o.err
	}
	return o.r, store.Booking{Act: o.act, Cost: cost, Undo: bookingUndo{table: t, values: o.undo}}, true, nil
}

// nonce returns a booking's nonce: the generation a state the booking
// charges gets when it has none (luascript.OpBook), so that a booking's
// undo gives nothing into a state born again since (a Reset, an expiry):
// 64 random bits, base 36.
func nonce() string { return strconv.FormatUint(rand.Uint64(), 36) }

// bookingUndo is a Redis booking's record for Cancel: each limit's value
// before and after the booking and the generation of the state it
// charged, as the script replied them.
type bookingUndo struct {
	table  any // the *Table that booked
	values []string
}

// Cancel runs the cancel script (luascript.OpCancel).
func (t *Table[K]) Cancel(ctx context.Context, key K, now int64, b store.Booking) error {
	u, ok := b.Undo.(bookingUndo)
	if !ok || u.table != any(t) || len(u.values) != 3*len(t.limits) {
		return fmt.Errorf("%w: a booking not made by this Redis table", store.ErrInvalidBooking)
	}
	if b.Cost < 1 {
		return nil // settled to nothing
	}
	if !t.server && b.Act <= now {
		return nil // due: used (the script decides it on the server's clock)
	}
	if _, err := t.op(luascript.OpCancel); err != nil {
		return err
	}
	keys, _, err := t.keys(nil, key, t.declared, nil)
	if err != nil {
		return err
	}
	extra := append([]string{strconv.FormatInt(b.Act, 10)}, u.values...)
	return t.submit(ctx, keys, luascript.OpCancel, now, b.Cost, extra, nil).err
}

// Undo runs the undo script (luascript.OpUndo): before b is due, the
// cancel's; once due, a Reservation's Refund. It returns the least any
// limit gave back. A Reservation's Release (b.Release) runs the undo
// script of the limits that hold alone (holds), on their values: the
// others keep their charge.
func (t *Table[K]) Undo(ctx context.Context, key K, now int64, b store.Booking) (int64, error) {
	u, ok := b.Undo.(bookingUndo)
	if !ok || u.table != any(t) || len(u.values) != 3*len(t.limits) {
		return 0, fmt.Errorf("%w: a booking not made by this Redis table", store.ErrInvalidBooking)
	}
	if b.Cost < 1 {
		return 0, nil // settled to nothing
	}
	if b.Release && len(t.holding) < len(t.limits) {
		if t.holds == nil {
			return 0, nil // no limit holds: nothing to release
		}
		values := make([]string, 0, 3*len(t.holding))
		for _, i := range t.holding {
			values = append(values, u.values[3*i:3*i+3]...)
		}
		b.Release, b.Undo = false, bookingUndo{table: t.holds, values: values}
		return t.holds.Undo(ctx, key, now, b)
	}
	if _, err := t.op(luascript.OpUndo); err != nil {
		return 0, err
	}
	keys, _, err := t.keys(nil, key, t.declared, nil)
	if err != nil {
		return 0, err
	}
	extra := append([]string{strconv.FormatInt(b.Act, 10)}, u.values...)
	o := t.submit(ctx, keys, luascript.OpUndo, now, b.Cost, extra, nil)
	return o.given, o.err
}

// Settle runs the settle script (luascript.OpSettle), which makes b's
// cost n (see store.Settler); n = 0 is Undo. It returns an error wrapping
// store.ErrAlgorithmUnsupported, changing nothing, when a limit's
// algorithm has no Lua part to settle (--@owe).
func (t *Table[K]) Settle(ctx context.Context, key K, now int64, b store.Booking, n int64) (store.Booking, error) {
	u, ok := b.Undo.(bookingUndo)
	if !ok || u.table != any(t) || len(u.values) != 3*len(t.limits) {
		return b, fmt.Errorf("%w: a booking not made by this Redis table", store.ErrInvalidBooking)
	}
	if n < 0 || n > algorithm.MaxLimit {
		return b, fmt.Errorf("%w: settle to %d", algorithm.ErrInvalidCost, n)
	}
	if t.ops[luascript.OpSettle] == nil {
		return b, t.settleErr
	}
	if n == b.Cost {
		return b, nil
	}
	if n == 0 {
		if _, err := t.Undo(ctx, key, now, b); err != nil {
			return b, err
		}
		b.Cost = 0
		return b, nil
	}
	keys, _, err := t.keys(nil, key, t.declared, nil)
	if err != nil {
		return b, err
	}
	extra := append([]string{strconv.FormatInt(b.Act, 10), strconv.FormatInt(b.Cost, 10), strconv.FormatInt(n, 10)}, u.values...)
	o := t.submit(ctx, keys, luascript.OpSettle, now, 1, extra, nil)
	if o.err != nil {
		return b, o.err
	}
	values := slices.Clone(u.values)
	for i := range t.limits {
		values[3*i+1], values[3*i+2] = o.undo[2*i], o.undo[2*i+1]
	}
	b.Cost, b.Undo = n, bookingUndo{table: t, values: values}
	return b, nil
}

// Refund runs the refund script (luascript.OpRefund).
func (t *Table[K]) Refund(ctx context.Context, key K, now, n int64, out []algorithm.Result) (algorithm.Result, error) {
	if _, err := t.op(luascript.OpRefund); err != nil {
		return algorithm.Result{}, err
	}
	keys, _, err := t.keys(nil, key, t.declared, nil)
	if err != nil {
		return algorithm.Result{}, err
	}
	o := t.submit(ctx, keys, luascript.OpRefund, now, n, nil, out)
	return o.r, o.err
}

// submit runs a booking operation for keys: alone, or, with coalescing,
// behind the key's calls in flight, in a batch of its kind (coalesce.go).
func (t *Table[K]) submit(ctx context.Context, keys []string, op luascript.Op, now, cost int64, extra []string, out []algorithm.Result) outcome {
	if err := t.evicting(); err != nil {
		return outcome{err: err}
	}
	if t.lines != nil {
		name := keys[0]
		sh := t.lines.shard(name)
		if req := t.join(ctx, sh, name, keys, op, now, cost, extra); req != nil {
			return t.await(ctx, sh, name, req, out)
		}
		defer t.settle(sh, name)
	}
	req := t.newRequest(ctx, op, now, cost, extra)
	ctx, cancel := t.bounded(ctx)
	defer cancel()
	t.sendOps(ctx, keys, []*request{req})
	<-req.done
	return req.took(out)
}

// opReplyLen is how many values op's script replies per request.
func (t *Table[K]) opReplyLen(op luascript.Op) int {
	n := len(t.limits)
	switch op {
	case luascript.OpBook:
		return 2 + 6*n // booked, the instant, each limit's result, then its values before and after and its generation
	case luascript.OpRefund:
		return 3 * n
	case luascript.OpSettle:
		return 2 * n // each limit's value after and generation
	}
	return n // OpCancel and OpUndo: what each limit gave back
}

// sendOps runs batch, requests of one booking operation, in order: one
// request as its op's script, several as its batch script
// (luascript.OpBatch), in one call either way; each request gets its
// outcome and its done.
func (t *Table[K]) sendOps(ctx context.Context, keys []string, batch []*request) {
	op := batch[0].op
	s := t.ops[op]
	var args Args
	if len(batch) == 1 {
		req := batch[0]
		args = t.opArgs(req.now, req.cost, req.extra...)
	} else {
		s = t.opBatch[op]
		m := 2 + len(batch[0].extra)
		argv := make([]string, 0, 2+m*len(batch))
		argv = append(argv, strconv.Itoa(len(batch)), strconv.Itoa(m))
		for _, req := range batch {
			argv = append(append(argv, t.nowArg(req.now), strconv.FormatInt(req.cost, 10)), req.extra...)
		}
		args = Args{Batch: argv, Rest: t.rest, RestAny: t.restAny}
	}
	var strs []string
	var ints []int64
	err := t.call(ctx, s, func(ctx context.Context, s *luascript.Script) (err error) {
		if op == luascript.OpBook || op == luascript.OpSettle {
			strs, err = t.run.EvalStrings(ctx, runScript(s), keys, args.All())
			return err
		}
		ints, err = t.run.Eval(ctx, runScript(s), false, keys, args, nil)
		return err
	})
	per := t.opReplyLen(op)
	got := len(ints) + len(strs)
	if err == nil && (got%per != 0 || got > per*len(batch) || got == 0) {
		err = fmt.Errorf("%w: %s script replied %d values for %d requests, want %d each", store.ErrUnavailable, s.Name, got, len(batch), per)
	}
	for i, req := range batch {
		switch {
		case err != nil:
			req.outcome = outcome{err: err}
		case (i+1)*per > got:
			// A request before it found a state it cannot read, so the
			// batch stopped there: this one did not run.
			req.outcome = outcome{err: fmt.Errorf("%w: %s script stopped before this request, at a state it cannot read", store.ErrStateMismatch, s.Name)}
		case op == luascript.OpBook:
			req.outcome = t.booked(s, strs[i*per:(i+1)*per], req.rs)
		case op == luascript.OpRefund:
			req.r, req.err = t.result(ints[i*per:(i+1)*per], req.rs)
		case op == luascript.OpSettle:
			req.undo = slices.Clone(strs[i*per : (i+1)*per])
		case op == luascript.OpUndo:
			req.given = slices.Min(ints[i*per : (i+1)*per])
		}
		req.done <- struct{}{}
	}
}

// booked reads a booking script's reply for one request (opReplyLen),
// each limit's result into out.
func (t *Table[K]) booked(s *luascript.Script, reply []string, out []algorithm.Result) outcome {
	n := len(t.limits)
	ints := make([]int64, 2+3*n)
	for i := range ints {
		var err error
		if ints[i], err = strconv.ParseInt(reply[i], 10, 64); err != nil {
			return outcome{err: fmt.Errorf("%w: %s script replied %q, not a whole number", store.ErrUnavailable, s.Name, reply[i])}
		}
	}
	r, err := t.result(ints[2:], out)
	if err != nil {
		return outcome{err: err}
	}
	o := outcome{r: r, booked: ints[0] == 1, act: ints[1]}
	if o.booked {
		o.undo = slices.Clone(reply[2+3*n:])
	}
	return o
}

// isTooMany reports whether err is a script's refusal to add a field to a
// key's hash that holds store.MaxStatesPerKey (an error reply starting
// "RLTOOMANY "), as either client library returns it.
func isTooMany(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "RLTOOMANY ")
}
