package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxJSONBytes bounds a /json request's body, as gRPC's default bounds a
// message.
const maxJSONBytes = 4 << 20

// httpHandler serves -http-addr: GET /metrics (Prometheus), GET
// /healthcheck (200 while the store answers, 503 while it is down or the
// server stops), and POST /json (envoyproxy/ratelimit's).
func (a *app) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.handler())
	mux.HandleFunc("GET /healthcheck", func(w http.ResponseWriter, r *http.Request) {
		if h, err := a.health.Check(r.Context(), &healthpb.HealthCheckRequest{}); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			http.Error(w, "NOT_SERVING", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "OK\n")
	})
	json := a.metrics.call("json")
	mux.HandleFunc("POST /json", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		a.serveJSON(w, r)
		json.done(start)
	})
	return mux
}

// serveJSON is envoyproxy/ratelimit's /json: a RateLimitRequest in JSON
// (protojson) in, the RateLimitResponse in JSON out, with status 200 when
// the overall code is OK and 429 when it is OVER_LIMIT. A request that
// cannot be read, or that the service refuses as such, is 400; a store
// that fails, 503.
func (a *app) serveJSON(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBytes))
	if err != nil {
		code := http.StatusBadRequest
		if errors.As(err, new(*http.MaxBytesError)) {
			code = http.StatusRequestEntityTooLarge
		}
		http.Error(w, err.Error(), code)
		return
	}
	var req rlspb.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		http.Error(w, "not a RateLimitRequest in JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	res, err := a.svc.ShouldRateLimit(r.Context(), &req)
	if err != nil {
		st := status.Convert(err)
		code := http.StatusInternalServerError
		switch st.Code() {
		case codes.InvalidArgument:
			code = http.StatusBadRequest
		case codes.Unavailable:
			code = http.StatusServiceUnavailable
		case codes.DeadlineExceeded, codes.Canceled:
			code = http.StatusGatewayTimeout
		}
		http.Error(w, st.Message(), code)
		return
	}
	out, err := protojson.Marshal(res)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch res.OverallCode {
	case rlspb.RateLimitResponse_OK:
	case rlspb.RateLimitResponse_OVER_LIMIT:
		w.WriteHeader(http.StatusTooManyRequests)
	default:
		w.WriteHeader(http.StatusInternalServerError)
	}
	w.Write(out)
}

// debugEndpoints are -debug-addr's, with what each is.
var debugEndpoints = []struct{ path, help string }{
	{"/debug/pprof/", "root of the pprof endpoints (profile, heap, goroutine, trace, …)"},
}

// debugHandler serves -debug-addr: net/http/pprof's endpoints, and at /
// a list of them (as envoyproxy/ratelimit's debug port does).
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		for _, e := range debugEndpoints {
			fmt.Fprintf(w, "%s: %s\n", e.path, e.help)
		}
	})
	return mux
}
