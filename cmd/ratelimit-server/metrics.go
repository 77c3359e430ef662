package main

import (
	"context"
	"math"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// maxStatsKeys bounds the rules' series: detailed_metric and
// value_to_metric put request values in a rule's name, which clients choose.
// Past it, further names are counted under key1 "overflow".
const maxStatsKeys = 10000

// nearLimitRatio is envoyproxy/ratelimit's NEAR_LIMIT_RATIO default: hits
// that take a rule's count past this part of its limit are near_limit.
const nearLimitRatio = 0.8

// latencyBuckets are the latency histograms' buckets: 50µs to 1.6s.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 16)

// metrics counts what the server does, for /metrics on -http-addr:
// envoyproxy/ratelimit's metrics, under the names its Prometheus mapping
// gives them (ratelimit_service_*), this server's own (ratelimit_server_*),
// and the Go runtime's and the process's. Counting takes no lock: every
// series a request touches is resolved once, rules' by their stats key.
type metrics struct {
	reg *prometheus.Registry

	// envoyproxy/ratelimit's
	totalRequests *prometheus.CounterVec
	responseTime  *prometheus.HistogramVec
	rlsCalls      callMetrics // ShouldRateLimit's, resolved
	storeErrors   prometheus.Counter
	serviceErrors prometheus.Counter
	ruleVecs      [nRuleStats]*prometheus.CounterVec
	configLoads   prometheus.Counter
	configErrors  prometheus.Counter
	globalShadow  prometheus.Counter

	// this server's
	requests     [3]prometheus.Counter // OK, OVER_LIMIT, error
	decisions    [nOps][nOutcomes]prometheus.Counter
	decisionTime [nOps]prometheus.Observer
	refundErrors prometheus.Counter
	storeUp      prometheus.Gauge

	rules  sync.Map // stats key → *ruleCounters
	nRules atomic.Int64
}

// The per-rule counters, as envoyproxy/ratelimit names its stats.
const (
	statTotalHits = iota
	statOverLimit
	statNearLimit
	statWithinLimit
	statShadowMode
	nRuleStats
)

var ruleStatNames = [nRuleStats]string{"total_hits", "over_limit", "near_limit", "within_limit", "shadow_mode"}

// The library's operations (ratelimit.Op), and the outcomes of an Event:
// admitted, denied, or no decision (Event.Err).
const (
	nOps      = int(ratelimit.OpSettle) + 1
	nOutcomes = 3
)

var outcomeNames = [nOutcomes]string{"allowed", "denied", "error"}

// outcome is the index in outcomeNames of e's outcome.
func outcome(e ratelimit.Event) int {
	switch {
	case e.Err != nil:
		return 2
	case !e.Allowed:
		return 1
	}
	return 0
}

// ruleCounters are one rule's series.
type ruleCounters [nRuleStats]prometheus.Counter

// callMetrics are one method's series.
type callMetrics struct {
	total   prometheus.Counter
	latency prometheus.Observer
}

// rlsMethod is ShouldRateLimit's full gRPC name.
const rlsMethod = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		m.reg.MustRegister(c)
		return c
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	m.totalRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_service_total_requests", Help: "Calls by gRPC method (json: POST /json).",
	}, []string{"grpc_method"})
	m.responseTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ratelimit_service_response_time_seconds", Help: "Time to answer a call, by gRPC method (json: POST /json).",
		Buckets: latencyBuckets,
	}, []string{"grpc_method"})
	m.reg.MustRegister(m.totalRequests, m.responseTime)
	m.rlsCalls = m.call("ShouldRateLimit")
	shouldErr := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_service_should_rate_limit_error",
		Help: "ShouldRateLimit calls that failed: redis_error when the store did, service_error for a bad request.",
	}, []string{"err_type"})
	m.reg.MustRegister(shouldErr)
	m.storeErrors = shouldErr.WithLabelValues("redis_error")
	m.serviceErrors = shouldErr.WithLabelValues("service_error")
	for i, name := range ruleStatNames {
		m.ruleVecs[i] = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimit_service_rate_limit_" + name,
			Help: "Hits per rule (" + name + "), labelled as envoyproxy/ratelimit's Prometheus mapping labels its stats.",
		}, []string{"domain", "key1", "key2"})
		m.reg.MustRegister(m.ruleVecs[i])
	}
	m.configLoads = counter("ratelimit_service_config_load_success", "Configurations loaded.")
	m.configErrors = counter("ratelimit_service_config_load_error", "Configurations refused (the one in force stayed).")
	m.globalShadow = counter("ratelimit_service_global_shadow_mode", "Answers turned to OK by -shadow-mode.")

	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_server_requests_total", Help: "ShouldRateLimit answers by overall code (error: no answer).",
	}, []string{"code"})
	m.reg.MustRegister(requests)
	for i, code := range []string{"OK", "OVER_LIMIT", "error"} {
		m.requests[i] = requests.WithLabelValues(code)
	}
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_server_decisions_total", Help: "The library's decisions, by operation and outcome.",
	}, []string{"op", "outcome"})
	decisionTime := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ratelimit_server_decision_duration_seconds", Help: "Time the store took to decide, by operation.",
		Buckets: latencyBuckets,
	}, []string{"op"})
	m.reg.MustRegister(decisions, decisionTime)
	for op := range nOps {
		for out := range nOutcomes {
			m.decisions[op][out] = decisions.WithLabelValues(ratelimit.Op(op).String(), outcomeNames[out])
		}
		m.decisionTime[op] = decisionTime.WithLabelValues(ratelimit.Op(op).String())
	}
	m.refundErrors = counter("ratelimit_server_refund_errors_total", "Refunds of a denied request's other descriptors that failed.")
	m.storeUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ratelimit_server_store_up", Help: "1 while the store answers, 0 while it is down (health NOT_SERVING).",
	})
	m.storeUp.Set(1)
	m.reg.MustRegister(m.storeUp)
	return m
}

