package otelratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/otelratelimit"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// slowStore is a memory store whose calls take delay on a fake clock, and
// fail with ErrUnavailable when down.
type slowStore struct {
	mem   store.Store[string]
	fake  *clock.Fake
	delay time.Duration
	down  bool
}

// Local says what the memory store under it says (store.Local).
func (s *slowStore) Local() bool {
	l, ok := s.mem.(store.Local)
	return ok && l.Local()
}

func (s *slowStore) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.mem.Open(limits, clk)
	return slowTable{t, s}, err
}

type slowTable struct {
	store.Table[string]
	s *slowStore
}

func (t slowTable) Take(ctx context.Context, key string, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	t.s.fake.Advance(t.s.delay)
	if t.s.down {
		return algorithm.Result{}, fmt.Errorf("%w: connection refused", store.ErrUnavailable)
	}
	return t.Table.Take(ctx, key, now, cost, out)
}

func (t slowTable) Peek(ctx context.Context, key string, now int64, out []algorithm.Result) (algorithm.Result, error) {
	t.s.fake.Advance(t.s.delay)
	if t.s.down {
		return algorithm.Result{}, fmt.Errorf("%w: connection refused", store.ErrUnavailable)
	}
	return t.Table.Peek(ctx, key, now, out)
}

func newObserver(t *testing.T) (*otelratelimit.Observer, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	obs, err := otelratelimit.NewObserver(otelratelimit.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		t.Fatal(err)
	}
	return obs, reader
}

// newLimiter returns a limiter with a burst of 2, refilled at 1/s, whose
// store calls take 2 ms.
func newLimiter(t *testing.T, obs *otelratelimit.Observer, opts ...ratelimit.Option) (*ratelimit.Limiter[string], *slowStore) {
	t.Helper()
	fake := clock.NewFake(t0)
	st := &slowStore{mem: memorystore.New[string](), fake: fake, delay: 2 * time.Millisecond}
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st, append([]ratelimit.Option{ratelimit.WithClock(fake), ratelimit.WithObserver(obs.Observe)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return lim, st
}

// collected is one collection, by instrument name, then by attribute set
// ("k=v,k=v" in key order).
type collected struct {
	units  map[string]string
	sums   map[string]map[string]int64
	counts map[string]map[string]uint64  // histograms' counts
	totals map[string]map[string]float64 // histograms' sums
}

func collect(t *testing.T, reader *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	c := collected{units: map[string]string{}, sums: map[string]map[string]int64{},
		counts: map[string]map[string]uint64{}, totals: map[string]map[string]float64{}}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelratelimit.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otelratelimit.ScopeName)
		}
		for _, m := range sm.Metrics {
			c.units[m.Name] = m.Unit
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !data.IsMonotonic || data.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s is not a cumulative counter", m.Name)
				}
				c.sums[m.Name] = map[string]int64{}
				for _, dp := range data.DataPoints {
					c.sums[m.Name][attrs(dp.Attributes)] = dp.Value
				}
			case metricdata.Histogram[float64]:
				c.counts[m.Name], c.totals[m.Name] = map[string]uint64{}, map[string]float64{}
				for _, dp := range data.DataPoints {
					c.counts[m.Name][attrs(dp.Attributes)] = dp.Count
					c.totals[m.Name][attrs(dp.Attributes)] = dp.Sum
				}
				if !slices.Equal(data.DataPoints[0].Bounds, otelratelimit.DurationBuckets) {
					t.Errorf("%s has bounds %v, want DurationBuckets", m.Name, data.DataPoints[0].Bounds)
				}
			default:
				t.Errorf("%s is a %T", m.Name, m.Data)
			}
		}
	}
	return c
}

func attrs(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
	}
	return strings.Join(parts, ",")
}

func diff[V comparable](t *testing.T, what string, got, want map[string]V) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			t.Errorf("%s{%s} = %v (present: %v), want %v", what, k, g, ok, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s{%s} = %v, want none", what, k, got[k])
		}
	}
}

