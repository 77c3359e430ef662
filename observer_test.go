package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []ratelimit.Event
}

func (r *recorder) Observe(_ context.Context, e ratelimit.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// take returns the events recorded since the last take.
func (r *recorder) take() []ratelimit.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	es := r.events
	r.events = nil
	return es
}

// flakyStore is a memory store whose tables advance a fake clock by delay
// during every call, and fail with ErrStoreUnavailable while down is set.
type flakyStore[K comparable] struct {
	mem   store.Store[K]
	fake  *clock.Fake
	delay time.Duration
	mu    sync.Mutex
	down  bool
}

func (s *flakyStore[K]) setDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

func (s *flakyStore[K]) Local() bool { return localOf(s.mem) }

func (s *flakyStore[K]) Open(limits []store.Limit, clk clock.Clock) (store.Table[K], error) {
	t, err := s.mem.Open(limits, clk)
	if err != nil {
		return nil, err
	}
	return &flakyTable[K]{t, s}, nil
}

type flakyTable[K comparable] struct {
	store.Table[K]
	s *flakyStore[K]
}

var errConnRefused = fmt.Errorf("%w: dial tcp: connection refused", store.ErrUnavailable)

func (t *flakyTable[K]) call() error {
	t.s.fake.Advance(t.s.delay)
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.s.down {
		return errConnRefused
	}
	return nil
}

func (t *flakyTable[K]) Take(ctx context.Context, key K, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	if err := t.call(); err != nil {
		return algorithm.Result{}, err
	}
	return t.Table.Take(ctx, key, now, cost, out)
}

func (t *flakyTable[K]) Peek(ctx context.Context, key K, now int64, out []algorithm.Result) (algorithm.Result, error) {
	if err := t.call(); err != nil {
		return algorithm.Result{}, err
	}
	return t.Table.Peek(ctx, key, now, out)
}

// newObserved returns a limiter with a burst of 2 refilled at 1/s on a
// flaky store whose calls take 3 ms of a fake clock, reporting to rec.
func newObserved(t *testing.T, opts ...ratelimit.Option) (*ratelimit.Limiter[string], *flakyStore[string], *recorder) {
	t.Helper()
	return newObservedAlg(t, mustBucket(t, tokenbucket2), opts...)
}

// newObservedAlg is newObserved with alg.
func newObservedAlg(t *testing.T, alg algorithm.Algorithm, opts ...ratelimit.Option) (*ratelimit.Limiter[string], *flakyStore[string], *recorder) {
	t.Helper()
	fake := clock.NewFake(t0)
	st := &flakyStore[string]{mem: memorystore.New[string](), fake: fake, delay: 3 * time.Millisecond}
	rec := &recorder{}
	opts = append([]ratelimit.Option{ratelimit.WithClock(fake), ratelimit.WithObserver(rec.Observe)}, opts...)
	lim, err := ratelimit.New(alg, st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim, st, rec
}

// tokenbucket2 is a burst of 2 refilled at 1/s.
var tokenbucket2 = tokenbucket.Config{Capacity: 2, Rate: 1}

// checkEvent compares one event with want, Err by errors.Is.
func checkEvent(t *testing.T, got []ratelimit.Event, want ratelimit.Event) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("got %d events %+v, want 1", len(got), got)
	}
	g := got[0]
	if !errors.Is(g.Err, want.Err) || (g.Err == nil) != (want.Err == nil) {
		t.Errorf("Err = %v, want %v", g.Err, want.Err)
	}
	g.Err, want.Err = nil, nil
	if g != want {
		t.Errorf("event\n got %+v\nwant %+v", g, want)
	}
}

func TestObserverReportsEveryDecision(t *testing.T) {
	ctx := context.Background()
	lim, _, rec := newObserved(t, ratelimit.WithName("api"))
	const ms3 = 3 * time.Millisecond

	d, err := lim.AllowN(ctx, "alice", 2)
	if err != nil || !d.Allowed() {
		t.Fatalf("AllowN = %+v, %v", d, err)
	}
	checkEvent(t, rec.take(), ratelimit.Event{Name: "api", Op: ratelimit.OpAllow, Allowed: true,
		Cost: 2, Latency: ms3, Decision: d})

	d, err = lim.Allow(ctx, "alice")
	if err != nil || d.Allowed() {
		t.Fatalf("Allow = %+v, %v, want a denial", d, err)
	}
	checkEvent(t, rec.take(), ratelimit.Event{Name: "api", Op: ratelimit.OpAllow,
		Cost: 1, Latency: ms3, Decision: d})

	d, err = lim.Peek(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	checkEvent(t, rec.take(), ratelimit.Event{Name: "api", Op: ratelimit.OpPeek,
		Cost: 1, Latency: ms3, Decision: d})

	// A bad cost never reaches the store: no latency on the fake clock.
	if _, err := lim.AllowN(ctx, "alice", 0); !errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Fatalf("AllowN(0) = %v, want ErrInvalidCost", err)
	}
	checkEvent(t, rec.take(), ratelimit.Event{Name: "api", Op: ratelimit.OpAllow,
		Cost: 0, Err: ratelimit.ErrInvalidCost})
	if _, err := lim.AllowN(ctx, "alice", 3); !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
		t.Fatalf("AllowN(3) = %v, want ErrCostExceedsLimit", err)
	}
	checkEvent(t, rec.take(), ratelimit.Event{Name: "api", Op: ratelimit.OpAllow,
		Cost: 3, Err: ratelimit.ErrCostExceedsLimit})

	// Reset decides nothing.
	if err := lim.Reset(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); len(got) != 0 {
		t.Errorf("Reset reported %+v, want nothing", got)
	}
}

