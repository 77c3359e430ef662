package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// faultStore wraps a store: it counts the calls its tables pass on, and
// fails them while it is down.
type faultStore struct {
	next store.Store[string]
	// calls counts Take, Peek and Reset calls that reached the store
	// (those that failed included).
	calls atomic.Int64
	// down makes every call fail with an error wrapping
	// store.ErrUnavailable.
	down atomic.Bool
	// foreign makes every call fail with an error that is not the
	// store's (it does not wrap store.ErrUnavailable).
	foreign atomic.Bool
	// mismatch makes every call fail with an error wrapping
	// store.ErrStateMismatch, as a key of another algorithm's does.
	mismatch atomic.Bool
	// lag, when not 0, advances clk by that much during every call: a
	// store that takes that long to answer, on a fake clock.
	lag atomic.Int64
	clk *clock.Fake
}

var errForeign = errors.New("a failure that is not the store's")

// localOf is what a store wrapping next answers to store.Local: what next
// says.
func localOf(next any) bool {
	l, ok := next.(store.Local)
	return ok && l.Local()
}

func (s *faultStore) Local() bool { return localOf(s.next) }

func (s *faultStore) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.next.Open(limits, clk)
	if err != nil {
		return nil, err
	}
	return &faultTable{next: t, s: s}, nil
}

type faultTable struct {
	next store.Table[string]
	s    *faultStore
}

// fail returns the error the call fails with, if any.
func (t *faultTable) fail(ctx context.Context) error {
	t.s.calls.Add(1)
	if lag := t.s.lag.Load(); lag != 0 {
		t.s.clk.Advance(time.Duration(lag))
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	case t.s.down.Load():
		return fmt.Errorf("%w: connection refused", store.ErrUnavailable)
	case t.s.foreign.Load():
		return errForeign
	case t.s.mismatch.Load():
		return fmt.Errorf("%w: RLMISMATCH rl:{k} holds 16 bytes, not a token bucket", store.ErrStateMismatch)
	}
	return nil
}

func (t *faultTable) Take(ctx context.Context, key string, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	if err := t.fail(ctx); err != nil {
		return algorithm.Result{}, err
	}
	return t.next.Take(ctx, key, now, cost, out)
}

func (t *faultTable) Peek(ctx context.Context, key string, now int64, out []algorithm.Result) (algorithm.Result, error) {
	if err := t.fail(ctx); err != nil {
		return algorithm.Result{}, err
	}
	return t.next.Peek(ctx, key, now, out)
}

func (t *faultTable) Reset(ctx context.Context, key string) error {
	if err := t.fail(ctx); err != nil {
		return err
	}
	return t.next.Reset(ctx, key)
}

// warningStore wraps a store whose tables warn with warnings.
type warningStore struct {
	next     store.Store[string]
	warnings []error
}

func (s *warningStore) Local() bool { return localOf(s.next) }

func (s *warningStore) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.next.Open(limits, clk)
	if err != nil {
		return nil, err
	}
	return warningTable{t, s.warnings}, nil
}

type warningTable struct {
	store.Table[string]
	warnings []error
}

func (t warningTable) Warnings() []error { return t.warnings }

// reportingStore wraps a store whose tables take a reporter
// (store.Reporter) and keep it, for the test to report through.
type reportingStore struct {
	next    store.Store[string]
	reports []func(error)
}

func (s *reportingStore) Local() bool { return localOf(s.next) }

func (s *reportingStore) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.next.Open(limits, clk)
	if err != nil {
		return nil, err
	}
	return &reportingTable{t, s}, nil
}

type reportingTable struct {
	store.Table[string]
	s *reportingStore
}

func (t *reportingTable) ReportTo(report func(error)) { t.s.reports = append(t.s.reports, report) }
