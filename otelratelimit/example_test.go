package otelratelimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/otelratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// Export a limiter's metrics to Prometheus: an OpenTelemetry
// MeterProvider whose reader is the Prometheus exporter, an Observer
// recording with it, and the registry served on /metrics.
func Example_prometheus() {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		log.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.Background())
	obs, err := otelratelimit.NewObserver(otelratelimit.WithMeterProvider(provider))
	if err != nil {
		log.Fatal(err)
	}

	alg, err := tokenbucket.PerSecond(1, tokenbucket.Burst(2))
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithObserver(obs.Observe), ratelimit.WithName("api"))
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		lim.Allow(context.Background(), "alice") // two allowed, one denied
	}

	// In a server: http.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	metrics := promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	rec := httptest.NewRecorder()
	metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "ratelimit_decisions_total") || strings.HasPrefix(line, "ratelimit_decision_duration_seconds_count") {
			fmt.Println(line)
		}
	}
	// Output:
	// ratelimit_decision_duration_seconds_count{ratelimit_dry_run="false",ratelimit_name="api",ratelimit_operation="allow",ratelimit_outcome="allowed",ratelimit_source="store"} 2
	// ratelimit_decision_duration_seconds_count{ratelimit_dry_run="false",ratelimit_name="api",ratelimit_operation="allow",ratelimit_outcome="denied",ratelimit_source="store"} 1
	// ratelimit_decisions_total{ratelimit_dry_run="false",ratelimit_name="api",ratelimit_operation="allow",ratelimit_outcome="allowed",ratelimit_source="store"} 2
	// ratelimit_decisions_total{ratelimit_dry_run="false",ratelimit_name="api",ratelimit_operation="allow",ratelimit_outcome="denied",ratelimit_source="store"} 1
}
