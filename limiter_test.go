package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// t0 is a fixed instant on a whole second, so that windows aligned to the
// epoch start there.
var t0 = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

func mustBucket(t testing.TB, cfg tokenbucket.Config) *tokenbucket.Bucket {
	t.Helper()
	b, err := tokenbucket.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newLimiter returns a limiter on a fresh memory store with a fake clock
// set to t0.
func newLimiter[K comparable](t testing.TB, alg algorithm.Algorithm) (*ratelimit.Limiter[K], *clock.Fake) {
	t.Helper()
	fake := clock.NewFake(t0)
	lim, err := ratelimit.New(alg, memorystore.New[K](), ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	return lim, fake
}

// allAlgorithms returns one algorithm of each kind, each with a limit of 5.
func allAlgorithms(t testing.TB) map[string]algorithm.Algorithm {
	t.Helper()
	interval, err := tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 5, Tokens: 1, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log, err := slidinglog.New(slidinglog.Config{Limit: 5, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	window, err := fixedwindow.New(fixedwindow.Config{Limit: 5, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]algorithm.Algorithm{
		"tokenbucket":          mustBucket(t, tokenbucket.Config{Capacity: 5, Rate: 1}),
		"tokenbucket-interval": interval,
		"slidinglog":           log,
		"fixedwindow":          window,
	}
}

func TestNewRejectsNil(t *testing.T) {
	alg := mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1})
	if _, err := ratelimit.New[string](nil, memorystore.New[string]()); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("New(nil algorithm) error = %v, want ErrInvalidConfig", err)
	}
	if _, err := ratelimit.New[string](alg, nil); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("New(nil store) error = %v, want ErrInvalidConfig", err)
	}
}

// TestNewRejectsTypedNil: an algorithm, store or clock left nil by an
// ignored error is a typed nil, unequal to nil as an interface; New
// rejects it rather than panic on its first method call.
func TestNewRejectsTypedNil(t *testing.T) {
	alg := mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1})
	st := memorystore.New[string]()
	var (
		nilBucket *tokenbucket.Bucket
		nilWindow *fixedwindow.Window
		nilStore  *memorystore.Store[string]
		nilClock  *clock.Fake
	)
	cases := map[string]func() error{
		"nil *tokenbucket.Bucket": func() error { _, err := ratelimit.New[string](nilBucket, st); return err },
		"nil *fixedwindow.Window": func() error { _, err := ratelimit.New[string](nilWindow, st); return err },
		"nil *memorystore.Store":  func() error { _, err := ratelimit.New[string](alg, nilStore); return err },
		"nil *clock.Fake":         func() error { _, err := ratelimit.New[string](alg, st, ratelimit.WithClock(nilClock)); return err },
		"policy, nil algorithm": func() error {
			_, err := ratelimit.NewPolicy[string](st, []ratelimit.Limit{{Name: "a", Algorithm: nilBucket}})
			return err
		},
		"policy, nil store": func() error {
			_, err := ratelimit.NewPolicy[string](nilStore, []ratelimit.Limit{{Name: "a", Algorithm: alg}})
			return err
		},
	}
	for name, newOne := range cases {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panicked: %v", name, p)
				}
			}()
			if err := newOne(); !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("%s: error = %v, want ErrInvalidConfig", name, err)
			}
		}()
	}
}

func TestNewRejectsServerClockOnMemoryStore(t *testing.T) {
	alg := mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1})
	_, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithClock(clock.Server()))
	if !errors.Is(err, ratelimit.ErrClockUnsupported) {
		t.Errorf("New(clock.Server() on the memory store) error = %v, want ErrClockUnsupported", err)
	}
}

func TestNewIgnoresNilClock(t *testing.T) {
	alg := mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1})
	lim, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithClock(nil))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(context.Background(), "k"); err != nil || !d.Allowed() {
		t.Errorf("Allow = %+v, %v; want allowed", d, err)
	}
}

