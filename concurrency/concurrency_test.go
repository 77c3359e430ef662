package concurrency_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/concurrency"
	"github.com/go-ratelimit/ratelimit/internal/steptest"
)

// Named instants, in Unix µs, d apart: a lease of 4d is a second.
const (
	d   = 250_000 // µs
	sec = 1_000_000

	t0 = 1_700_000_000 * sec
	t1 = t0 + 1*d
	t2 = t0 + 2*d
	t3 = t0 + 3*d
	t4 = t0 + 4*d
	t5 = t0 + 5*d
	t6 = t0 + 6*d
)

const peek = steptest.Peek

type step struct {
	At   int64
	Cost int64
	Want algorithm.Result
}

var ok, no = steptest.OK, steptest.No

func mustNew(t *testing.T, cfg concurrency.Config) *concurrency.Slots {
	t.Helper()
	s, err := concurrency.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return s
}

// TestHoldsCountForTheirLease: holds never released count for their lease
// (a second, 4d), then leave, oldest first.
func TestHoldsCountForTheirLease(t *testing.T) {
	s := mustNew(t, concurrency.Config{Limit: 3, Lease: time.Second})
	steptest.Run(t, s, t0, []step{
		{t0, peek, ok(3, 0)},
		{t0, 2, ok(1, 4*d)},
		{t1, 1, ok(0, 4*d)},
		{t2, 1, no(0, 2*d, 3*d)}, // the two of t0 end at t4
		{t2, 3, no(0, 3*d, 3*d)}, // all three: the one of t1 ends at t5
		{t4 - 1, peek, no(0, 1, d+1)},
		{t4, 2, ok(0, 4*d)},        // the two of t0 have ended
		{t4, peek, no(0, d, 4*d)},  // the one of t1 ends at t5
		{t6, peek, ok(1, 2*d)},     // the two of t4 are left
		{t0 + 8*d, peek, ok(3, 0)}, // none
		{t0 + 8*d, 3, ok(0, 4*d)},  // a fresh key
		{t0 + 8*d, 1, no(0, 4*d, 4*d)},
	})
}

// TestUndoReleasesItsOwnHold: a release gives back the hold's own units at
// once, whichever hold it is, and nothing after its lease has ended.
func TestUndoReleasesItsOwnHold(t *testing.T) {
	s := mustNew(t, concurrency.Config{Limit: 3, Lease: time.Second})
	st := s.Init(algorithm.State{}, t0)
	st, _ = s.Take(st, t0, 1) // A
	st, _ = s.Take(st, t1, 1) // B
	st, _ = s.Take(st, t2, 1) // C
	// B, in the middle, releases: one slot is free, and A and C still count.
	st, given, r := s.Undo(st, t2, t1, 1, 1, true)
	if given != 1 {
		t.Fatalf("B's release gave back %d, want 1", given)
	}
	if want := (algorithm.Result{Remaining: 1, ResetAfter: 4 * d}); r != want {
		t.Fatalf("B's release: got %+v, want %+v", r, want)
	}
	// B again: its entry is gone, nothing more.
	st, given, r = s.Undo(st, t2, t1, 1, 1, true)
	if given != 0 {
		t.Fatalf("B's second release gave back %d, want 0", given)
	}
	if want := (algorithm.Result{Remaining: 1, ResetAfter: 4 * d}); r != want {
		t.Fatalf("B's second release: got %+v, want %+v", r, want)
	}
	// A's lease ends at t4; then D takes a slot. A's late release must
	// not free D's, nor C's.
	st, _ = s.Take(st, t4, 2) // D
	if r := s.Peek(st, t4, 1); r.Remaining != 0 {
		t.Fatalf("at t4: %+v, want nothing left (C and D)", r)
	}
	st, given, r = s.Undo(st, t4, t0, 1, 1, false)
	if r.Remaining != 0 || given != 0 {
		t.Fatalf("A's release after its lease ended freed a slot: %+v", r)
	}
	// C's release frees its one slot, D's its two.
	st, given, r = s.Undo(st, t4, t2, 1, 1, false)
	if r.Remaining != 1 || given != 1 {
		t.Fatalf("C's release: %+v, want 1 left", r)
	}
	// D settles down by one, then releases the other.
	st, given, _ = s.Undo(st, t4, t4, 2, 1, true)
	if given != 1 {
		t.Fatalf("D's partial release gave back %d, want 1", given)
	}
	_, given, r = s.Undo(st, t4, t4, 2, 2, true)
	if want := algorithm.Fresh(3); r != want || given != 1 {
		t.Fatalf("D's release: %+v, want %+v", r, want)
	}
}

