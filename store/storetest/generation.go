package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// This file holds the scenarios of a refund that stays with the state it
// charged (issue 48 parts 3 and 4) and of Settle (issue 52 part 2), run on
// every algorithm: a Reservation gives back only into the generation of
// the key's state it charged, at most what undoing it in the state as it
// is now gives, and says what it gave back.

// drain admits cost 1 on key until the limiter refuses, and returns how
// many it admitted (at most limit+1: a bug that admits forever stops).
func drain(t *testing.T, lim *ratelimit.Limiter[string], key string, limit int) int {
	t.Helper()
	for n := 0; ; n++ {
		d, err := lim.Allow(context.Background(), key)
		if err != nil {
			t.Fatalf("Allow: %v", err)
		}
		if !d.Allowed() || n > limit {
			return n
		}
	}
}

// reserveNow makes n refundable admissions of 1 at now
// (ReserveN(ctx, key, 1, 0)), each of which must be admitted.
func reserveNow(t *testing.T, lim *ratelimit.Limiter[string], key string, n int) []*ratelimit.Reservation[string] {
	t.Helper()
	rs := make([]*ratelimit.Reservation[string], n)
	for i := range rs {
		r, err := lim.ReserveN(context.Background(), key, 1, 0)
		if err != nil || !r.OK() {
			t.Fatalf("admission %d: %v, %v", i+1, r, err)
		}
		rs[i] = r
	}
	return rs
}

// testResetThenRefund spends a limit of 10 through refundable
// admissions, resets the key, spends it again, and refunds the 10 old
// admissions: each gives back nothing (the key's state is another
// generation), and nothing more is admitted.
func testResetThenRefund(t *testing.T, k kind, st store.Store[string]) {
	ctx := context.Background()
	alg, err := k.withLimit(10)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clock.NewFake(time.UnixMicro(epoch))), ratelimit.WithName("rr"))
	if err != nil {
		t.Fatal(err)
	}
	old := reserveNow(t, lim, "rr", 10)
	if err := lim.Reset(ctx, "rr"); err != nil {
		t.Fatal(err)
	}
	if n := drain(t, lim, "rr", 10); n != 10 {
		t.Fatalf("after Reset: %d admitted, want the 10 of a fresh key", n)
	}
	for i, r := range old {
		if given, err := r.Refund(ctx); err != nil || given != 0 {
			t.Fatalf("Refund of admission %d made before Reset: gave back %d, %v; want 0", i+1, given, err)
		}
	}
	if n := drain(t, lim, "rr", 10); n != 0 {
		t.Fatalf("after refunding the 10 admissions made before Reset: %d more admitted, want 0", n)
	}
}

// testExactUndoKeepsGeneration admits 1 on a key (its state has no
// generation yet), then makes two refundable admissions a and b with a
// refund by key of 1 between them, which leaves a bucket's or a window's
// state as a left it. a's Refund then puts back the state before a,
// exactly, and b's gives back its 1: the state is still the one b
// charged (put back, not born again), so that the key holds its whole
// limit again. A Redis store once put back the state before a without the
// generation a's booking gave it, and b gave back nothing.
func testExactUndoKeepsGeneration(t *testing.T, k kind, st store.Store[string]) {
	ctx := context.Background()
	alg, err := k.withLimit(10)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clock.NewFake(time.UnixMicro(epoch))), ratelimit.WithName("eg"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(ctx, "eg"); err != nil || !d.Allowed() {
		t.Fatalf("Allow: %v, %v", d, err)
	}
	a := reserveNow(t, lim, "eg", 1)[0]
	if _, err := lim.Refund(ctx, "eg", 1); err != nil {
		t.Fatalf("Refund by key: %v", err)
	}
	b := reserveNow(t, lim, "eg", 1)[0]
	for _, r := range []struct {
		name string
		res  *ratelimit.Reservation[string]
	}{{"a", a}, {"b", b}} {
		if given, err := r.res.Refund(ctx); err != nil || given != 1 {
			t.Fatalf("Refund of %s: gave back %d, %v; want 1", r.name, given, err)
		}
	}
	if n := drain(t, lim, "eg", 10); n != 10 {
		t.Fatalf("after the refunds: %d admitted, want 10 (1 admitted, 3 charged, 3 given back)", n)
	}
}

// raiseWays are the ways a limit of 10 on a name is raised to 20: the
// limiter that decides from then on.
var raiseWays = []struct {
	name  string
	raise func(t *testing.T, st store.Store[string], base *ratelimit.Limiter[string], to algorithm.Algorithm, clk clock.Clock, name string) *ratelimit.Limiter[string]
}{
	{"SetAlgorithm", func(t *testing.T, _ store.Store[string], base *ratelimit.Limiter[string], to algorithm.Algorithm, _ clock.Clock, _ string) *ratelimit.Limiter[string] {
		if err := base.SetAlgorithm(to); err != nil {
			t.Fatal(err)
		}
		return base
	}},
	{"With", func(t *testing.T, _ store.Store[string], base *ratelimit.Limiter[string], to algorithm.Algorithm, _ clock.Clock, _ string) *ratelimit.Limiter[string] {
		up, err := base.With(to)
		if err != nil {
			t.Fatal(err)
		}
		return up
	}},
	{"Rebuild", func(t *testing.T, st store.Store[string], _ *ratelimit.Limiter[string], to algorithm.Algorithm, clk clock.Clock, name string) *ratelimit.Limiter[string] {
		up, err := ratelimit.New(to, st, ratelimit.WithClock(clk), ratelimit.WithName(name))
		if err != nil {
			t.Fatal(err)
		}
		return up
	}},
}