func TestAllowNInvalidCostConsumesNothing(t *testing.T) {
	ctx := context.Background()
	for name, alg := range allAlgorithms(t) {
		t.Run(name, func(t *testing.T) {
			lim, _ := newLimiter[string](t, alg)
			if got, want := lim.Limit(), int64(5); got != want {
				t.Fatalf("Limit() = %d, want %d", got, want)
			}
			// One admitted request, so the key has state to leave alone.
			if d, err := lim.AllowN(ctx, "k", 2); err != nil || !d.Allowed() {
				t.Fatalf("AllowN(2) = %+v, %v; want allowed", d, err)
			}
			before, err := lim.Peek(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				n    int
				want error
			}{
				{0, ratelimit.ErrInvalidCost},
				{-1, ratelimit.ErrInvalidCost},
				{-1 << 40, ratelimit.ErrInvalidCost},
				{6, ratelimit.ErrCostExceedsLimit},
				{1 << 50, ratelimit.ErrCostExceedsLimit},
			} {
				d, err := lim.AllowN(ctx, "k", tc.n)
				if !errors.Is(err, tc.want) {
					t.Errorf("AllowN(%d) error = %v, want %v", tc.n, err, tc.want)
				}
				if d != (ratelimit.Decision{}) {
					t.Errorf("AllowN(%d) decision = %+v, want the zero Decision", tc.n, d)
				}
				// A bad cost on a key never seen creates no state either.
				if _, err := lim.AllowN(ctx, "fresh", tc.n); !errors.Is(err, tc.want) {
					t.Errorf("AllowN(fresh, %d) error = %v, want %v", tc.n, err, tc.want)
				}
			}
			after, err := lim.Peek(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Errorf("Peek after bad costs = %+v, want unchanged %+v", after, before)
			}
			if got, err := lim.Peek(ctx, "fresh"); err != nil || got.Remaining() != 5 || !got.Allowed() {
				t.Errorf("Peek(fresh) = %+v, %v; want a full key", got, err)
			}
		})
	}
}

