package storetest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/algorithms"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/concurrency"
	"github.com/go-ratelimit/ratelimit/store"
	"pgregory.net/rapid"
)

// The in-flight limit's scenarios (package concurrency: holds that count
// until released or until their lease ends), on one store value or, for
// holdsShared, on two over one backend, as two processes' are.

// holdsLease is the scenarios' lease: long beside anything they do on the
// fake clock unless they move it on purpose.
const holdsLease = time.Minute

// newSlots returns an in-flight limit of limit units, each held for at
// most lease.
func newSlots(t interface{ Fatal(...any) }, limit int64, lease time.Duration) *concurrency.Slots {
	s, err := concurrency.New(concurrency.Config{Limit: limit, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testHolds runs the scenarios of one store value.
func testHolds(t *testing.T, newStore func(t *testing.T) store.Store[string]) {
	t.Run("SixtyFourHolders", func(t *testing.T) {
		st := newStore(t)
		holders(t, []store.Store[string]{st}, "sixty-four", true)
	})
	t.Run("SixtyFourTries", func(t *testing.T) {
		st := newStore(t)
		holders(t, []store.Store[string]{st}, "sixty-four-tries", false)
	})
	t.Run("LeaseEnds", func(t *testing.T) { testLeaseEnds(t, newStore(t)) })
	t.Run("PolicyTokenAndSlot", func(t *testing.T) { testTokenAndSlot(t, newStore(t)) })
	t.Run("Model", func(t *testing.T) {
		st := newStore(t)
		rapid.Check(t, func(rt *rapid.T) { runHoldsModel(rt, st) })
	})
}

// testHoldsShared runs the scenarios of two store values over one backend:
// 64 holders on one key, half through each, never hold more than 5 at
// once.
func testHoldsShared(t *testing.T, a, b store.Store[string]) {
	holders(t, []store.Store[string]{a, b}, "shared-sixty-four", true)
}

// holders runs 64 goroutines on one key of an in-flight limit of 5 named
// name, spread over Limiters on sts, each holding a slot 3 times (while it
// yields the processor twice) and releasing it, and checks that never more
// than 5 are held at once and that every hold was admitted. wait makes
// each goroutine wait for its slot (WaitN, then a release by key: Refund);
// otherwise it tries (ReserveN, which decides a hold now whatever its
// delay) until it gets one, and releases its reservation. The fake clock
// stands still: no lease ends, every slot comes back by a release.
func holders(t *testing.T, sts []store.Store[string], name string, wait bool) {
	ctx := context.Background()
	clk := clock.NewFake(time.UnixMicro(epoch))
	lims := make([]*ratelimit.Limiter[string], len(sts))
	for i, st := range sts {
		lim, err := ratelimit.New(newSlots(t, 5, holdsLease), st, ratelimit.WithClock(clk), ratelimit.WithName(name))
		if err != nil {
			t.Fatal(err)
		}
		lims[i] = lim
	}
	const goroutines, rounds = 64, 3
	var held, most, admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		lim := lims[g%len(lims)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				release, err := acquire(ctx, lim, wait)
				if err != nil {
					t.Error(err)
					return
				}
				admitted.Add(1)
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				runtime.Gosched()
				runtime.Gosched()
				held.Add(-1)
				if err := release(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := most.Load(); got > 5 {
		t.Errorf("%d held at once on an in-flight limit of 5", got)
	}
	if got := admitted.Load(); got != goroutines*rounds {
		t.Errorf("%d holds admitted, want %d", got, goroutines*rounds)
	}
	if d, err := lims[0].Peek(ctx, "k"); err != nil || d.Remaining() != 5 {
		t.Errorf("after every hold was released: %v, %v; want 5 left", d, err)
	}
}

// acquire takes a slot of lim for the key "k": waiting for it (WaitN),
// or trying until it gets one (ReserveN with a delay, which a hold
// ignores), and returns how to release it.
func acquire(ctx context.Context, lim *ratelimit.Limiter[string], wait bool) (func() error, error) {
	if wait {
		if _, err := lim.WaitN(ctx, "k", 1); err != nil {
			return nil, err
		}
		return func() error {
			_, err := lim.Refund(ctx, "k", 1)
			return err
		}, nil
	}
	for {
		r, err := lim.ReserveN(ctx, "k", 1, time.Minute)
		if err != nil {
			return nil, err
		}
		if r.OK() {
			return func() error {
				_, err := r.Release(ctx)
				return err
			}, nil
		}
		runtime.Gosched()
	}
}

// testLeaseEnds: holds never released free their slots when their lease
// ends, not a microsecond before.
func testLeaseEnds(t *testing.T, st store.Store[string]) {
	ctx := context.Background()
	clk := clock.NewFake(time.UnixMicro(epoch))
	lim, err := ratelimit.New(newSlots(t, 5, holdsLease), st, ratelimit.WithClock(clk), ratelimit.WithName("lease-ends"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if r, err := lim.ReserveN(ctx, "k", 1, 0); err != nil || !r.OK() {
			t.Fatalf("hold %d: %v, %v", i, r, err)
		} // never released: its holder died
		clk.Advance(time.Second)
	}
	r, err := lim.ReserveN(ctx, "k", 1, 0)
	if want := holdsLease - 5*time.Second; err != nil || r.OK() || r.Decision().RetryAfter() != want {
		t.Fatalf("a sixth hold: %v, %v; want denied, retry after %v (the first lease's end)", r.Decision(), err, want)
	}
	clk.Advance(holdsLease - 5*time.Second - time.Microsecond)
	if r, err := lim.ReserveN(ctx, "k", 1, 0); err != nil || r.OK() {
		t.Fatalf("a µs before the first lease ends: %v, %v; want denied", r.Decision(), err)
	}
	clk.Advance(time.Microsecond)
	if r, err := lim.ReserveN(ctx, "k", 1, 0); err != nil || !r.OK() {
		t.Fatalf("when the first lease ends: %v, %v; want admitted", r.Decision(), err)
	}
}

// testTokenAndSlot: a Policy of a rate limit and an in-flight limit
// charges a request a token and a slot, or neither, and Release gives the
// slot back alone.
func testTokenAndSlot(t *testing.T, st store.Store[string]) {
	ctx := context.Background()
	// The first of the list is a token bucket: 3 at once, refilled over
	// 3 hours, which no step here waits for.
	rate, err := algorithms.All()[0].Per(3, 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ratelimit.NewPolicy(st, []ratelimit.Limit{
		{Name: "rate", Algorithm: rate}, {Name: "inflight", Algorithm: newSlots(t, 2, holdsLease)},
	}, ratelimit.WithClock(clock.NewFake(time.UnixMicro(epoch))), ratelimit.WithName("token-and-slot"))
	if err != nil {
		t.Fatal(err)
	}
	left := func(step, want string) {
		t.Helper()
		d, err := p.Peek(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("rate %d, slots %d", d.Limits()[0].Remaining(), d.Limits()[1].Remaining()); got != want {
			t.Errorf("%s: %s, want %s", step, got, want)
		}
	}
	var rs []*ratelimit.Reservation[string]
	for range 3 {
		r, err := p.ReserveN(ctx, "k", 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	if !rs[0].OK() || !rs[1].OK() || rs[2].OK() {
		t.Fatalf("three requests on 2 slots: admitted %v %v %v", rs[0].OK(), rs[1].OK(), rs[2].OK())
	}
	left("two held, a third refused", "rate 1, slots 0")
	if _, err := rs[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	left("one released", "rate 1, slots 1")
	if _, err := rs[1].Refund(ctx); err != nil {
		t.Fatal(err)
	}
	left("one refunded", "rate 2, slots 2")
}

// holdsModel is the reference of the model test: holds on one key, taken
// by processes whose clocks run skew apart at most, each hold counting
// from its admission until it is released or its lease ends.
type holdsModel struct {
	limit, lease, skew int64 // units; µs; µs
	now                int64 // real time, µs since epoch
	offs               []int64
	lims               []*ratelimit.Limiter[string]
	clks               []*clock.Fake
	holds              []*modelHold
}

// modelHold is a hold the model test took.
type modelHold struct {
	r        *ratelimit.Reservation[string]
	at, cost int64 // admitted at real time at
	released bool  // released within its lease
}

// live returns the units of the holds taken and neither released nor past
// end µs before their lease ends (0: exactly at it).
func (m *holdsModel) live(end int64) int64 {
	var n int64
	for _, h := range m.holds {
		if !h.released && m.now < h.at+m.lease-end {
			n += h.cost
		}
	}
	return n
}

// runHoldsModel checks random histories of holds, releases (once, twice,
// and past the lease), refunds, holders that die and clocks that move,
// taken by one to three processes (Limiters under one name, each on a fake
// clock of its own) on st: with their clocks together, every decision is
// the model's, to the unit; with clocks up to a quarter lease apart, no
// instant sees more than the limit held by holds within their lease less
// that skew (a process whose clock runs ahead sees another's hold end
// that much early).
func runHoldsModel(t *rapid.T, st store.Store[string]) {
	ctx := context.Background()
	m := &holdsModel{limit: rapid.Int64Range(1, 6).Draw(t, "limit"), lease: rapid.Int64Range(2, 1_000_000).Draw(t, "lease µs")}
	if rapid.Bool().Draw(t, "skewed") {
		m.skew = m.lease / 4
	}
	name := fmt.Sprintf("holds-model-%d", modelRuns.Add(1))
	slots := newSlots(t, m.limit, time.Duration(m.lease)*time.Microsecond)
	for range rapid.IntRange(1, 3).Draw(t, "processes") {
		off := rapid.Int64Range(0, m.skew).Draw(t, "clock offset µs")
		clk := clock.NewFake(time.UnixMicro(epoch + off))
		lim, err := ratelimit.New(slots, st, ratelimit.WithClock(clk), ratelimit.WithName(name))
		if err != nil {
			t.Fatal(err)
		}
		m.offs, m.clks, m.lims = append(m.offs, off), append(m.clks, clk), append(m.lims, lim)
	}
	t.Repeat(map[string]func(*rapid.T){
		"hold": func(t *rapid.T) {
			p := rapid.IntRange(0, len(m.lims)-1).Draw(t, "process")
			cost := rapid.Int64Range(1, m.limit).Draw(t, "cost")
			want := m.live(0)+cost <= m.limit
			r, err := m.lims[p].ReserveN(ctx, "k", int(cost), 0)
			if err != nil {
				t.Fatal(err)
			}
			if m.skew == 0 && r.OK() != want {
				t.Fatalf("a hold of %d with %d of %d held: admitted %v, want %v", cost, m.live(0), m.limit, r.OK(), want)
			}
			if r.OK() {
				m.holds = append(m.holds, &modelHold{r: r, at: m.now, cost: cost})
			}
		},
		"release": func(t *rapid.T) {
			if len(m.holds) == 0 {
				t.Skip("no hold")
			}
			h := m.holds[rapid.IntRange(0, len(m.holds)-1).Draw(t, "hold")]
			refund := rapid.Bool().Draw(t, "by Refund")
			var err error
			if refund {
				_, err = h.r.Refund(ctx)
			} else {
				_, err = h.r.Release(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.now < h.at+m.lease { // once its lease has ended, it held nothing to give back
				h.released = true
			}
		},
		"advance": func(t *rapid.T) {
			d := rapid.Int64Range(0, m.lease/2+1).Draw(t, "µs")
			m.now += d
			for i, clk := range m.clks {
				clk.Set(time.UnixMicro(epoch + m.offs[i] + m.now))
			}
		},
		"": func(t *rapid.T) {
			if m.skew > 0 {
				if n := m.live(m.skew); n > m.limit {
					t.Fatalf("%d held within their lease less the skew %dµs, over the limit %d", n, m.skew, m.limit)
				}
				return
			}
			d, err := m.lims[0].Peek(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if want := max(0, m.limit-m.live(0)); d.Remaining() != want {
				t.Fatalf("Peek: %v, want %d left", d, want)
			}
		},
	})
}

// modelRuns numbers the model's runs, so that each uses a name of its own.
var modelRuns atomic.Int64

// The in-flight limit is one of the kinds every conformance run checks,
// as a registered algorithm (Register) whose model is its own transition:
// each scenario of a kind (taking turns, bookings, refunds, settles,
// reconfiguration, switches) runs on it too, besides the holds scenarios.
// It is registered here rather than in package algorithms, whose entries
// are rates (Per, Spread); for a hold, Per and Spread are n held at once,
// each for up to period.
func init() {
	slots := func(n int64, lease time.Duration) (algorithm.Algorithm, error) {
		return concurrency.New(concurrency.Config{Limit: n, Lease: lease})
	}
	Register(Algorithm{
		Entry: algorithms.Entry{
			Name:   "concurrency",
			Per:    slots,
			Spread: slots,
			Sample: func(limit int64) (algorithm.Algorithm, error) { return slots(limit, time.Second) },
		},
		Draw: func(t *rapid.T) (algorithm.Algorithm, int64) {
			limit := rapid.Int64Range(1, 20).Draw(t, "limit")
			lease := rapid.OneOf(rapid.Int64Range(1, 10), rapid.Int64Range(1, 3_000_000)).Draw(t, "lease µs")
			alg, err := slots(limit, time.Duration(lease)*time.Microsecond)
			if err != nil {
				t.Fatalf("a drawn config was rejected: %v", err)
			}
			return alg, lease
		},
	})
}

// holdsNow returns the delay within which ReserveN books for limits algs
// given maxDelay (µs, negative: any): 0 when a limit holds, since a hold
// is decided now whatever the delay (no store knows when a slot frees;
// WaitN waits for one), maxDelay otherwise.
func holdsNow(algs []algorithm.Algorithm, maxDelay int64) int64 {
	for _, a := range algs {
		if algorithm.Holds(a) {
			return 0
		}
	}
	return maxDelay
}
