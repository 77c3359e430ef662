package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/go-ratelimit/ratelimit"
)

// The evidence that marks the store down: so many of the store's
// failures in a row, counting calls (as the Limiters' breakers do, whose
// default is 5), or so many failed probes in a row with no call between
// them answered. Calls fail at once when Redis is dead, so traffic marks
// it down in a moment; with no traffic the probes do, within two
// intervals. A single slow call or probe does not.
const (
	downAfterCalls  = 5
	downAfterProbes = 2
)

// storeHealth follows whether the store answers, and says so through
// the gRPC health service (for "" and for the rate limit service), the
// HTTP /healthcheck and the ratelimit_server_store_up gauge: NOT_SERVING
// while the store is down, so that a load balancer sends its calls to
// another replica, or fails them at once by its own failure mode. It logs
// each change, never each failed call.
//
// Calls report their failures (report); the probe, every interval, asks
// the store itself (a PING of Redis, of every master of a cluster) and is
// alone in marking the store up again, so that the state changes at most
// once per interval when the store comes back. A store with no probe (in
// memory) is never down.
type storeHealth struct {
	log      *slog.Logger
	grpc     *health.Server
	metrics  *metrics
	probe    func(context.Context) error
	interval time.Duration

	down         atomic.Bool
	callFailures atomic.Int64 // the store's failures in a row, in calls

	mu            sync.Mutex // held while the state changes
	probeFailures int        // failed probes in a row
	since         time.Time  // when the store went down
	stop          context.CancelFunc
	done          chan struct{}
}

// newStoreHealth returns the store's health, SERVING, probing with probe
// every interval once started; probe may be nil.
func newStoreHealth(log *slog.Logger, grpc *health.Server, m *metrics, probe func(context.Context) error, interval time.Duration) *storeHealth {
	h := &storeHealth{log: log, grpc: grpc, metrics: m, probe: probe, interval: interval}
	h.publish(healthpb.HealthCheckResponse_SERVING)
	return h
}

func (h *storeHealth) publish(st healthpb.HealthCheckResponse_ServingStatus) {
	h.grpc.SetServingStatus("", st)
	h.grpc.SetServingStatus(rlspb.RateLimitService_ServiceDesc.ServiceName, st)
	if st == healthpb.HealthCheckResponse_SERVING {
		h.metrics.storeUp.Set(1)
	} else {
		h.metrics.storeUp.Set(0)
	}
}

// answered records a call the store answered: its failures are no longer
// in a row.
func (h *storeHealth) answered() {
	if h.callFailures.Load() != 0 {
		h.callFailures.Store(0)
	}
}

// failed records a call that failed with err. Only the store's own
// failures count (ErrStoreUnavailable); an open breaker's refusals do not,
// since the failures that opened it were counted.
func (h *storeHealth) failed(err error) {
	if h.probe == nil || !errors.Is(err, ratelimit.ErrStoreUnavailable) || errors.Is(err, ratelimit.ErrBreakerOpen) {
		return // with no probe, nothing would mark the store up again
	}
	if h.callFailures.Add(1) >= downAfterCalls && !h.down.Load() {
		h.mu.Lock()
		h.markDown(err, "calls")
		h.mu.Unlock()
	}
}

// markDown marks the store down, unless it is already; h.mu is held.
func (h *storeHealth) markDown(err error, by string) {
	if h.down.Load() {
		return
	}
	h.down.Store(true)
	h.since = time.Now()
	h.publish(healthpb.HealthCheckResponse_NOT_SERVING)
	h.log.Error("store unavailable: health NOT_SERVING, calls answered UNAVAILABLE until it is back", "seen_by", by, "err", err)
}

// probed records a probe's outcome: the store is down after
// downAfterProbes failures in a row, up again at the first success.
func (h *storeHealth) probed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		if h.probeFailures++; h.probeFailures >= downAfterProbes {
			h.markDown(err, "probe")
		}
		return
	}
	h.probeFailures = 0
	h.callFailures.Store(0)
	if h.down.Load() {
		h.down.Store(false)
		h.publish(healthpb.HealthCheckResponse_SERVING)
		h.log.Info("store available again: health SERVING", "down_for", time.Since(h.since).Round(time.Millisecond).String())
	}
}

// start probes the store every interval until close.
func (h *storeHealth) start() {
	if h.probe == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		t := time.NewTicker(h.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pctx, pcancel := context.WithTimeout(ctx, h.interval)
			err := h.probe(pctx)
			pcancel()
			if ctx.Err() != nil {
				return
			}
			h.probed(err)
		}
	}()
}

// close stops the probes.
func (h *storeHealth) close() {
	if h.stop != nil {
		h.stop()
		<-h.done
	}
}