func TestDecisionDurations(t *testing.T) {
	ctx := context.Background()
	// One token per second: durations come back from microseconds exactly.
	lim, fake := newLimiter[string](t, mustBucket(t, tokenbucket.Config{Capacity: 2, Rate: 1}))

	d, err := lim.AllowN(ctx, "k", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := ratelimit.DecisionFields{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: 2 * time.Second}.Decision()
	if d != want {
		t.Fatalf("t0: AllowN(2) = %+v, want %+v", d, want)
	}

	fake.Advance(250 * time.Millisecond)
	d, err = lim.Allow(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	want = ratelimit.DecisionFields{Limit: 2, RetryAfter: 750 * time.Millisecond, ResetAfter: 1750 * time.Millisecond}.Decision()
	if d != want {
		t.Fatalf("t0+250ms: Allow = %+v, want %+v", d, want)
	}

	fake.Advance(time.Microsecond)
	d, err = lim.Peek(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	want = ratelimit.DecisionFields{Limit: 2, RetryAfter: 749999 * time.Microsecond, ResetAfter: 1749999 * time.Microsecond}.Decision()
	if d != want {
		t.Fatalf("t0+250.001ms: Peek = %+v, want %+v", d, want)
	}

	// Sub-microsecond time is truncated: the limiter decides in whole µs.
	fake.Advance(999 * time.Nanosecond)
	if d2, err := lim.Peek(ctx, "k"); err != nil || d2 != d {
		t.Fatalf("999ns later: Peek = %+v, %v; want unchanged %+v", d2, err, d)
	}

	// A fixed window of one minute: RetryAfter is the time to the next
	// minute.
	w, err := fixedwindow.New(fixedwindow.Config{Limit: 1, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	wlim, wfake := newLimiter[string](t, w)
	wfake.Advance(20*time.Second + 1500*time.Microsecond)
	if _, err := wlim.Allow(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	d, err = wlim.Allow(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	left := 40*time.Second - 1500*time.Microsecond
	want = ratelimit.DecisionFields{Limit: 1, RetryAfter: left, ResetAfter: left}.Decision()
	if d != want {
		t.Fatalf("fixed window: Allow = %+v, want %+v", d, want)
	}
}

func TestResetForgetsKey(t *testing.T) {
	ctx := context.Background()
	for name, alg := range allAlgorithms(t) {
		t.Run(name, func(t *testing.T) {
			lim, _ := newLimiter[string](t, alg)
			if d, err := lim.AllowN(ctx, "k", 5); err != nil || !d.Allowed() {
				t.Fatalf("AllowN(5) = %+v, %v; want allowed", d, err)
			}
			if d, err := lim.Allow(ctx, "k"); err != nil || d.Allowed() {
				t.Fatalf("Allow on a drained key = %+v, %v; want denied", d, err)
			}
			if err := lim.Reset(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if d, err := lim.Peek(ctx, "k"); err != nil || d != (ratelimit.DecisionFields{Allowed: true, Limit: 5, Remaining: 5}.Decision()) {
				t.Fatalf("Peek after Reset = %+v, %v; want a fresh key", d, err)
			}
			if d, err := lim.AllowN(ctx, "k", 5); err != nil || !d.Allowed() {
				t.Fatalf("AllowN(5) after Reset = %+v, %v; want allowed", d, err)
			}
		})
	}
}

type waitResult struct {
	d   ratelimit.Decision
	err error
}

// startWait runs lim.WaitN in a goroutine and returns the channel its
// result arrives on.
func startWait[K comparable](ctx context.Context, lim *ratelimit.Limiter[K], key K, n int) <-chan waitResult {
	c := make(chan waitResult, 1)
	go func() {
		d, err := lim.WaitN(ctx, key, n)
		c <- waitResult{d, err}
	}()
	return c
}

// assertBlocked fails if a result has arrived on c. The caller has made
// sure the waiter sleeps on the fake clock (BlockUntilTimers), so a result
// could only come from a wrong wake-up.
func assertBlocked(t *testing.T, c <-chan waitResult) {
	t.Helper()
	select {
	case r := <-c:
		t.Fatalf("Wait returned %+v, %v while it should block", r.d, r.err)
	default:
	}
}

func TestWaitBlocksForExactlyRetryAfter(t *testing.T) {
	ctx := context.Background()
	for name, alg := range allAlgorithms(t) {
		t.Run(name, func(t *testing.T) {
			lim, fake := newLimiter[string](t, alg)
			fake.Advance(100 * time.Millisecond) // off the window edge
			if d, err := lim.AllowN(ctx, "k", 5); err != nil || !d.Allowed() {
				t.Fatalf("AllowN(5) = %+v, %v; want allowed", d, err)
			}
			d, err := lim.Peek(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if d.RetryAfter() <= time.Microsecond {
				t.Fatalf("Peek on a drained key: RetryAfter = %v, want more than 1µs", d.RetryAfter())
			}

			done := startWait(ctx, lim, "k", 1)
			fake.BlockUntilTimers(1)
			fake.Advance(d.RetryAfter() - time.Microsecond)
			assertBlocked(t, done)
			if got := fake.Timers(); got != 1 {
				t.Fatalf("Timers() = %d 1µs before RetryAfter, want 1", got)
			}
			fake.Advance(time.Microsecond)
			r := <-done
			if r.err != nil || !r.d.Allowed() {
				t.Fatalf("Wait = %+v, %v; want allowed", r.d, r.err)
			}
			if got := fake.Timers(); got != 0 {
				t.Errorf("Timers() = %d after Wait returned, want 0", got)
			}
		})
	}
}

func TestWaitAllowedAtOnce(t *testing.T) {
	lim, fake := newLimiter[string](t, mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1}))
	d, err := lim.Wait(context.Background(), "k")
	if err != nil || !d.Allowed() {
		t.Fatalf("Wait on a fresh key = %+v, %v; want allowed", d, err)
	}
	if got := fake.Timers(); got != 0 {
		t.Errorf("Timers() = %d, want 0: an admitted Wait does not sleep", got)
	}
}

func TestWaitNCostExceedsLimitFailsAtOnce(t *testing.T) {
	lim, fake := newLimiter[string](t, mustBucket(t, tokenbucket.Config{Capacity: 3, Rate: 1}))
	ctx := context.Background()
	if _, err := lim.WaitN(ctx, "k", 4); !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
		t.Errorf("WaitN(4) with limit 3: error = %v, want ErrCostExceedsLimit", err)
	}
	if _, err := lim.WaitN(ctx, "k", 0); !errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Errorf("WaitN(0): error = %v, want ErrInvalidCost", err)
	}
	if got := fake.Timers(); got != 0 {
		t.Errorf("Timers() = %d, want 0", got)
	}
	if d, err := lim.Peek(ctx, "k"); err != nil || d.Remaining() != 3 {
		t.Errorf("Peek = %+v, %v; want nothing consumed", d, err)
	}
}

func TestWaitNWouldExceedDeadline(t *testing.T) {
	// One token per hour; the context allows a minute.
	lim, fake := newLimiter[string](t, mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1.0 / 3600}))
	ctx := context.Background()
	if _, err := lim.Allow(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d, err := lim.Wait(ctx, "k")
	if !errors.Is(err, ratelimit.ErrWouldExceedDeadline) {
		t.Errorf("Wait error = %v, want ErrWouldExceedDeadline", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait error = %v, want it to match context.DeadlineExceeded", err)
	}
	if d.Allowed() || d.RetryAfter() != time.Hour {
		t.Errorf("Wait decision = %+v, want denied with RetryAfter 1h", d)
	}
	if got := fake.Timers(); got != 0 {
		t.Errorf("Timers() = %d, want 0: the wait must not start", got)
	}
}

func TestWaitCancelledWhileWaiting(t *testing.T) {
	lim, fake := newLimiter[string](t, mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1}))
	if _, err := lim.Allow(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := startWait(ctx, lim, "k", 1)
	fake.BlockUntilTimers(1)
	cancel()
	r := <-done
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Wait error = %v, want context.Canceled", r.err)
	}
	if r.d.Allowed() {
		t.Errorf("Wait decision = %+v, want not allowed", r.d)
	}
	if got := fake.Timers(); got != 0 {
		t.Errorf("Timers() = %d after cancel, want 0: the timer must be stopped", got)
	}
	// Nothing was consumed by the cancelled wait.
	fake.Advance(time.Second)
	if d, err := lim.Allow(context.Background(), "k"); err != nil || !d.Allowed() {
		t.Errorf("Allow 1s later = %+v, %v; want allowed", d, err)
	}
}

func TestWaitContextAlreadyDone(t *testing.T) {
	lim, _ := newLimiter[string](t, mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := lim.Wait(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context: error = %v, want context.Canceled", err)
	}
	if d, err := lim.Peek(context.Background(), "k"); err != nil || d.Remaining() != 1 {
		t.Errorf("Peek = %+v, %v; want nothing consumed", d, err)
	}
}

func TestWaitLoopsWhenAnotherCallerWins(t *testing.T) {
	ctx := context.Background()
	lim, fake := newLimiter[string](t, mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1}))
	if _, err := lim.Allow(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	// Two waiters sleep until the one token comes back; one gets it, the
	// other must ask again and sleep for the next one.
	a, b := startWait(ctx, lim, "k", 1), startWait(ctx, lim, "k", 1)
	fake.BlockUntilTimers(2)
	fake.Advance(time.Second)
	var first waitResult
	var loser <-chan waitResult
	select {
	case first = <-a:
		loser = b
	case first = <-b:
		loser = a
	}
	if first.err != nil || !first.d.Allowed() {
		t.Fatalf("first waiter: %+v, %v; want allowed", first.d, first.err)
	}
	fake.BlockUntilTimers(1)
	assertBlocked(t, loser)
	fake.Advance(time.Second - time.Microsecond)
	assertBlocked(t, loser)
	fake.Advance(time.Microsecond)
	if r := <-loser; r.err != nil || !r.d.Allowed() {
		t.Fatalf("second waiter: %+v, %v; want allowed", r.d, r.err)
	}
}

// TestWaitHoldsItsPlace: a waiter's booking holds its place. A plain
// Allow while it sleeps is denied, instead of taking the token the waiter
// waits for (which sent it back to sleep before bookings), and the waiter
// is admitted at exactly its booked instant, with one store call.
func TestWaitHoldsItsPlace(t *testing.T) {
	ctx := context.Background()
	lim, fake := newLimiter[string](t, mustBucket(t, tokenbucket.Config{Capacity: 2, Rate: 1}))
	if _, err := lim.AllowN(ctx, "k", 2); err != nil {
		t.Fatal(err)
	}
	// The waiter needs 2 tokens: booked for t0+2s.
	done := startWait(ctx, lim, "k", 2)
	fake.BlockUntilTimers(1)
	fake.Advance(time.Second)
	if d, err := lim.Allow(ctx, "k"); err != nil || d.Allowed() || d.RetryAfter() != 2*time.Second {
		t.Fatalf("Allow at t0+1s = %+v, %v; want denied until t0+3s, behind the booking", d, err)
	}
	fake.Advance(time.Second - time.Microsecond)
	assertBlocked(t, done)
	fake.Advance(time.Microsecond)
	if r := <-done; r.err != nil || !r.d.Allowed() {
		t.Fatalf("WaitN(2) = %+v, %v; want allowed at t0+2s", r.d, r.err)
	}
}

type tenantKey struct {
	tenant string
	id     int
}

// checkKeys drains a and checks that b, a distinct key, is untouched, and
// that aAgain, equal to a, shares a's state.
func checkKeys[K comparable](t *testing.T, a, aAgain, b K) {
	t.Helper()
	ctx := context.Background()
	lim, _ := newLimiter[K](t, mustBucket(t, tokenbucket.Config{Capacity: 2, Rate: 1}))
	if d, err := lim.AllowN(ctx, a, 2); err != nil || !d.Allowed() {
		t.Fatalf("AllowN(%v, 2) = %+v, %v; want allowed", a, d, err)
	}
	if d, err := lim.Allow(ctx, aAgain); err != nil || d.Allowed() {
		t.Errorf("Allow(%v) after draining the equal key %v = %+v, %v; want denied", aAgain, a, d, err)
	}
	if d, err := lim.Peek(ctx, b); err != nil || d.Remaining() != 2 {
		t.Errorf("Peek(%v) = %+v, %v; want untouched", b, d, err)
	}
	if d, err := lim.Allow(ctx, b); err != nil || !d.Allowed() || d.Remaining() != 1 {
		t.Errorf("Allow(%v) = %+v, %v; want allowed with 1 remaining", b, d, err)
	}
	if err := lim.Reset(ctx, aAgain); err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Peek(ctx, a); err != nil || d.Remaining() != 2 {
		t.Errorf("Peek(%v) after Reset(%v) = %+v, %v; want fresh", a, aAgain, d, err)
	}
}

func TestKeyTypes(t *testing.T) {
	t.Run("string", func(t *testing.T) {
		prefix := "user-"
		checkKeys(t, "user-1", prefix+"1", "user-2")
	})
	t.Run("int", func(t *testing.T) { checkKeys(t, 1, 1, -1) })
	t.Run("uint64", func(t *testing.T) { checkKeys[uint64](t, 1<<63, 1<<63, 1) })
	t.Run("netip.Addr", func(t *testing.T) {
		checkKeys(t, netip.MustParseAddr("192.0.2.1"), netip.AddrFrom4([4]byte{192, 0, 2, 1}), netip.MustParseAddr("::ffff:192.0.2.1"))
	})
	t.Run("struct", func(t *testing.T) {
		checkKeys(t, tenantKey{"acme", 7}, tenantKey{"ac" + string("me"[:]), 7}, tenantKey{"acme", 8})
	})
}

// TestStoreWarnings: the warnings of a store's table (store.Warner) reach
// the error handler when a Limiter or Policy is built, and slog's default
// logger when there is no handler.
func TestStoreWarnings(t *testing.T) {
	alg := mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1})
	evicting := fmt.Errorf("%w: maxmemory-policy allkeys-lru on 127.0.0.1:1", store.ErrEvicting)
	st := &warningStore{next: memorystore.New[string](), warnings: []error{evicting}}
	var got []error
	handler := ratelimit.WithErrorHandler(func(err error) { got = append(got, err) })
	if _, err := ratelimit.New[string](alg, st, handler); err != nil {
		t.Fatal(err)
	}
	if _, err := ratelimit.NewPolicy[string](st, []ratelimit.Limit{{Name: "a", Algorithm: alg}}, handler); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !errors.Is(got[0], store.ErrEvicting) || !errors.Is(got[1], store.ErrEvicting) {
		t.Errorf("the error handler got %v; want the store's warning once per Limiter or Policy", got)
	}

	var logged bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	if _, err := ratelimit.New[string](alg, st, ratelimit.WithName("logged")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "allkeys-lru") {
		t.Errorf("with no error handler, slog got %q; want a warning naming the policy", logged.String())
	}
}

// TestStoreReports: what a store's table finds after it was opened
// (store.Reporter) reaches the error handler of the Limiter or Policy it
// was opened for, and slog's default logger when there is none.
func TestStoreReports(t *testing.T) {
	alg := mustBucket(t, tokenbucket.Config{Capacity: 1, Rate: 1})
	evicting := fmt.Errorf("%w: maxmemory-policy allkeys-lru on 127.0.0.1:1", store.ErrEvicting)
	st := &reportingStore{next: memorystore.New[string]()}
	var got []error
	handler := ratelimit.WithErrorHandler(func(err error) { got = append(got, err) })
	if _, err := ratelimit.New[string](alg, st, handler); err != nil {
		t.Fatal(err)
	}
	if _, err := ratelimit.NewPolicy[string](st, []ratelimit.Limit{{Name: "a", Algorithm: alg}}, handler); err != nil {
		t.Fatal(err)
	}
	if len(st.reports) != 2 || len(got) != 0 {
		t.Fatalf("%d tables took a reporter, %d reports before any finding; want 2 and 0", len(st.reports), len(got))
	}
	for _, report := range st.reports {
		report(evicting)
	}
	if len(got) != 2 || !errors.Is(got[0], store.ErrEvicting) || !errors.Is(got[1], store.ErrEvicting) {
		t.Errorf("the error handler got %v; want the finding once per Limiter or Policy", got)
	}

	var logged bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	if _, err := ratelimit.New[string](alg, st, ratelimit.WithName("logged")); err != nil {
		t.Fatal(err)
	}
	st.reports[2](evicting)
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "allkeys-lru") {
		t.Errorf("with no error handler, slog got %q; want a warning naming the policy", logged.String())
	}
}