// testRaiseSpendRefund uses a limit of 10 through refundable admissions,
// raises it to 20 (each of raiseWays), spends the 10 the raise adds, and
// refunds one admission made before the raise: it gives back at most 1,
// and at most 1 more is admitted (never the 10 the key held before the
// later charges, nor a fresh key's 20).
func testRaiseSpendRefund(t *testing.T, k kind, st store.Store[string]) {
	ctx := context.Background()
	ten, err1 := k.withLimit(10)
	twenty, err2 := k.withLimit(20)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	for i, way := range raiseWays {
		for _, which := range []int{0, 9} { // the oldest, whose booking made the key's state, and the newest
			t.Run(fmt.Sprintf("%s/refund%d", way.name, which+1), func(t *testing.T) {
				clk := clock.NewFake(time.UnixMicro(epoch))
				name := fmt.Sprintf("raise%d-%d", i, which)
				lim, err := ratelimit.New(ten, st, ratelimit.WithClock(clk), ratelimit.WithName(name))
				if err != nil {
					t.Fatal(err)
				}
				old := reserveNow(t, lim, "k", 10)
				up := way.raise(t, st, lim, twenty, clk, name)
				if n := drain(t, up, "k", 20); n != 10 {
					t.Fatalf("after the raise to 20: %d admitted, want the 10 it adds", n)
				}
				given, err := old[which].Refund(ctx)
				if err != nil || given > 1 {
					t.Fatalf("Refund of admission %d made before the raise: gave back %d, %v; want at most 1", which+1, given, err)
				}
				if n := drain(t, up, "k", 20); int64(n) > given {
					t.Fatalf("after refunding one admission made before the raise (it said %d): %d more admitted", given, n)
				}
			})
		}
	}
}

