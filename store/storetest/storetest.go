// Package storetest checks that a store.Store keeps the store contract.
//
// It is to stores what testing/slogtest is to slog handlers: every store
// (in memory, in Redis through go-redis or rueidis, on miniredis, on a
// cluster) runs the same suite, unchanged, from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store[string] {
//			return memorystore.New[string]()
//		})
//	}
//
// The suite drives every algorithm (both token buckets, GCRA, the sliding
// log, the sliding-window counter, the fixed window) through Limiters
// built with ratelimit.New on a fake clock, so it uses only the public API
// and never sleeps. Besides fixed scenarios it runs model-based property
// tests (pgregory.net/rapid) that compare every decision with a slow
// reference model (for GCRA, the continuous bucket's: it must decide as
// that bucket does), and a concurrency test that needs the store's
// operations to be atomic.
//
// The property tests honour rapid's flags: -rapid.checks (default 100) and
// -rapid.steps set how many sequences and how many actions per sequence
// are tried; -short divides both; a failure prints the shrunk sequence of
// actions and how to replay it (-rapid.seed or the fail file rapid writes
// under testdata/rapid).
//
// The fake clocks move independently of real time. A store may forget a
// key only once the limiter's clock has reached the instant the key's last
// ResetAfter named; a store that also expires keys on a clock of its own
// (a Redis TTL) needs a margin of real time above that for the suite to
// pass, since a sequence may take milliseconds while its fake clock stands
// still.
package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/algorithms"
	"github.com/go-ratelimit/ratelimit/store"
	"pgregory.net/rapid"
)

