package redistable

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/store"
)

// The booking operations (store.Booker): one script each (luascript.ForOp),
// one round trip, atomic like a decision.

var _ store.Booker[string] = (*Table[string])(nil)

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

// call runs call, a script call, sending it again after a TRYAGAIN reply
// (which did not run it), and returns its error wrapped as the store
// contract wants: RLMISMATCH and WRONGTYPE as store.ErrStateMismatch (a
// configuration error, not an outage; never retried), OOM as
// store.ErrFull (the server is up and answered), anything else as
// store.ErrUnavailable.
func (t *Table[K]) call(ctx context.Context, s *luascript.Script, call func() error) error {
	for attempt := 0; ; attempt++ {
		err := call()
		switch {
		case err == nil:
			return nil
		case IsMismatch(err):
			return fmt.Errorf("%w: %s script: %w", store.ErrStateMismatch, s.Name, err)
		case IsOOM(err):
			return fmt.Errorf("%w: %s script: %w", store.ErrFull, s.Name, err)
		case !IsTryAgain(err) || attempt == len(TryAgainBackoff):
			return fmt.Errorf("%w: %s script: %w", store.ErrUnavailable, s.Name, err)
		}
		pause := time.NewTimer(TryAgainBackoff[attempt])
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
	s, err := t.op(luascript.OpBook)
	if err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	keys, _, err := t.keys(nil, key, t.declared, nil)
	if err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	if maxDelay < 0 || maxDelay > algorithm.MaxDuration {
		maxDelay = algorithm.MaxDuration
	}
	args := t.opArgs(now, cost, strconv.FormatInt(maxDelay, 10)).All()
	var reply []string
	if err := t.call(ctx, s, func() (err error) {
		reply, err = t.run.EvalStrings(ctx, s, keys, args)
		return err
	}); err != nil {
		return algorithm.Result{}, store.Booking{}, false, err
	}
	n := len(t.limits)
	ints := make([]int64, 2+3*n)
	if len(reply) != 2+5*n {
		return algorithm.Result{}, store.Booking{}, false, fmt.Errorf("%w: %s script replied %d values, want %d", store.ErrUnavailable, s.Name, len(reply), 2+5*n)
	}
	for i := range ints {
		if ints[i], err = strconv.ParseInt(reply[i], 10, 64); err != nil {
			return algorithm.Result{}, store.Booking{}, false, fmt.Errorf("%w: %s script replied %q, not a whole number", store.ErrUnavailable, s.Name, reply[i])
		}
	}
	booked, act := ints[0] == 1, ints[1]
	r, err := t.result(ints[2:], out)
	if err != nil || !booked {
		return r, store.Booking{}, false, err
	}
	return r, store.Booking{Act: act, Cost: cost, Undo: bookingUndo{table: t, values: reply[2+3*n:]}}, true, nil
}

// bookingUndo is a Redis booking's record for Cancel: each limit's value
// before and after the booking, as the script replied them.
type bookingUndo struct {
	table  any // the *Table that booked
	values []string
}

// Cancel runs the cancel script (luascript.OpCancel).
func (t *Table[K]) Cancel(ctx context.Context, key K, now int64, b store.Booking) error {
	u, ok := b.Undo.(bookingUndo)
	if !ok || u.table != any(t) || len(u.values) != 2*len(t.limits) {
		return fmt.Errorf("%w: a booking not made by this Redis table", store.ErrInvalidBooking)
	}
	if !t.server && b.Act <= now {
		return nil // due: used (the script decides it on the server's clock)
	}
	s, err := t.op(luascript.OpCancel)
	if err != nil {
		return err
	}
	keys, _, err := t.keys(nil, key, t.declared, nil)
	if err != nil {
		return err
	}
	args := t.opArgs(now, b.Cost, append([]string{strconv.FormatInt(b.Act, 10)}, u.values...)...)
	return t.call(ctx, s, func() error {
		_, err := t.run.Eval(ctx, s, false, keys, args, nil)
		return err
	})
}

// Refund runs the refund script (luascript.OpRefund).
func (t *Table[K]) Refund(ctx context.Context, key K, now, n int64, out []algorithm.Result) (algorithm.Result, error) {
	s, err := t.op(luascript.OpRefund)
	if err != nil {
		return algorithm.Result{}, err
	}
	keys, _, err := t.keys(nil, key, t.declared, nil)
	if err != nil {
		return algorithm.Result{}, err
	}
	args := t.opArgs(now, n)
	var reply []int64
	if err := t.call(ctx, s, func() (err error) {
		reply, err = t.run.Eval(ctx, s, false, keys, args, nil)
		return err
	}); err != nil {
		return algorithm.Result{}, err
	}
	return t.result(reply, out)
}
