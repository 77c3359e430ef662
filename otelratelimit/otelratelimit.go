// Package otelratelimit records the decisions of ratelimit Limiters as
// OpenTelemetry metrics. It is a module of its own, so that the library's
// users who do not use OpenTelemetry never have it in their module graph.
//
// Give an [Observer]'s Observe to every limiter to measure
// (ratelimit.WithObserver), each named with ratelimit.WithName, and export
// the metrics with any OpenTelemetry exporter (Prometheus, OTLP):
//
//	obs, err := otelratelimit.NewObserver() // the global MeterProvider
//	lim, err := ratelimit.New(alg, st, ratelimit.WithObserver(obs.Observe), ratelimit.WithName("api"))
//
// It records, under the instrumentation scope [ScopeName]:
//
//	ratelimit.decisions          counter, {decision}  every decision, or failure to decide
//	ratelimit.decision.cost      counter, {cost}      the cost asked for by each
//	ratelimit.decision.duration  histogram, s         how long each took
//	ratelimit.store.errors       counter, {error}     store failures, absorbed by a failure policy or not
//
// with the attributes
//
//	ratelimit.name       the limiter's name (WithName); absent when unnamed
//	ratelimit.operation  allow (AllowN, each Wait attempt) or peek
//	ratelimit.outcome    allowed, denied or error (not on ratelimit.store.errors)
//	ratelimit.source     store, fail_open, fail_closed or local: what decided, or
//	                     on ratelimit.store.errors the policy that absorbed the error
//	                     (store: none did; the caller got the error)
//	ratelimit.dry_run    true for a limiter in dry-run mode, whose denials were
//	                     admitted anyway
//	error.type           with outcome error: store_unavailable, store_full, state_mismatch,
//	                     key_too_long, invalid_cost, cost_exceeds_limit, canceled,
//	                     deadline_exceeded or _OTHER
//
// Names follow the OpenTelemetry semantic conventions' rules (a namespace,
// dotted lower-case names, UCUM units, durations in seconds as histograms,
// error.type for errors). Keys are never attributes: every client would
// become a time series of its own. Every attribute has few values, so each
// limiter has at most a few dozen series per instrument.
package otelratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/go-ratelimit/ratelimit"
)

// ScopeName is the instrumentation scope of the metrics, the name of the
// Meter they are recorded with.
const ScopeName = "github.com/go-ratelimit/ratelimit/otelratelimit"

// Attribute keys.
const (
	NameKey      = attribute.Key("ratelimit.name")
	OperationKey = attribute.Key("ratelimit.operation")
	OutcomeKey   = attribute.Key("ratelimit.outcome")
	SourceKey    = attribute.Key("ratelimit.source")
	DryRunKey    = attribute.Key("ratelimit.dry_run")
	ErrorTypeKey = attribute.Key("error.type")
)

// DurationBuckets are the bucket boundaries, in seconds, advised for
// ratelimit.decision.duration: from 1 µs (a decision in memory takes about
// 0.1 µs) to 1 s (a Redis round trip takes 0.1 ms to a few ms). A View
// replaces them.
var DurationBuckets = []float64{
	0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005,
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
}

// Observer records the events of ratelimit Limiters as metrics. Create it
// with [NewObserver]; it is safe for concurrent use, and one Observer
// serves any number of limiters.
type Observer struct {
	decisions   metric.Int64Counter
	cost        metric.Int64Counter
	duration    metric.Float64Histogram
	storeErrors metric.Int64Counter

	// Attribute sets are built once per combination of values, and kept.
	mu     sync.RWMutex
	sets   map[series]*options
	errSet map[errSeries]*options
}

var _ func(context.Context, ratelimit.Event) = (*Observer)(nil).Observe

// series are the attribute values of one decision.
type series struct {
	name      string
	op        ratelimit.Op
	outcome   string // "allowed", "denied" or "error"
	source    ratelimit.Source
	dryRun    bool
	errorType string
}

// errSeries are the attribute values of one store error.
type errSeries struct {
	name   string
	op     ratelimit.Op
	source ratelimit.Source
	dryRun bool
}

// options are one attribute set, as the options each instrument takes.
type options struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

func newOptions(attrs ...attribute.KeyValue) *options {
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return &options{add: []metric.AddOption{set}, record: []metric.RecordOption{set}}
}

// Option configures an Observer.
type Option func(*config)

type config struct {
	provider metric.MeterProvider
}

// WithMeterProvider sets the MeterProvider the metrics are recorded with.
// The default is the global one, otel.GetMeterProvider(). A nil provider is
// ignored.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp != nil {
			c.provider = mp
		}
	}
}