// Run checks that stores made by newStore keep the store.Store contract,
// for every algorithm. newStore is called once per subtest and must return
// an empty store (or one whose keys the suite cannot meet, such as a fresh
// key prefix); it may register cleanups on the t it is given.
//
// For each algorithm Run checks, on a fake clock:
//   - a new key is admitted with Remaining = Limit − cost, and Peek on an
//     unseen key reports it full without creating or consuming anything;
//   - a denied request changes nothing, and the same request is admitted
//     exactly RetryAfter later, not a microsecond sooner;
//   - a key is back to its fresh state exactly ResetAfter later;
//   - Reset makes a key fresh; keys are independent, including empty,
//     binary, invalid UTF-8, 4 KiB and Redis-syntax keys;
//   - 32 goroutines racing on one key are admitted exactly Limit in total,
//     each decision's Remaining telling one consistent order;
//   - random sequences of AllowN, Peek, Reset and clock moves decide as a
//     reference model does and never admit more than the algorithm's bound;
//   - random sequences in which the limit changes (SetAlgorithm to another
//     configuration of the same kind, under a kept state ID, by either
//     rule) decide as the algorithms' Inherit carries each key's state;
//   - tightening 100 → 10 after 95 used admits at most 5 at once, and a
//     minute's limit changed to an hour's and back gives no negative or
//     overlong duration, in place and by a Limiter built anew;
//   - every other kind's algorithm under a key's state ID fails with
//     ErrStateMismatch, changing nothing, or, when asked to reset on
//     mismatch, starts the key from what that state had used
//     (algorithm.Carry): two kinds taking turns on a key at one instant,
//     alone, through Limiter.With or in a Policy, admit at most the
//     larger limit;
//   - random sequences of AllowN, Peek, ReserveN, Cancel, Refund and clock
//     moves (back too) on a Limiter and on a Policy answer, field for field,
//     as the algorithms' own transitions (algorithm.Booker) applied as the
//     store contract says; a booking cancelled with nothing charged since
//     leaves the key as it was;
//   - a Policy of two or three limits of random algorithms decides, limit
//     by limit, as each limit's model does when a request is charged to
//     every limit or to none; racing goroutines charge every limit exactly
//     what was admitted;
//   - a key holds at most store.MaxStatesPerKey states, one per state ID:
//     a Take, a Policy's Take or a booking under one more fails with
//     ErrTooManyStates, whatever the failure policy, charging nothing;
//   - an in-flight limit (package concurrency) of 5 on one key never
//     holds more than 5 for 64 goroutines holding and releasing slots,
//     waiting for them or trying; a hold never released frees its slot
//     when its lease ends, to the µs; a Policy of a rate and an in-flight
//     limit charges a token and a slot or neither, and Release gives the
//     slot back alone; random holds, releases (twice, and after the
//     lease), refunds and clock moves of one to three processes decide as
//     a model of the holds does, and with clocks up to a quarter lease
//     apart never hold more than the limit within the lease less the skew.
//   - for tables that implement store.Multi, random TakeAlls over keys and
//     tables of random algorithms decide all-or-none as the algorithms'
//     transitions do, two requests of one state fail with ErrSameState,
//     refusals charge nothing and name their request, and racing TakeAlls
//     on two keys charge both alike.
func Run(t *testing.T, newStore func(t *testing.T) store.Store[string]) {
	t.Helper()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { runKind(t, k, newStore) })
	}
	runSwitches(t, newStore)
	t.Run("SettleBucket", func(t *testing.T) { testSettleBucket(t, newStore(t)) })
	t.Run("Policy", func(t *testing.T) {
		t.Run("Model", func(t *testing.T) { testPolicyModel(t, newStore(t)) })
		t.Run("Reconfigure", func(t *testing.T) { testPolicyReconfigure(t, newStore(t)) })
		t.Run("Concurrent", func(t *testing.T) { testPolicyConcurrent(t, newStore(t)) })
		t.Run("Errors", func(t *testing.T) { testPolicyErrors(t, newStore(t)) })
		t.Run("Booking", func(t *testing.T) { testBooking(t, newStore(t), nil, 3) })
	})
	t.Run("BookingErrors", func(t *testing.T) { testBookingErrors(t, newStore(t)) })
	t.Run("FailedBookingWritesNothing", func(t *testing.T) { testFailedBookingWritesNothing(t, newStore(t)) })
	t.Run("RefusedTakeWritesNothing", func(t *testing.T) { testRefusedTakeWritesNothing(t, newStore(t)) })
	t.Run("LogRefundThenWiderWindow", func(t *testing.T) { testLogRefundThenWiderWindow(t, newStore(t)) })
	t.Run("LogRefundUnderNarrowerWindow", func(t *testing.T) { testLogRefundUnderNarrowerWindow(t, newStore(t)) })
	t.Run("LogRefundKeepsKnownAdmission", func(t *testing.T) { testLogRefundKeepsKnownAdmission(t, newStore(t)) })
	t.Run("CancelKeepsAnotherKindsState", func(t *testing.T) { testCancelKeepsAnotherKindsState(t, newStore(t)) })
	t.Run("LogRefundsAcrossWidenings", func(t *testing.T) { testLogRefundsAcrossWidenings(t, newStore(t)) })
	t.Run("TooManyStates", func(t *testing.T) { testTooManyStates(t, newStore(t)) })
	t.Run("JobRunnerRefundByHandle", func(t *testing.T) { testJobRunner(t, newStore(t), true) })
	t.Run("JobRunnerRefundByKey", func(t *testing.T) { testJobRunner(t, newStore(t), false) })
	t.Run("LateRefunds", func(t *testing.T) { testLateRefunds(t, newStore(t)) })
	t.Run("RefundsInWindow", func(t *testing.T) { testRefundsInWindow(t, newStore(t)) })
	t.Run("Holds", func(t *testing.T) { testHolds(t, newStore) })
	t.Run("Multi", func(t *testing.T) { runMulti(t, newStore) })
}

// RunAlgorithm is Run for one algorithm, named as its Kind (one of
// package algorithms', or one registered with Register): its own checks,
// then those of a key whose state another kind wrote, for every other
// kind. A new algorithm's tests run it on each store.
func RunAlgorithm(t *testing.T, name string, newStore func(t *testing.T) store.Store[string]) {
	t.Helper()
	for _, k := range kinds {
		if k.name == name {
			t.Run(k.name, func(t *testing.T) { runKind(t, k, newStore) })
			runSwitches(t, newStore)
			return
		}
	}
	t.Fatalf("storetest: no algorithm %q (register it with Register)", name)
}