func TestObserver(t *testing.T) {
	ctx := context.Background()
	obs, reader := newObserver(t)

	api, _ := newLimiter(t, obs, ratelimit.WithName("api"), ratelimit.WithObservedKeys())
	api.AllowN(ctx, "alice", 2) // allowed
	api.Allow(ctx, "alice")     // denied
	api.Allow(ctx, "bob")       // allowed
	api.Peek(ctx, "alice")      // denied
	api.AllowN(ctx, "alice", 0) // invalid cost: never reaches the store
	api.AllowN(ctx, "alice", 3) // above the limit

	dry, _ := newLimiter(t, obs, ratelimit.WithName("shadow"), ratelimit.WithDryRun())
	dry.AllowN(ctx, "alice", 2)
	if d, err := dry.Allow(ctx, "alice"); err != nil || !d.Allowed() {
		t.Fatalf("dry run: %+v, %v", d, err)
	}

	open, openStore := newLimiter(t, obs, ratelimit.WithFailurePolicy(ratelimit.FailOpen))
	openStore.down = true
	open.Allow(ctx, "alice")
	open.Peek(ctx, "alice")
	failing, failingStore := newLimiter(t, obs)
	failingStore.down = true
	if _, err := failing.Allow(ctx, "alice"); !errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Fatalf("failing store: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := failing.Allow(cancelled, "alice"); err == nil {
		t.Fatal("failing store, cancelled context: no error")
	}

	got := collect(t, reader)
	diff(t, "unit", got.units, map[string]string{
		"ratelimit.decisions":         "{decision}",
		"ratelimit.decision.cost":     "{cost}",
		"ratelimit.decision.duration": "s",
		"ratelimit.store.errors":      "{error}",
	})
	apiSeries := func(op, outcome string) string {
		return "ratelimit.dry_run=false,ratelimit.name=api,ratelimit.operation=" + op + ",ratelimit.outcome=" + outcome + ",ratelimit.source=store"
	}
	const (
		shadowAllowed = "ratelimit.dry_run=true,ratelimit.name=shadow,ratelimit.operation=allow,ratelimit.outcome=allowed,ratelimit.source=store"
		shadowDenied  = "ratelimit.dry_run=true,ratelimit.name=shadow,ratelimit.operation=allow,ratelimit.outcome=denied,ratelimit.source=store"
		openAllow     = "ratelimit.dry_run=false,ratelimit.operation=allow,ratelimit.outcome=allowed,ratelimit.source=fail_open"
		openPeek      = "ratelimit.dry_run=false,ratelimit.operation=peek,ratelimit.outcome=allowed,ratelimit.source=fail_open"
		storeErr      = "error.type=store_unavailable,ratelimit.dry_run=false,ratelimit.operation=allow,ratelimit.outcome=error,ratelimit.source=store"
		// The store failed after the caller cancelled: the caller's
		// doing, not an outage.
		canceled = "error.type=canceled,ratelimit.dry_run=false,ratelimit.operation=allow,ratelimit.outcome=error,ratelimit.source=store"
	)
	invalid := "error.type=invalid_cost," + apiSeries("allow", "error")
	tooCostly := "error.type=cost_exceeds_limit," + apiSeries("allow", "error")
	diff(t, "ratelimit.decisions", got.sums["ratelimit.decisions"], map[string]int64{
		apiSeries("allow", "allowed"): 2, apiSeries("allow", "denied"): 1, apiSeries("peek", "denied"): 1, invalid: 1, tooCostly: 1,
		shadowAllowed: 1, shadowDenied: 1,
		openAllow: 1, openPeek: 1,
		storeErr: 1, canceled: 1,
	})
	diff(t, "ratelimit.decision.cost", got.sums["ratelimit.decision.cost"], map[string]int64{
		apiSeries("allow", "allowed"): 3, apiSeries("allow", "denied"): 1, apiSeries("peek", "denied"): 1, invalid: 0, tooCostly: 3,
		shadowAllowed: 2, shadowDenied: 1,
		openAllow: 1, openPeek: 1,
		storeErr: 1, canceled: 1,
	})
	diff(t, "ratelimit.decision.duration count", got.counts["ratelimit.decision.duration"], map[string]uint64{
		apiSeries("allow", "allowed"): 2, apiSeries("allow", "denied"): 1, apiSeries("peek", "denied"): 1, invalid: 1, tooCostly: 1,
		shadowAllowed: 1, shadowDenied: 1,
		openAllow: 1, openPeek: 1,
		storeErr: 1, canceled: 1,
	})
	// Every call to the store took 2 ms on the fake clock; bad costs never
	// reach it.
	diff(t, "ratelimit.decision.duration sum", got.totals["ratelimit.decision.duration"], map[string]float64{
		apiSeries("allow", "allowed"): 0.004, apiSeries("allow", "denied"): 0.002, apiSeries("peek", "denied"): 0.002, invalid: 0, tooCostly: 0,
		shadowAllowed: 0.002, shadowDenied: 0.002,
		openAllow: 0.002, openPeek: 0.002,
		storeErr: 0.002, canceled: 0.002,
	})
	diff(t, "ratelimit.store.errors", got.sums["ratelimit.store.errors"], map[string]int64{
		"ratelimit.dry_run=false,ratelimit.operation=allow,ratelimit.source=fail_open": 1,
		"ratelimit.dry_run=false,ratelimit.operation=peek,ratelimit.source=fail_open":  1,
		"ratelimit.dry_run=false,ratelimit.operation=allow,ratelimit.source=store":     1,
	})
}

func TestObserverErrorTypes(t *testing.T) {
	obs, reader := newObserver(t)
	ctx := context.Background()
	for _, err := range []error{context.Canceled, context.DeadlineExceeded, errors.New("something else"), fmt.Errorf("%w: RLMISMATCH", ratelimit.ErrStateMismatch)} {
		obs.Observe(ctx, ratelimit.Event{Err: err, Cost: 1})
	}
	got := collect(t, reader)
	const rest = ",ratelimit.dry_run=false,ratelimit.operation=allow,ratelimit.outcome=error,ratelimit.source=store"
	diff(t, "ratelimit.decisions", got.sums["ratelimit.decisions"], map[string]int64{
		"error.type=canceled" + rest: 1, "error.type=deadline_exceeded" + rest: 1, "error.type=_OTHER" + rest: 1,
		"error.type=state_mismatch" + rest: 1,
	})
	if n := len(got.sums["ratelimit.store.errors"]); n != 0 {
		t.Errorf("errors other than the store's counted as store errors: %v", got.sums["ratelimit.store.errors"])
	}
}

// TestObserverConcurrent records from many goroutines at once (run with
// -race): every event is counted once.
func TestObserverConcurrent(t *testing.T) {
	obs, reader := newObserver(t)
	ctx := context.Background()
	const goroutines, each = 8, 500
	done := make(chan struct{})
	for g := range goroutines {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range each {
				obs.Observe(ctx, ratelimit.Event{Name: fmt.Sprint("lim", (g+i)%3), Allowed: i%2 == 0, Cost: 1})
			}
		}()
	}
	for range goroutines {
		<-done
	}
	var total int64
	for _, v := range collect(t, reader).sums["ratelimit.decisions"] {
		total += v
	}
	if total != goroutines*each {
		t.Errorf("counted %d decisions, want %d", total, goroutines*each)
	}
}
