// Command ratelimit-server serves Envoy's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) over gRPC,
// deciding with the go-ratelimit library, from configuration files in the
// format of envoyproxy/ratelimit.
//
// Usage:
//
//	ratelimit-server -config PATH [-grpc-addr HOST:PORT] [-store memory|redis -redis ADDR[,ADDR…]] [flags]
//	ratelimit-server -check -config PATH
//
// PATH is a YAML file or a directory of them. SIGHUP reloads it (a
// configuration that does not load leaves the one in force); SIGINT and
// SIGTERM stop the server gracefully. See docs/ratelimit-server.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// maxKeyBytes is the longest state key the server accepts: the domain and
// every entry of a descriptor, each with its length.
const maxKeyBytes = 4096

// options are the command line's.
type options struct {
	configPath   string
	grpcAddr     string
	httpAddr     string
	storeKind    string
	redisAddrs   string
	redisPrefix  string
	redisMargin  time.Duration
	clockKind    string
	mergeDomains bool
	check        bool
	service      serviceOptions
	stopTimeout  time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("ratelimit-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.configPath, "config", "", "configuration: a YAML `file` or a directory of them (envoyproxy/ratelimit's format)")
	fs.StringVar(&o.grpcAddr, "grpc-addr", "127.0.0.1:8081", "gRPC `address` to serve on (port 0 picks a free one)")
	fs.StringVar(&o.httpAddr, "http-addr", "", "HTTP `address` for /metrics and /healthcheck; empty serves none")
	fs.StringVar(&o.storeKind, "store", "memory", "where limits are counted: memory (this process) or redis")
	fs.StringVar(&o.redisAddrs, "redis", "127.0.0.1:6379", "Redis `addresses`: one for a standalone server, several (comma-separated) for a cluster")
	fs.StringVar(&o.redisPrefix, "redis-prefix", "ratelimit-server:", "prefix of every Redis key")
	fs.DurationVar(&o.redisMargin, "redis-ttl-margin", time.Second, "how much longer than its state needs every Redis key lives (at least the clocks' disagreement)")
	fs.StringVar(&o.clockKind, "clock", "local", "clock that decides: local, or server (Redis TIME; -store redis only)")
	fs.BoolVar(&o.mergeDomains, "merge-domains", false, "let several files add descriptors to one domain")
	fs.BoolVar(&o.check, "check", false, "check the configuration and exit: 0 when it loads, 1 with its fault when not")
	fs.BoolVar(&o.service.headers, "response-headers", false, "add RateLimit-Limit, -Remaining and -Reset headers to responses")
	fs.StringVar(&o.service.limitHeader, "header-limit", "RateLimit-Limit", "`name` of the limit header")
	fs.StringVar(&o.service.remainingHeader, "header-remaining", "RateLimit-Remaining", "`name` of the remaining header")
	fs.StringVar(&o.service.resetHeader, "header-reset", "RateLimit-Reset", "`name` of the reset header (seconds)")
	fs.BoolVar(&o.service.metadata, "response-metadata", false, "add dynamic metadata (domain, descriptors, metadata of the rules that passed) to responses")
	fs.BoolVar(&o.service.shadow, "shadow-mode", false, "answer OK to every request, whatever the limits say (global shadow mode)")
	fs.BoolVar(&o.service.quota, "quota-mode", false, "treat every rule as quota_mode: a request is over only when all its limited descriptors are (global quota mode)")
	fs.DurationVar(&o.stopTimeout, "stop-timeout", 10*time.Second, "how long a graceful stop waits for calls in flight")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.configPath == "" {
		return o, errors.New("-config is required")
	}
	switch o.storeKind {
	case "memory", "redis":
	default:
		return o, fmt.Errorf("-store %q: want memory or redis", o.storeKind)
	}
	switch o.clockKind {
	case "local":
	case "server":
		if o.storeKind != "redis" {
			return o, errors.New("-clock server needs -store redis")
		}
	default:
		return o, fmt.Errorf("-clock %q: want local or server", o.clockKind)
	}
	return o, nil
}

// app is a configured server: the service, its store and its gRPC server.
type app struct {
	opts    options
	log     *slog.Logger
	svc     *service
	metrics *metrics
	grpc    *grpc.Server
	health  *health.Server
	http    *http.Server
	close   func() error
}

// newApp opens the store and loads the configuration. clk is the clock
// that decides; nil means the one -clock names.
func newApp(o options, clk clock.Clock, log *slog.Logger) (*app, error) {
	cfg, err := loadConfig(o.configPath, o.mergeDomains, 0)
	if err != nil {
		return nil, err
	}
	a := &app{opts: o, log: log, metrics: newMetrics(), close: func() error { return nil }}
	var st store.Store[string]
	switch o.storeKind {
	case "memory":
		st = memorystore.New[string](memorystore.WithMaxKeyBytes(maxKeyBytes))
	case "redis":
		rst, closeFn, err := openRedis(o.redisAddrs, o.redisPrefix, o.redisMargin)
		if err != nil {
			return nil, err
		}
		st, a.close = rst, closeFn
		o.service.parallel = true
	}
	if clk == nil {
		clk = clock.Local()
		if o.clockKind == "server" {
			clk = clock.Server()
		}
	}
	a.svc = newService(st, clk, o.service, a.metrics, log)
	if err := a.svc.setConfig(cfg); err != nil {
		a.close()
		return nil, err
	}
	a.metrics.configLoaded(nil)
	a.grpc = grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(a.grpc, a.svc)
	a.health = health.NewServer()
	healthpb.RegisterHealthServer(a.grpc, a.health)
	a.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	a.health.SetServingStatus(rlspb.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return a, nil
}

// openRedis returns a store on the Redis at addrs: a standalone server for
// one address, a cluster for several. It fails when Redis does not answer.
func openRedis(addrs, prefix string, margin time.Duration) (store.Store[string], func() error, error) {
	list := strings.Split(addrs, ",")
	for i := range list {
		list[i] = strings.TrimSpace(list[i])
	}
	var client interface {
		goredisstore.Client
		Ping(ctx context.Context) *redis.StatusCmd
		Close() error
	}
	if len(list) == 1 {
		client = redis.NewClient(&redis.Options{Addr: list[0], ContextTimeoutEnabled: true})
	} else {
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: list, ContextTimeoutEnabled: true})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("redis %s: %w", addrs, err)
	}
	st, err := goredisstore.New[string](client, goredisstore.WithPrefix[string](prefix),
		goredisstore.WithMaxKeyBytes[string](maxKeyBytes), goredisstore.WithTTLMargin[string](margin))
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return st, client.Close, nil
}

// reload loads the configuration again; when it fails, the one in force
// stays and the error is returned.
func (a *app) reload() error {
	cfg, err := loadConfig(a.opts.configPath, a.opts.mergeDomains, 0)
	if err == nil {
		err = a.svc.setConfig(cfg)
	}
	a.metrics.configLoaded(err)
	return err
}

// serve serves gRPC on grpcLn and, when httpLn is not nil, /metrics and
// /healthcheck on httpLn, until stop.
func (a *app) serve(grpcLn, httpLn net.Listener) error {
	if httpLn != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", a.metrics)
		mux.HandleFunc("GET /healthcheck", func(w http.ResponseWriter, r *http.Request) {
			res, err := a.health.Check(r.Context(), &healthpb.HealthCheckRequest{})
			if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
				http.Error(w, "NOT_SERVING", http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, "OK\n")
		})
		a.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := a.http.Serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("http server", "err", err)
			}
		}()
	}
	return a.grpc.Serve(grpcLn)
}