// runKind runs the checks of one algorithm.
func runKind(t *testing.T, k kind, newStore func(t *testing.T) store.Store[string]) {
	for _, c := range basicCases {
		t.Run(c.name, func(t *testing.T) {
			c.run(newFixture(t, k, basicLimit, newStore(t)))
		})
	}
	t.Run("Concurrent", func(t *testing.T) {
		testConcurrent(newFixture(t, k, concurrentLimit, newStore(t)))
	})
	t.Run("ConcurrentCosts", func(t *testing.T) {
		testConcurrentCosts(newFixture(t, k, concurrentLimit, newStore(t)))
	})
	t.Run("Model", func(t *testing.T) {
		testModel(t, k, newStore(t))
	})
	t.Run("Reconfigure", func(t *testing.T) {
		testReconfigure(t, k, newStore(t))
	})
	t.Run("Tighten", func(t *testing.T) { testTighten(t, k, newStore(t)) })
	t.Run("WindowChange", func(t *testing.T) { testWindowChange(t, k, newStore(t)) })
	t.Run("Booking", func(t *testing.T) { testBooking(t, newStore(t), &k, 1) })
	t.Run("ResetThenRefund", func(t *testing.T) { testResetThenRefund(t, k, newStore(t)) })
	t.Run("ExactUndoKeepsGeneration", func(t *testing.T) { testExactUndoKeepsGeneration(t, k, newStore(t)) })
	t.Run("RaiseSpendRefund", func(t *testing.T) { testRaiseSpendRefund(t, k, newStore(t)) })
	t.Run("RefundSaysWhatItGave", func(t *testing.T) { testRefundSaysWhatItGave(t, k, newStore(t)) })
	t.Run("Settle", func(t *testing.T) { testSettle(t, k, newStore(t)) })
	t.Run("SettleAcrossChanges", func(t *testing.T) { testSettleAcrossChanges(t, k, newStore(t)) })
	t.Run("RefundAcrossChanges", func(t *testing.T) { testRefundAcrossChanges(t, k, newStore(t)) })
}

// runSwitches runs the checks of keys whose state another kind wrote, for
// every pair of kinds.
func runSwitches(t *testing.T, newStore func(t *testing.T) store.Store[string]) {
	t.Run("Mismatch", func(t *testing.T) { testMismatch(t, newStore(t)) })
	t.Run("SwitchTakingTurns", func(t *testing.T) { testSwitchTakingTurns(t, newStore(t), "New") })
	t.Run("SwitchTakingTurnsWith", func(t *testing.T) { testSwitchTakingTurns(t, newStore(t), "With") })
	t.Run("SwitchTakingTurnsPolicy", func(t *testing.T) { testSwitchTakingTurns(t, newStore(t), "Policy") })
}

// Differential runs the same random operation sequences (rapid) on limiters
// over a and b, both with fake clocks set identically, and fails unless
// every Decision field and every error agree. Used to prove the Redis
// stores give bit-identical decisions to the memory store. a and b are
// called once per algorithm, as Run's newStore is.
func Differential(t *testing.T, a, b func(t *testing.T) store.Store[string]) {
	t.Helper()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			testDifferential(t, k, a(t), b(t))
		})
	}
}

// kind is an algorithm the suite runs every store with.
type kind struct {
	name string
	// withLimit returns the algorithm in a fixed configuration with the
	// given limit, for the scenario and concurrency tests.
	withLimit func(limit int64) (algorithm.Algorithm, error)
	// per returns the algorithm admitting about n per period, as its
	// package's Per.
	per func(n int64, period time.Duration) (algorithm.Algorithm, error)
	// draw returns a random configuration and its reference model.
	draw func(t *rapid.T) setup
	// freshIn is how many of its Per's periods a used key takes at most
	// to be fresh again.
	freshIn time.Duration
	// proportional: it carries a state by the Proportional rule too
	// (algorithm.CheckRule), not AsIs alone.
	proportional bool
	// mayRefuseSettle: a store may refuse to settle its bookings
	// (settleUnsupported): an algorithm registered with Register, whose
	// Lua body may have no --@owe part. Every store settles the module's
	// six.
	mayRefuseSettle bool
}

