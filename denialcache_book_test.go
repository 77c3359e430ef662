package ratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// bookCountingStore wraps a store whose tables book: it counts the
// bookings that reach it.
type bookCountingStore struct {
	next  store.Store[string]
	books atomic.Int64
}

func (s *bookCountingStore) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.next.Open(limits, clk)
	if err != nil {
		return nil, err
	}
	return &bookCountingTable{Table: t, Booker: t.(store.Booker[string]), s: s}, nil
}

type bookCountingTable struct {
	store.Table[string]
	store.Booker[string]
	s *bookCountingStore
}

func (t *bookCountingTable) Book(ctx context.Context, key string, now, cost, maxDelay int64, out []algorithm.Result) (algorithm.Result, store.Booking, bool, error) {
	t.s.books.Add(1)
	return t.Booker.Book(ctx, key, now, cost, maxDelay, out)
}

// TestDenialCacheAnswersReservesAtNow: a reservation at now of cost 1
// (ReserveN(ctx, key, 1, 0), the refundable admission that httplimit's
// and grpcratelimit's WithRefund make of every request) is a decision at
// now, so a standing denial answers a flood of them locally, exactly as
// the store would, as it answers Allow; a reservation that may wait goes
// to the store.
func TestDenialCacheAnswersReservesAtNow(t *testing.T) {
	ctx := context.Background()
	for name, alg := range allAlgorithms(t) {
		t.Run(name, func(t *testing.T) {
			shared := newSharedStore(t, alg)
			st := &bookCountingStore{next: shared}
			fake := clock.NewFake(t0)
			cached, err := ratelimit.New(alg, st, ratelimit.WithName("api"), ratelimit.WithClock(fake), ratelimit.WithDenialCache(64))
			if err != nil {
				t.Fatal(err)
			}
			other, err := ratelimit.New(alg, shared, ratelimit.WithName("api"), ratelimit.WithClock(fake))
			if err != nil {
				t.Fatal(err)
			}
			for {
				r, err := cached.ReserveN(ctx, "k", 1, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !r.OK() {
					break
				}
			}
			fake.Advance(time.Microsecond)
			before := st.books.Load()
			for range 100 {
				r, err := cached.ReserveN(ctx, "k", 1, 0)
				if err != nil {
					t.Fatal(err)
				}
				want, err := other.Peek(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				if r.OK() || r.Decision() != want {
					t.Fatalf("cached ReserveN(k, 1, 0) = %v %+v, the store says %+v", r.OK(), r.Decision(), want)
				}
			}
			if n := st.books.Load() - before; n != 0 {
				t.Fatalf("%d of 100 reservations at now reached the store while the denial stood", n)
			}
			if _, err := cached.ReserveN(ctx, "k", 1, time.Hour); err != nil {
				t.Fatal(err)
			}
			if n := st.books.Load() - before; n != 1 {
				t.Fatalf("a reservation that may wait made %d store calls, want 1", n)
			}
		})
	}
}