// handler serves the metrics in Prometheus's text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// call returns the series of a method.
func (m *metrics) call(method string) callMetrics {
	return callMetrics{total: m.totalRequests.WithLabelValues(method), latency: m.responseTime.WithLabelValues(method)}
}

// interceptor times every unary gRPC call.
func (m *metrics) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	res, err := handler(ctx, req)
	c := m.rlsCalls
	if info.FullMethod != rlsMethod {
		c = m.call(info.FullMethod[strings.LastIndexByte(info.FullMethod, '/')+1:])
	}
	c.done(start)
	return res, err
}

func (c callMetrics) done(start time.Time) {
	c.total.Inc()
	c.latency.Observe(time.Since(start).Seconds())
}

// Observe counts one of the library's decisions (ratelimit.WithObserver).
func (m *metrics) Observe(_ context.Context, e ratelimit.Event) {
	op, out := int(e.Op), outcome(e)
	if op >= nOps {
		return
	}
	m.decisions[op][out].Inc()
	m.decisionTime[op].Observe(e.Latency.Seconds())
}

// request counts a ShouldRateLimit answer: "OK", "OVER_LIMIT", or
// "error" with the fault (a store's or the request's).
func (m *metrics) request(code string, storeFault bool) {
	switch code {
	case "OK":
		m.requests[0].Inc()
	case "OVER_LIMIT":
		m.requests[1].Inc()
	default:
		m.requests[2].Inc()
		if storeFault {
			m.storeErrors.Inc()
		} else {
			m.serviceErrors.Inc()
		}
	}
}

// rule counts a decided item's hits under its rule's stats key, as
// envoyproxy/ratelimit does: every hit in total_hits; then over_limit
// (and shadow_mode, for a rule in shadow mode) for a denied one, or
// within_limit for an admitted one, of which near_limit those that took
// the count past 80% of the limit.
func (m *metrics) rule(it *item) {
	if it.negative {
		return
	}
	c := m.ruleCounters(it.m.statsKey)
	hits := float64(it.hits)
	c[statTotalHits].Add(hits)
	r := it.m.rule
	switch {
	case it.over:
		c[statOverLimit].Add(hits)
		if r.shadow {
			c[statShadowMode].Add(hits)
		}
	default:
		c[statWithinLimit].Add(hits)
		if it.lim != nil && r.requestsPerUnit > 0 && it.hits > 0 {
			limit := int64(r.requestsPerUnit)
			near := int64(math.Floor(float64(float32(limit) * nearLimitRatio)))
			after := limit - it.d.Remaining()
			if before := after - it.hits; after > near {
				c[statNearLimit].Add(float64(after - max(near, before)))
			}
		}
	}
}

// ruleCounters returns the series of a stats key, made on first use;
// once maxStatsKeys keys have series, those of the overflow.
func (m *metrics) ruleCounters(key string) *ruleCounters {
	if c, ok := m.rules.Load(key); ok {
		return c.(*ruleCounters)
	}
	labels := statsLabels(key)
	if m.nRules.Load() >= maxStatsKeys {
		key, labels = "\x00overflow", [3]string{"", "overflow", ""}
		if c, ok := m.rules.Load(key); ok {
			return c.(*ruleCounters)
		}
	}
	c := new(ruleCounters)
	for i, v := range m.ruleVecs {
		c[i] = v.WithLabelValues(labels[:]...)
	}
	if old, loaded := m.rules.LoadOrStore(key, c); loaded {
		return old.(*ruleCounters)
	}
	m.nRules.Add(1)
	return c
}

// ipv4 matches an IPv4 address in a stat's name, whose dots
// envoyproxy/ratelimit makes '_'.
var ipv4 = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)

// statsLabels are a stats key's labels as envoyproxy/ratelimit's
// Prometheus mapping makes them of the stat's name (':' and '|' made '_',
// and the dots of IPv4 addresses): the domain, then the first two
// components after it.
func statsLabels(key string) [3]string {
	key = strings.NewReplacer(":", "_", "|", "_").Replace(key)
	key = ipv4.ReplaceAllStringFunc(key, func(ip string) string { return strings.ReplaceAll(ip, ".", "_") })
	var l [3]string
	parts := strings.SplitN(key, ".", 4)
	copy(l[:], parts)
	return l
}

func (m *metrics) configLoaded(err error) {
	if err != nil {
		m.configErrors.Inc()
	} else {
		m.configLoads.Inc()
	}
}

func (m *metrics) refundFailed() { m.refundErrors.Inc() }

func (m *metrics) globalShadowed() { m.globalShadow.Inc() }

// memoryStore adds the memory store's census: the states it holds and
// those it evicted at its cap (-memory-max-keys), read at each scrape.
func (m *metrics) memoryStore(st *memorystore.Store[string]) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ratelimit_server_memory_store_keys", Help: "States the memory store holds (at most -memory-max-keys).",
		}, func() float64 { return float64(st.Stats().Keys) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ratelimit_server_memory_store_evicted_total", Help: "States the memory store evicted at its cap before they expired.",
		}, func() float64 { return float64(st.Stats().Evicted) }),
	)
}