func TestObserverReportsFailurePolicies(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		policy  ratelimit.FailurePolicy
		allowed bool
		source  ratelimit.Source
		err     error
	}{
		{ratelimit.FailWithError, false, ratelimit.FromStore, ratelimit.ErrStoreUnavailable},
		{ratelimit.FailOpen, true, ratelimit.FromFailOpen, nil},
		{ratelimit.FailClosed, false, ratelimit.FromFailClosed, nil},
		{ratelimit.FailLocal, true, ratelimit.FromLocal, nil},
	} {
		t.Run(tt.source.String(), func(t *testing.T) {
			lim, st, rec := newObserved(t, ratelimit.WithFailurePolicy(tt.policy))
			st.setDown(true)
			d, err := lim.Allow(ctx, "alice")
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("Allow = %+v, %v, want error %v", d, err, tt.err)
			}
			if d.Source() != tt.source {
				t.Errorf("Source = %v, want %v", d.Source(), tt.source)
			}
			checkEvent(t, rec.take(), ratelimit.Event{Op: ratelimit.OpAllow, Allowed: tt.allowed,
				Cost: 1, Latency: 3 * time.Millisecond, Decision: d, Err: tt.err})
		})
	}
}

func TestObserverReportsEachWaitAttempt(t *testing.T) {
	ctx := context.Background()
	lim, st, rec := newObserved(t)
	st.delay = 0
	if _, err := lim.AllowN(ctx, "alice", 2); err != nil {
		t.Fatal(err)
	}
	rec.take()
	done := startWait(ctx, lim, "alice", 1)
	st.fake.BlockUntilTimers(1)
	st.fake.Advance(time.Second)
	if r := <-done; r.err != nil || !r.d.Allowed() {
		t.Fatalf("Wait = %+v, %v", r.d, r.err)
	}
	var outcomes []bool
	for _, e := range rec.take() {
		outcomes = append(outcomes, e.Allowed)
	}
	if want := []bool{false, true}; fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Errorf("Wait reported %v, want %v", outcomes, want)
	}
}

func TestObservedKeys(t *testing.T) {
	ctx := context.Background()
	lim, _, rec := newObserved(t)
	if _, err := lim.Allow(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if e := rec.take(); len(e) != 1 || e[0].Key != nil {
		t.Errorf("without WithObservedKeys: %+v, want one event with no key", e)
	}
	lim, _, rec = newObserved(t, ratelimit.WithObservedKeys())
	if _, err := lim.Allow(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if e := rec.take(); len(e) != 1 || e[0].Key != "alice" {
		t.Errorf("with WithObservedKeys: %+v, want one event with key alice", e)
	}
}

func TestWithObserverNilIgnored(t *testing.T) {
	lim, err := ratelimit.New(mustBucket(t, tokenbucket2), memorystore.New[string](), ratelimit.WithObserver(nil))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(context.Background(), "alice"); err != nil || !d.Allowed() {
		t.Fatalf("Allow = %+v, %v", d, err)
	}
}

// TestObserverAllocs checks that neither an unset observer nor a set one
// (without keys) allocates on a decision in memory.
func TestObserverAllocs(t *testing.T) {
	ctx := context.Background()
	var calls int
	count := func(context.Context, ratelimit.Event) { calls++ }
	for name, opts := range map[string][]ratelimit.Option{
		"unset":   nil,
		"set":     {ratelimit.WithObserver(count), ratelimit.WithName("api")},
		"dry-run": {ratelimit.WithObserver(count), ratelimit.WithDryRun()},
	} {
		t.Run(name, func(t *testing.T) {
			lim, err := ratelimit.New(mustBucket(t, tokenbucket2), memorystore.New[string](), opts...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lim.Allow(ctx, "alice"); err != nil { // the key's state exists from here on
				t.Fatal(err)
			}
			calls = 0
			if allocs := testing.AllocsPerRun(100, func() { lim.Allow(ctx, "alice") }); allocs != 0 {
				t.Errorf("%v allocations per decision, want 0", allocs)
			}
			if opts != nil && calls == 0 {
				t.Error("the observer was not called")
			}
		})
	}
}