// stop marks the server not serving, lets calls in flight finish for up
// to the stop timeout, and closes the store.
func (a *app) stop() {
	a.health.Shutdown()
	done := make(chan struct{})
	go func() {
		a.grpc.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(a.opts.stopTimeout)
	select {
	case <-done:
		t.Stop()
	case <-t.C:
		a.grpc.Stop()
		<-done
	}
	if a.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		a.http.Shutdown(ctx)
		cancel()
	}
	if err := a.close(); err != nil {
		a.log.Warn("closing the store", "err", err)
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is the command: it returns the exit status.
func run(args []string, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "ratelimit-server:", err)
		return 2
	}
	if o.check {
		cfg, err := loadConfig(o.configPath, o.mergeDomains, 0)
		if err != nil {
			fmt.Fprintln(stderr, "ratelimit-server:", err)
			return 1
		}
		fmt.Fprintf(stderr, "ratelimit-server: %s: %d domains in %d files\n", o.configPath, len(cfg.domains), len(cfg.files))
		return 0
	}
	a, err := newApp(o, nil, log)
	if err != nil {
		fmt.Fprintln(stderr, "ratelimit-server:", err)
		return 1
	}
	grpcLn, err := net.Listen("tcp", o.grpcAddr)
	if err != nil {
		fmt.Fprintln(stderr, "ratelimit-server:", err)
		a.close()
		return 1
	}
	var httpLn net.Listener
	if o.httpAddr != "" {
		if httpLn, err = net.Listen("tcp", o.httpAddr); err != nil {
			fmt.Fprintln(stderr, "ratelimit-server:", err)
			grpcLn.Close()
			a.close()
			return 1
		}
	}
	attrs := []any{"grpc", grpcLn.Addr().String(), "store", o.storeKind, "config", o.configPath}
	if httpLn != nil {
		attrs = append(attrs, "http", httpLn.Addr().String())
	}
	log.Info("serving", attrs...)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	served := make(chan error, 1)
	go func() { served <- a.serve(grpcLn, httpLn) }()
	for {
		select {
		case err := <-served:
			log.Error("grpc server stopped", "err", err)
			a.close()
			return 1
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				if err := a.reload(); err != nil {
					log.Error("reload failed, the configuration in force stays", "err", err)
				} else {
					log.Info("configuration reloaded", "config", o.configPath)
				}
				continue
			}
			log.Info("stopping", "signal", sig.String())
			a.stop()
			<-served
			log.Info("stopped")
			return 0
		}
	}
}
