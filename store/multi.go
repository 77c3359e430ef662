package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

var (
	// ErrSameState reports a TakeAll whose requests name one state twice:
	// one key under limits of the same state ID, in one table or in two.
	// Each request of a TakeAll reads the state as it stood before any
	// was charged, so two charges of one state cannot be decided
	// together; nothing is charged. It is the caller's error.
	ErrSameState = errors.New("ratelimit: two requests of one TakeAll name the same state")

	// ErrForeignTable reports a TakeAll with a request whose table was
	// not opened on the store of the table called (or is wrapped in
	// another's). Nothing is charged.
	ErrForeignTable = errors.New("ratelimit: a request's table is not of this store")
)

// Request is one part of a TakeAll: a cost for a key, decided by the
// limits of a table. TakeAll sets Result.
type Request[K comparable] struct {
	// Table is the table whose limits decide; it must be opened on the
	// same store as the table whose TakeAll is called.
	Table Table[K]
	// Key is the key charged.
	Key K
	// Now is the instant of the decision, Unix µs, as for Table.Take.
	Now int64
	// Cost is what the request costs: 1 ≤ Cost ≤ every one of Table's
	// limits' Limit (the caller checks, as for Take).
	Cost int64
	// Out, when not nil, has one element per limit of Table and receives
	// each limit's result, as Take's out does.
	Out []algorithm.Result
	// Result is set by TakeAll: the request's limits' results combined
	// (algorithm.Combine).
	Result algorithm.Result
}

// Multi is implemented by tables that decide several requests at once,
// each for a key under the limits of a table of the same store,
// all-or-none: the tables of this module's stores. Package ratelimit's
// AllowAll uses it when every Limiter's table is one.
type Multi[K comparable] interface {
	// TakeAll decides reqs together: when every request's limits admit
	// its cost, each is charged and reports the state it left (RetryAfter
	// 0), and TakeAll returns true; otherwise none is charged, each
	// request reports what its table's Peek would for its cost (RetryAfter
	// 0 for those that alone would be admitted), and TakeAll returns
	// false. A store decides them as one atomic step where it can (the
	// memory store always; a Redis store for all the keys that live on
	// one node); where it cannot, it says how it gives back what it
	// charged. Two requests naming one state (ErrSameState), or a request
	// of another store's table (ErrForeignTable), fail the call, charging
	// nothing; so does any error a request alone would have (a key too
	// long, too many states), with its request's index.
	TakeAll(ctx context.Context, reqs []Request[K]) (bool, error)
}

// RequestError is the error of a TakeAll that one of its requests
// caused: Index is the request's place in the slice, Err what its table
// said (matching the store's errors, ErrKeyTooLong say, through Unwrap).
type RequestError struct {
	Index int
	Err   error
}

func (e *RequestError) Error() string { return fmt.Sprintf("request %d: %v", e.Index, e.Err) }

// Unwrap returns what the request's table said.
func (e *RequestError) Unwrap() error { return e.Err }

// TakeEach is TakeAll for a store that cannot decide several keys at
// once: it takes each request in turn, in order, and when one is denied
// gives back what the requests before it were charged (their tables'
// Refund, which must be Bookers, reporting then the state left for a
// cost of 1) and reports, for the requests after it, what Peek says. It is all-or-none as far as Refund is exact: a store that
// changed a key between a Take and its Refund (another process's
// request) may leave the key charged less than it would have been.
// Stores use it as their TakeAll where the requests span nodes they
// cannot decide together.
func TakeEach[K comparable](ctx context.Context, reqs []Request[K]) (bool, error) {
	for i := range reqs {
		rq := &reqs[i]
		r, err := rq.Table.Take(ctx, rq.Key, rq.Now, rq.Cost, rq.Out)
		if err != nil {
			return false, errors.Join(&RequestError{Index: i, Err: err}, giveBack(ctx, reqs[:i]))
		}
		rq.Result = r
		if r.Allowed() {
			continue
		}
		err = giveBack(ctx, reqs[:i])
		for j := i + 1; j < len(reqs) && err == nil; j++ {
			rq := &reqs[j]
			var r algorithm.Result
			if r, err = rq.Table.Peek(ctx, rq.Key, rq.Now, rq.Out); err != nil {
				err = &RequestError{Index: j, Err: err}
			}
			rq.Result = r
		}
		return false, err
	}
	return true, nil
}

// giveBack refunds each request's cost, reporting the state each is left
// in as Peek would (for a cost of 1).
func giveBack[K comparable](ctx context.Context, reqs []Request[K]) error {
	var errs []error
	for i := range reqs {
		rq := &reqs[i]
		b, ok := rq.Table.(Booker[K])
		if !ok {
			errs = append(errs, &RequestError{Index: i, Err: fmt.Errorf("%w: %T cannot give back a charge", ErrAlgorithmUnsupported, rq.Table)})
			continue
		}
		r, err := b.Refund(ctx, rq.Key, rq.Now, rq.Cost, rq.Out)
		if err != nil {
			errs = append(errs, &RequestError{Index: i, Err: err})
			continue
		}
		rq.Result = r
	}
	return errors.Join(errs...)
}