// TestRefundByKey releases the newest holds first, never a booking not yet
// due.
func TestRefundByKey(t *testing.T) {
	s := mustNew(t, concurrency.Config{Limit: 4, Lease: time.Second})
	st := s.Init(algorithm.State{}, t0)
	st, _ = s.Take(st, t0, 1)
	st, _ = s.Take(st, t1, 2)
	st, r := s.Refund(st, t2, 1)
	if want := (algorithm.Result{Remaining: 2, ResetAfter: 3 * d}); r != want {
		t.Fatalf("refund of 1: got %+v, want %+v", r, want)
	}
	st, r = s.Refund(st, t2, 5)
	if want := algorithm.Fresh(4); r != want {
		t.Fatalf("refund of all: got %+v, want %+v", r, want)
	}
	st, _ = s.Book(st, t2, t3, 1)
	if _, r = s.Refund(st, t2, 1); r.Remaining != 3 {
		t.Fatalf("a refund by key gave back a booking not yet due: %+v", r)
	}
}

// TestHistories checks every transition against its contract on random
// histories (steptest.Histories), the clock stepping back included.
func TestHistories(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 1))
	for _, limit := range []int64{1, 3, 5, 40} {
		for _, lease := range []int64{1, 7, 1000} {
			s := mustNew(t, concurrency.Config{Limit: limit, Lease: time.Duration(lease) * time.Microsecond})
			for range 20 {
				steptest.Histories(t, s, lease, t0, rand.New(rand.NewPCG(rng.Uint64(), 0)), 200, nil)
			}
		}
	}
}

func TestNewRejects(t *testing.T) {
	for _, cfg := range []concurrency.Config{
		{Limit: 0, Lease: time.Second},
		{Limit: concurrency.MaxLimit + 1, Lease: time.Second},
		{Limit: 1, Lease: 0},
		{Limit: 1, Lease: 999 * time.Nanosecond},
		{Limit: 1, Lease: -time.Second},
	} {
		if _, err := concurrency.New(cfg); !errors.Is(err, algorithm.ErrInvalidConfig) {
			t.Errorf("New(%+v): got %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

func TestSpecTagAndWords(t *testing.T) {
	s := mustNew(t, concurrency.Config{Limit: 5, Lease: 30 * time.Second})
	if got := s.Spec(); got.Name != "concurrency" || len(got.Params) != 2 || got.Params[0] != 5 || got.Params[1] != 30e6 {
		t.Errorf("Spec: got %+v", got)
	}
	if got, want := s.Tag(), (algorithm.Tag{Kind: concurrency.Kind, P0: 30_000_000}); got != want {
		t.Errorf("Tag: got %+v, want %+v", got, want)
	}
	if got, want := s.Tag().Header(), "C30000000:"; got != want {
		t.Errorf("Header: got %q, want %q", got, want)
	}
	if got, want := algorithm.Describe(s), "at most 5 held at once, each for up to 30s"; got != want {
		t.Errorf("Describe: got %q, want %q", got, want)
	}
	if !algorithm.Holds(s) {
		t.Error("Slots is not an algorithm.Holder")
	}
	if got, want := s.Lease(), 30*time.Second; got != want {
		t.Errorf("Lease: got %v, want %v", got, want)
	}
}
