package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-ratelimit/ratelimit"
)

// maxStatsKeys bounds the rules' series: detailed_metric and
// value_to_metric put request values in a rule's name, which clients choose.
// Past it, further names are counted under "overflow".
const maxStatsKeys = 10000

// metrics counts what the server does, for -http-addr's /metrics, in the
// Prometheus text format. The zero value is not ready; use newMetrics.
// A nil *metrics counts nothing.
type metrics struct {
	mu sync.Mutex
	// requests by overall code ("OK", "OVER_LIMIT", "error").
	requests map[string]uint64
	// rules by stats key: total_hits, over_limit, within_limit, shadow_mode.
	rules map[string]*ruleStats
	// decisions by the library's observer: operation and outcome.
	decisions map[[2]string]uint64
	latency   map[string]time.Duration // summed, by operation
	// configuration loads and failures, refunds that failed, global
	// shadow overrides.
	configLoads, configErrors, refundErrors, shadowOverrides uint64
}

type ruleStats struct {
	totalHits, overLimit, withinLimit, shadowMode uint64
}

func newMetrics() *metrics {
	return &metrics{
		requests:  map[string]uint64{},
		rules:     map[string]*ruleStats{},
		decisions: map[[2]string]uint64{},
		latency:   map[string]time.Duration{},
	}
}

// Observe counts one of the library's decisions (ratelimit.Observer).
func (m *metrics) Observe(_ context.Context, e ratelimit.Event) {
	op := opName(e.Op)
	m.mu.Lock()
	m.decisions[[2]string{op, e.Outcome.String()}]++
	m.latency[op] += e.Latency
	m.mu.Unlock()
}

func opName(op ratelimit.Op) string {
	switch op {
	case ratelimit.OpAllow:
		return "allow"
	case ratelimit.OpPeek:
		return "peek"
	case ratelimit.OpRefund:
		return "refund"
	case ratelimit.OpReserve:
		return "reserve"
	case ratelimit.OpCancel:
		return "cancel"
	}
	return "other"
}

func (m *metrics) request(code string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.requests[code]++
	m.mu.Unlock()
}

func (m *metrics) rule(it *item) {
	if m == nil || it.negative {
		return
	}
	key := it.m.statsKey
	hits := uint64(it.hits)
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.rules[key]
	if rs == nil {
		if len(m.rules) >= maxStatsKeys {
			key = "overflow"
			rs = m.rules[key]
		}
		if rs == nil {
			rs = &ruleStats{}
			m.rules[key] = rs
		}
	}
	rs.totalHits += hits
	switch {
	case it.over && it.m.rule.shadow:
		rs.shadowMode += hits
		rs.overLimit += hits
	case it.over:
		rs.overLimit += hits
	default:
		rs.withinLimit += hits
	}
}

func (m *metrics) configLoaded(err error) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if err != nil {
		m.configErrors++
	} else {
		m.configLoads++
	}
	m.mu.Unlock()
}

func (m *metrics) refundFailed() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.refundErrors++
	m.mu.Unlock()
}

func (m *metrics) globalShadow() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.shadowOverrides++
	m.mu.Unlock()
}

// ServeHTTP writes every counter in the Prometheus text format.
func (m *metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.write(w)
}

func (m *metrics) write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# TYPE ratelimit_server_requests_total counter\n")
	for _, code := range sortedKeys(m.requests) {
		p("ratelimit_server_requests_total{code=%q} %d\n", code, m.requests[code])
	}
	p("# TYPE ratelimit_server_config_loads_total counter\nratelimit_server_config_loads_total %d\n", m.configLoads)
	p("# TYPE ratelimit_server_config_load_errors_total counter\nratelimit_server_config_load_errors_total %d\n", m.configErrors)
	p("# TYPE ratelimit_server_refund_errors_total counter\nratelimit_server_refund_errors_total %d\n", m.refundErrors)
	p("# TYPE ratelimit_server_global_shadow_mode_total counter\nratelimit_server_global_shadow_mode_total %d\n", m.shadowOverrides)
	keys := make([][2]string, 0, len(m.decisions))
	for k := range m.decisions {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) })
	p("# TYPE ratelimit_server_decisions_total counter\n")
	for _, k := range keys {
		p("ratelimit_server_decisions_total{op=%q,outcome=%q} %d\n", k[0], k[1], m.decisions[k])
	}
	p("# TYPE ratelimit_server_decision_seconds_total counter\n")
	for _, op := range sortedKeys(m.latency) {
		p("ratelimit_server_decision_seconds_total{op=%q} %g\n", op, m.latency[op].Seconds())
	}
	names := sortedKeys(m.rules)
	for _, c := range []struct {
		name string
		get  func(*ruleStats) uint64
	}{
		{"total_hits", func(r *ruleStats) uint64 { return r.totalHits }},
		{"over_limit", func(r *ruleStats) uint64 { return r.overLimit }},
		{"within_limit", func(r *ruleStats) uint64 { return r.withinLimit }},
		{"shadow_mode", func(r *ruleStats) uint64 { return r.shadowMode }},
	} {
		p("# TYPE ratelimit_server_rule_%s_total counter\n", c.name)
		for _, n := range names {
			p("ratelimit_server_rule_%s_total{key=%s} %d\n", c.name, quoteLabel(n), c.get(m.rules[n]))
		}
	}
}

// quoteLabel quotes a label value as the text format wants: backslash,
// double quote and newline escaped, nothing else.
func quoteLabel(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