// kinds are the algorithms of package algorithms, in its order, each with
// its reference model (model.go).
var kinds = func() []kind {
	var ks []kind
	for _, e := range algorithms.All() {
		m, ok := models[e.Name]
		if !ok {
			panic("storetest: algorithm " + e.Name + " has no reference model (models in model.go)")
		}
		sample, err := e.Sample(1)
		if err != nil {
			panic("storetest: " + e.Name + ": " + err.Error())
		}
		ks = append(ks, kind{name: e.Name, withLimit: e.Sample, per: e.Per, draw: m.draw, freshIn: m.freshIn,
			proportional: algorithm.CheckRule(sample, algorithm.Proportional) == nil})
	}
	return ks
}()

// epoch is where the fake clocks start: a Unix instant with a fraction of
// a second, so that no fixed window starts on it.
const epoch = int64(1_700_000_000_123_457)

// fresh is the decision for a key in its fresh state: what Peek reports
// for a key never seen.
func fresh(limit int64) ratelimit.Decision {
	return ratelimit.DecisionFields{Allowed: true, Limit: limit, Remaining: limit}.Decision()
}

// micros converts microseconds to a Duration.
func micros(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

// show formats a decision compactly, for messages.
func show(d ratelimit.Decision) string {
	verdict := "denied"
	if d.Allowed() {
		verdict = "allowed"
	}
	source := ""
	if d.Source() != ratelimit.FromStore {
		source = " source=" + d.Source().String()
	}
	return fmt.Sprintf("{%s remaining=%d/%d retry=%dµs reset=%dµs%s}",
		verdict, d.Remaining(), d.Limit(), d.RetryAfter().Microseconds(), d.ResetAfter().Microseconds(), source)
}

// sanity returns what is wrong with d on its own, as the answer to
// AllowN(cost), or to Peek when cost is 0, of an algorithm whose limit is
// limit; or nil.
func sanity(d ratelimit.Decision, limit, cost int64) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if d.Limit() != limit {
		fail("Limit: got %d, want %d", d.Limit(), limit)
	}
	if d.Remaining() < 0 || d.Remaining() > limit {
		fail("Remaining: got %d, want it within [0, %d]", d.Remaining(), limit)
	}
	if d.RetryAfter() < 0 || d.RetryAfter()%time.Microsecond != 0 {
		fail("RetryAfter: got %v, want a whole number of microseconds ≥ 0", d.RetryAfter())
	}
	if d.ResetAfter() < 0 || d.ResetAfter()%time.Microsecond != 0 {
		fail("ResetAfter: got %v, want a whole number of microseconds ≥ 0", d.ResetAfter())
	}
	if d.Allowed() != (d.RetryAfter() == 0) {
		fail("RetryAfter: got %v with Allowed=%v, want 0 exactly when allowed", d.RetryAfter(), d.Allowed())
	}
	if (d.ResetAfter() == 0) != (d.Remaining() == limit) {
		fail("ResetAfter: got %v with Remaining=%d, want 0 exactly when Remaining is the limit %d", d.ResetAfter(), d.Remaining(), limit)
	}
	if d.RetryAfter() > d.ResetAfter() {
		fail("RetryAfter: got %v, want at most ResetAfter %v (a fresh key admits any cost)", d.RetryAfter(), d.ResetAfter())
	}
	switch {
	case cost == 0 && d.Allowed() != (d.Remaining() >= 1):
		fail("Allowed: got %v with Remaining=%d, want true exactly when Remaining ≥ 1", d.Allowed(), d.Remaining())
	case cost > 0 && d.Allowed() && d.Remaining() > limit-cost:
		fail("Remaining: got %d after admitting %d, want at most %d", d.Remaining(), cost, limit-cost)
	case cost > 0 && !d.Allowed() && d.Remaining() >= cost:
		fail("Remaining: got %d with cost %d denied, want less than the cost", d.Remaining(), cost)
	}
	return errors.Join(errs...)
}