// testRefundSaysWhatItGave checks that a Reservation's Refund reports
// what it gave back: all of its cost at once, nothing the second time,
// nothing once the key was reset, nothing once the admission no longer
// counts (its key is fresh again).
func testRefundSaysWhatItGave(t *testing.T, k kind, st store.Store[string]) {
	ctx := context.Background()
	alg, err := k.withLimit(10)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.UnixMicro(epoch))
	lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clk), ratelimit.WithName("says"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := lim.ReserveN(ctx, "k", 3, 0)
	if err != nil || !r.OK() {
		t.Fatalf("ReserveN(3): %v, %v", r, err)
	}
	if given, err := r.Refund(ctx); err != nil || given != 3 {
		t.Fatalf("Refund at once: gave back %d, %v; want 3", given, err)
	}
	if given, err := r.Refund(ctx); err != nil || given != 0 {
		t.Fatalf("second Refund: gave back %d, %v; want 0", given, err)
	}
	late := reserveNow(t, lim, "k", 2)
	d, err := lim.Peek(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(d.ResetAfter() + time.Second) // fresh again: nothing of it counts
	reserveNow(t, lim, "k", 1)
	if given, err := late[0].Refund(ctx); err != nil || given != 0 {
		t.Fatalf("Refund once the key is fresh again: gave back %d, %v; want 0", given, err)
	}
}

// settleUnsupported reports whether err is a store's refusal to settle a
// booking at all (ErrAlgorithmUnsupported: its tables are no
// store.Settler, as the Redis stores' are not yet), which the kit accepts
// when the store refuses every Settle and changes nothing.
func settleUnsupported(err error) bool {
	return errors.Is(err, store.ErrAlgorithmUnsupported)
}

// settleRefused checks a reservation r of cost on lim's key whose first
// Settle the store refused (settleUnsupported): the key is as it was (left
// remaining), a Settle to another cost is refused too, and a Refund still
// gives back the whole cost, leaving all limit.
func settleRefused(t *testing.T, lim *ratelimit.Limiter[string], r *ratelimit.Reservation[string], key string, cost, left, limit int64) {
	t.Helper()
	ctx := context.Background()
	if d, err := lim.Peek(ctx, key); err != nil || d.Remaining() != left {
		t.Fatalf("after a refused Settle: %v, %v; want the key as it was, %d left", d, err, left)
	}
	if err := r.Settle(ctx, int(cost)+1); !settleUnsupported(err) {
		t.Fatalf("a second Settle: %v; want it refused as the first (ErrAlgorithmUnsupported)", err)
	}
	if given, err := r.Refund(ctx); err != nil || given != cost {
		t.Fatalf("Refund after a refused Settle: gave back %d, %v; want %d", given, err, cost)
	}
	if d, err := lim.Peek(ctx, key); err != nil || d.Remaining() != limit {
		t.Fatalf("after the Refund: %v, %v; want all %d left", d, err, limit)
	}
}

// testSettleBucket is issue 52's example: a token bucket of 1,000 a
// minute; a reservation of 100 settled to 300 leaves 700, then to 50
// leaves 950, then to 1,600 denies the next request with RetryAfter the
// debt's refill time, 601 tokens at 60 ms each; a Refund then gives back
// the 1,600 it was settled to.
func testSettleBucket(t *testing.T, st store.Store[string]) {
	ctx := context.Background()
	bucket, err := bucketPer(1000, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(bucket, st, ratelimit.WithClock(clock.NewFake(time.UnixMicro(epoch))), ratelimit.WithName("llm"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := lim.ReserveN(ctx, "tenant", 100, 0)
	if err != nil || !r.OK() {
		t.Fatalf("ReserveN(100): %v, %v", r, err)
	}
	for _, c := range []struct {
		n    int
		left int64
	}{{300, 700}, {50, 950}, {300, 700}} {
		if err := r.Settle(ctx, c.n); err != nil {
			if settleUnsupported(err) && c.n == 300 && c.left == 700 {
				settleRefused(t, lim, r, "tenant", 100, 900, 1000)
				return
			}
			t.Fatalf("Settle(%d): %v", c.n, err)
		}
		if d, err := lim.Peek(ctx, "tenant"); err != nil || d.Remaining() != c.left {
			t.Fatalf("after Settle(%d): %v, %v; want %d left", c.n, d, err, c.left)
		}
	}
	if err := r.Settle(ctx, 1600); err != nil {
		t.Fatalf("Settle(1600): %v", err)
	}
	d, err := lim.Allow(ctx, "tenant")
	if err != nil || d.Allowed() || d.RetryAfter() != 601*60*time.Millisecond {
		t.Fatalf("Allow after Settle(1600): %v, %v; want denied, retry after %v", d, err, 601*60*time.Millisecond)
	}
	if given, err := r.Refund(ctx); err != nil || given != 1600 {
		t.Fatalf("Refund after Settle(1600): gave back %d, %v; want 1600", given, err)
	}
	if d, err := lim.Peek(ctx, "tenant"); err != nil || d.Remaining() != 1000 {
		t.Fatalf("after the Refund: %v, %v; want all 1000 left", d, err)
	}
}

// testSettle settles a reservation of 4 on a limit of 10 of each
// algorithm: to 6 (2 more charged: 4 left), to 2 (4 given back: 8 left),
// to 13 (11 more charged past the limit: denied, a debt), then refunds it
// (13 given back: 10 left). Each step at one instant, where every
// algorithm is exact.
func testSettle(t *testing.T, k kind, st store.Store[string]) {
	ctx := context.Background()
	alg, err := k.withLimit(10)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clock.NewFake(time.UnixMicro(epoch))), ratelimit.WithName("settle"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := lim.ReserveN(ctx, "k", 4, 0)
	if err != nil || !r.OK() {
		t.Fatalf("ReserveN(4): %v, %v", r, err)
	}
	for _, c := range []struct {
		n    int
		left int64
	}{{6, 4}, {2, 8}, {13, 0}} {
		if err := r.Settle(ctx, c.n); err != nil {
			if settleUnsupported(err) && c.n == 6 {
				settleRefused(t, lim, r, "k", 4, 6, 10)
				return
			}
			t.Fatalf("Settle(%d): %v", c.n, err)
		}
		if d, err := lim.Peek(ctx, "k"); err != nil || d.Remaining() != c.left {
			t.Fatalf("after Settle(%d): %v, %v; want %d left", c.n, d, err, c.left)
		}
	}
	if d, err := lim.Allow(ctx, "k"); err != nil || d.Allowed() || d.RetryAfter() <= 0 {
		t.Fatalf("Allow after Settle(13): %v, %v; want denied", d, err)
	}
	if given, err := r.Refund(ctx); err != nil || given != 13 {
		t.Fatalf("Refund after Settle(13): gave back %d, %v; want 13", given, err)
	}
	if d, err := lim.Peek(ctx, "k"); err != nil || d.Remaining() != 10 {
		t.Fatalf("after the Refund: %v, %v; want all 10 left", d, err)
	}
	if err := r.Settle(ctx, 5); err != nil {
		t.Fatalf("Settle after Refund: %v", err)
	}
	if d, err := lim.Peek(ctx, "k"); err != nil || d.Remaining() != 10 {
		t.Fatalf("Settle after Refund: %v, %v; want it to do nothing (10 left)", d, err)
	}
	if err := r.Settle(ctx, -1); err == nil {
		t.Fatal("Settle(-1): no error")
	}
}