// NewObserver returns an Observer recording with a Meter named ScopeName.
// It returns the error of the MeterProvider if an instrument cannot be
// created.
func NewObserver(opts ...Option) (*Observer, error) {
	c := config{provider: otel.GetMeterProvider()}
	for _, o := range opts {
		o(&c)
	}
	meter := c.provider.Meter(ScopeName)
	o := &Observer{sets: map[series]*options{}, errSet: map[errSeries]*options{}}
	var err error
	if o.decisions, err = meter.Int64Counter("ratelimit.decisions",
		metric.WithUnit("{decision}"),
		metric.WithDescription("Rate-limit decisions, and failures to decide, by outcome and source.")); err != nil {
		return nil, fmt.Errorf("otelratelimit: %w", err)
	}
	if o.cost, err = meter.Int64Counter("ratelimit.decision.cost",
		metric.WithUnit("{cost}"),
		metric.WithDescription("The cost asked for by rate-limit decisions: with outcome allowed, what was consumed.")); err != nil {
		return nil, fmt.Errorf("otelratelimit: %w", err)
	}
	if o.duration, err = meter.Float64Histogram("ratelimit.decision.duration",
		metric.WithUnit("s"),
		metric.WithDescription("How long rate-limit decisions took, the store's round trip included."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...)); err != nil {
		return nil, fmt.Errorf("otelratelimit: %w", err)
	}
	if o.storeErrors, err = meter.Int64Counter("ratelimit.store.errors",
		metric.WithUnit("{error}"),
		metric.WithDescription("Rate-limit store failures, by the failure policy that absorbed them (source store: none did).")); err != nil {
		return nil, fmt.Errorf("otelratelimit: %w", err)
	}
	return o, nil
}

// Observe records e. It never records e.Key.
func (o *Observer) Observe(ctx context.Context, e ratelimit.Event) {
	s := series{name: e.Name, op: e.Op, outcome: "allowed", source: e.Decision.Source(), dryRun: e.DryRun}
	switch {
	case e.Err != nil:
		s.outcome, s.errorType = "error", errorType(e.Err)
	case !e.Allowed:
		s.outcome = "denied"
	}
	opts := o.decisionOptions(s)
	o.decisions.Add(ctx, 1, opts.add...)
	o.cost.Add(ctx, e.Cost, opts.add...)
	o.duration.Record(ctx, e.Latency.Seconds(), opts.record...)
	if e.Decision.Source() != ratelimit.FromStore || errors.Is(e.Err, ratelimit.ErrStoreUnavailable) || errors.Is(e.Err, ratelimit.ErrStoreFull) {
		o.storeErrors.Add(ctx, 1, o.errorOptions(errSeries{name: e.Name, op: e.Op, source: e.Decision.Source(), dryRun: e.DryRun}).add...)
	}
}

func (o *Observer) decisionOptions(s series) *options {
	o.mu.RLock()
	opts, ok := o.sets[s]
	o.mu.RUnlock()
	if ok {
		return opts
	}
	attrs := append(common(s.name, s.op, s.source, s.dryRun), OutcomeKey.String(s.outcome))
	if s.errorType != "" {
		attrs = append(attrs, ErrorTypeKey.String(s.errorType))
	}
	opts = newOptions(attrs...)
	o.mu.Lock()
	o.sets[s] = opts
	o.mu.Unlock()
	return opts
}

func (o *Observer) errorOptions(s errSeries) *options {
	o.mu.RLock()
	opts, ok := o.errSet[s]
	o.mu.RUnlock()
	if ok {
		return opts
	}
	opts = newOptions(common(s.name, s.op, s.source, s.dryRun)...)
	o.mu.Lock()
	o.errSet[s] = opts
	o.mu.Unlock()
	return opts
}

// common are the attributes of every instrument.
func common(name string, op ratelimit.Op, source ratelimit.Source, dryRun bool) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 6)
	if name != "" {
		attrs = append(attrs, NameKey.String(name))
	}
	return append(attrs,
		OperationKey.String(op.String()),
		SourceKey.String(sourceName(source)),
		DryRunKey.Bool(dryRun))
}

// sourceName is the attribute value of a Source, in snake case as the
// semantic conventions' enumerations are.
func sourceName(s ratelimit.Source) string {
	switch s {
	case ratelimit.FromStore:
		return "store"
	case ratelimit.FromFailOpen:
		return "fail_open"
	case ratelimit.FromFailClosed:
		return "fail_closed"
	case ratelimit.FromLocal:
		return "local"
	}
	return "_OTHER"
}

// errorType is the error.type of an error that left no decision.
func errorType(err error) string {
	switch {
	case errors.Is(err, ratelimit.ErrStoreUnavailable):
		return "store_unavailable"
	case errors.Is(err, ratelimit.ErrStoreFull):
		return "store_full"
	case errors.Is(err, ratelimit.ErrStateMismatch):
		return "state_mismatch"
	case errors.Is(err, ratelimit.ErrKeyTooLong):
		return "key_too_long"
	case errors.Is(err, ratelimit.ErrInvalidCost):
		return "invalid_cost"
	case errors.Is(err, ratelimit.ErrCostExceedsLimit):
		return "cost_exceeds_limit"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	return "_OTHER"
}
