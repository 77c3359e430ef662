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
	"crypto/sha256"
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
	"sync"
	"syscall"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
)

// maxKeyBytes is the longest state key the server accepts: the domain and
// every entry of a descriptor, each with its length.
const maxKeyBytes = 4096

// options are the command line's.
type options struct {
	configPath     string
	grpcAddr       string
	httpAddr       string
	debugAddr      string
	storeKind      string
	redisAddrs     string
	redisPrefix    string
	redisClient    string
	redisInFlight  int
	redisMargin    time.Duration
	redisTimeout   time.Duration
	memoryMaxKeys  int
	clockKind      string
	mergeDomains   bool
	maxConfigBytes int64
	watch          bool
	healthInterval time.Duration
	check          bool
	service        serviceOptions
	stopTimeout    time.Duration
}

// defaultRedisInFlight is -redis-in-flight's default: one script call in
// flight, the requests that arrive meanwhile going together in the next.
// Measured beside 2 (the library's default) with 64 callers on one Redis,
// alternated: about 20 requests per call instead of 11, Redis CPU per
// request 20-22 µs instead of 22-29 (one descriptor) and 25-36 instead of
// 40-41 (two), p99 no higher (docs/ratelimit-server.md, Benchmark).
const defaultRedisInFlight = 1

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("ratelimit-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.configPath, "config", "", "configuration: a YAML `file` or a directory of them (envoyproxy/ratelimit's format)")
	fs.StringVar(&o.grpcAddr, "grpc-addr", "127.0.0.1:8081", "gRPC `address` to serve on (port 0 picks a free one)")
	fs.StringVar(&o.httpAddr, "http-addr", "", "HTTP `address` for /metrics, /healthcheck and /json; empty serves none")
	fs.StringVar(&o.debugAddr, "debug-addr", "", "HTTP `address` for /debug/pprof/; empty serves none")
	fs.StringVar(&o.storeKind, "store", "memory", "where limits are counted: memory (this process) or redis")
	fs.StringVar(&o.redisAddrs, "redis", "127.0.0.1:6379", "Redis `addresses`: one for a standalone server, several (comma-separated) for a cluster")
	fs.StringVar(&o.redisPrefix, "redis-prefix", "ratelimit-server:", "prefix of every Redis key")
	fs.IntVar(&o.redisInFlight, "redis-in-flight", defaultRedisInFlight, "how many script calls go to Redis at once before further requests wait and go together in the next (group commit): fewer, larger calls cost Redis less per request and add latency; 0 sends each request alone")
	fs.StringVar(&o.redisClient, "redis-client", "auto", "the Redis client: go-redis; rueidis, which pipelines the calls made at once on one connection per server; or auto, go-redis for one address and rueidis for a cluster")
	fs.DurationVar(&o.redisMargin, "redis-ttl-margin", time.Second, "how much longer than its state needs every Redis key lives (at least the clocks' disagreement)")
	fs.DurationVar(&o.redisTimeout, "redis-timeout", 3*time.Second, "the longest one Redis call may take")
	fs.IntVar(&o.memoryMaxKeys, "memory-max-keys", memorystore.DefaultMaxKeys, "the most states the memory store keeps (one per descriptor value and rule); past it, the least harmful is evicted")
	fs.StringVar(&o.clockKind, "clock", "local", "clock that decides: local, or server (Redis TIME; -store redis only)")
	fs.BoolVar(&o.mergeDomains, "merge-domains", false, "let several files add descriptors to one domain")
	fs.Int64Var(&o.maxConfigBytes, "max-config-bytes", defaultMaxConfigBytes, "the most `bytes` the configuration's files may hold together")
	fs.BoolVar(&o.watch, "watch", true, "reload the configuration when its files change on disk (SIGHUP reloads it too)")
	fs.DurationVar(&o.healthInterval, "health-interval", time.Second, "how often the store is probed for the health service")
	fs.IntVar(&o.service.maxDescriptors, "max-descriptors", defaultMaxDescriptors, "the most descriptors one request may carry (INVALID_ARGUMENT past it)")
	fs.BoolVar(&o.check, "check", false, "check the configuration and exit: 0 when it loads, 1 with its fault when not")
	fs.BoolVar(&o.service.headers, "response-headers", false, "add RateLimit-Limit, -Remaining and -Reset headers to responses")
	fs.StringVar(&o.service.limitHeader, "header-limit", "RateLimit-Limit", "`name` of the limit header")
	fs.StringVar(&o.service.remainingHeader, "header-remaining", "RateLimit-Remaining", "`name` of the remaining header")
	fs.StringVar(&o.service.resetHeader, "header-reset", "RateLimit-Reset", "`name` of the reset header (seconds)")
	fs.BoolVar(&o.service.metadata, "response-metadata", false, "add dynamic metadata (domain, descriptors, metadata of the rules that passed) to responses")
	fs.BoolVar(&o.service.shadow, "shadow-mode", false, "answer OK to every request, whatever the limits say (global shadow mode)")
	fs.BoolVar(&o.service.quota, "quota-mode", false, "treat every rule as quota_mode: a request is over only when all its limited descriptors are (global quota mode)")
	fs.IntVar(&o.service.denials, "denial-cache-keys", 0, "answer a descriptor its rule denied from memory until the denial ends, for up to this many descriptor values per rule, without asking the store (envoyproxy/ratelimit's LOCAL_CACHE_SIZE_IN_BYTES); 0 turns it off")
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
	switch o.redisClient {
	case "auto", "go-redis", "rueidis":
	default:
		return o, fmt.Errorf("-redis-client %q: want auto, go-redis or rueidis", o.redisClient)
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
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"-memory-max-keys", o.memoryMaxKeys < 1},
		{"-redis-in-flight", o.redisInFlight < 0},
		{"-max-config-bytes", o.maxConfigBytes < 1},
		{"-max-descriptors", o.service.maxDescriptors < 1},
		{"-health-interval", o.healthInterval <= 0},
		{"-redis-timeout", o.redisTimeout <= 0},
	} {
		if f.bad {
			return o, fmt.Errorf("%s must be positive", f.name)
		}
	}
	if o.service.denials < 0 || o.service.denials > maxDenialCacheKeys {
		return o, fmt.Errorf("-denial-cache-keys must be 0 (off) to %d", maxDenialCacheKeys)
	}
	return o, nil
}

// maxDenialCacheKeys is the largest size ratelimit.WithDenialCache accepts.
const maxDenialCacheKeys = 1 << 24

// app is a configured server: the service, its store and its gRPC server.
type app struct {
	opts    options
	log     *slog.Logger
	svc     *service
	metrics *metrics
	grpc    *grpc.Server
	health  *health.Server
	store   *storeHealth
	close   func() error

	// mu guards what serve starts and stop stops.
	mu      sync.Mutex
	stopped bool
	http    []*http.Server
	unwatch func()

	// reloading serialises reloads (SIGHUP and the watch), and guards
	// inForce and refused: the digests of the configuration in force and
	// of the last one refused, so that files changed back and forth, or
	// touched without a change, are not loaded (nor refused) again.
	reloading sync.Mutex
	inForce   [sha256.Size]byte
	refused   [sha256.Size]byte
	refusal   error // why refused was
}

// newApp opens the store and loads the configuration. clk is the clock
// that decides; nil means the one -clock names.
func newApp(o options, clk clock.Clock, log *slog.Logger) (*app, error) {
	cfg, err := loadConfig(o.configPath, o.mergeDomains, o.maxConfigBytes)
	if err != nil {
		return nil, err
	}
	if o.healthInterval <= 0 {
		o.healthInterval = time.Second
	}
	a := &app{opts: o, log: log, metrics: newMetrics(), close: func() error { return nil }, unwatch: func() {}}
	var st store.Store[string]
	var probe func(context.Context) error
	switch o.storeKind {
	case "memory":
		opts := []memorystore.Option{memorystore.WithMaxKeyBytes(maxKeyBytes)}
		if o.memoryMaxKeys > 0 {
			opts = append(opts, memorystore.WithMaxKeys(o.memoryMaxKeys))
		}
		mst := memorystore.New[string](opts...)
		a.metrics.memoryStore(mst)
		st = mst
	case "redis":
		r, err := openRedis(o)
		if err != nil {
			return nil, err
		}
		st, probe, a.close = r.store, r.probe, r.close
	}
	if clk == nil {
		clk = clock.Local()
		if o.clockKind == "server" {
			clk = clock.Server()
		}
	}
	a.grpc = grpc.NewServer(grpc.ChainUnaryInterceptor(a.metrics.interceptor))
	a.health = health.NewServer()
	a.store = newStoreHealth(log, a.health, a.metrics, probe, o.healthInterval)
	a.svc = newService(st, clk, o.service, a.metrics, a.store, log)
	if err := a.svc.setConfig(cfg); err != nil {
		a.close()
		return nil, err
	}
	a.inForce = cfg.digest
	a.metrics.configLoaded(nil)
	rlspb.RegisterRateLimitServiceServer(a.grpc, a.svc)
	healthpb.RegisterHealthServer(a.grpc, a.health)
	reflection.Register(a.grpc)
	return a, nil
}

// redisStore is a store on Redis, with how to probe and close it.
type redisStore struct {
	store store.Store[string]
	probe func(context.Context) error
	close func() error
}

// openRedis returns a store on the Redis at o.redisAddrs: a standalone
// server for one address, a cluster for several. It fails when Redis does
// not answer. Its probe pings the server, or every master of the cluster.
func openRedis(o options) (redisStore, error) {
	list := strings.Split(o.redisAddrs, ",")
	for i := range list {
		list[i] = strings.TrimSpace(list[i])
	}
	if o.redisClient == "rueidis" || (o.redisClient == "auto" || o.redisClient == "") && len(list) > 1 {
		return openRueidis(o, list)
	}
	var client interface {
		goredisstore.Client
		Close() error
	}
	var probe func(context.Context) error
	// One dial per attempt, not go-redis's five 100ms apart: a dead Redis
	// is answered at once, and the breakers and the probe do the retrying.
	if len(list) == 1 {
		c := redis.NewClient(&redis.Options{Addr: list[0], ContextTimeoutEnabled: true, DialerRetries: 1})
		client, probe = c, func(ctx context.Context) error { return c.Ping(ctx).Err() }
	} else {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: list, ContextTimeoutEnabled: true, DialerRetries: 1})
		client = c
		probe = func(ctx context.Context) error {
			return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := probe(ctx); err != nil {
		client.Close()
		return redisStore{}, fmt.Errorf("redis %s: %w", o.redisAddrs, err)
	}
	opts := []goredisstore.Option[string]{
		goredisstore.WithPrefix[string](o.redisPrefix),
		goredisstore.WithMaxKeyBytes[string](maxKeyBytes),
		goredisstore.WithTTLMargin[string](o.redisMargin),
		goredisstore.WithGroupCommit[string](o.redisInFlight),
	}
	if o.redisTimeout > 0 {
		opts = append(opts, goredisstore.WithTimeout[string](o.redisTimeout))
	}
	st, err := goredisstore.New[string](client, opts...)
	if err != nil {
		client.Close()
		return redisStore{}, err
	}
	return redisStore{store: st, probe: probe, close: client.Close}, nil
}

// openRueidis is openRedis through rueidis, which pipelines the calls
// that goroutines make at once on one connection per server: a cluster's
// per-node script calls share round trips, as envoyproxy/ratelimit's
// pipelined commands do. Its probe pings every node.
func openRueidis(o options, list []string) (redisStore, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: list, ForceSingleClient: len(list) == 1, DisableCache: true})
	if err != nil {
		return redisStore{}, fmt.Errorf("redis %s: %w", o.redisAddrs, err)
	}
	probe := func(ctx context.Context) error {
		var errs []error
		for addr, n := range c.Nodes() {
			if err := n.Do(ctx, n.B().Ping().Build()).Error(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			}
		}
		return errors.Join(errs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := probe(ctx); err != nil {
		c.Close()
		return redisStore{}, fmt.Errorf("redis %s: %w", o.redisAddrs, err)
	}
	opts := []rueidisstore.Option[string]{
		rueidisstore.WithPrefix[string](o.redisPrefix),
		rueidisstore.WithMaxKeyBytes[string](maxKeyBytes),
		rueidisstore.WithTTLMargin[string](o.redisMargin),
		rueidisstore.WithGroupCommit[string](o.redisInFlight),
	}
	if o.redisTimeout > 0 {
		opts = append(opts, rueidisstore.WithTimeout[string](o.redisTimeout))
	}
	st, err := rueidisstore.New[string](c, opts...)
	if err != nil {
		c.Close()
		return redisStore{}, err
	}
	return redisStore{store: st, probe: probe, close: func() error { c.Close(); return nil }}, nil
}

// reloadOutcome is what a reload did.
type reloadOutcome int

const (
	reloaded     reloadOutcome = iota // a new configuration is in force
	unchanged                         // the files hold the configuration in force
	refused                           // the files do not load; the one in force stays
	stillRefused                      // the files hold what was last refused
)

// reload loads the configuration again, unless its files hold what they
// held when it was last loaded or refused (then nothing is counted or
// changed). A configuration refused leaves the one in force; the error
// says why (again for stillRefused).
func (a *app) reload() (reloadOutcome, error) {
	a.reloading.Lock()
	defer a.reloading.Unlock()
	files, digest, err := readConfig(a.opts.configPath, a.opts.maxConfigBytes)
	switch {
	case err == nil && digest == a.inForce:
		return unchanged, nil
	case err == nil && digest == a.refused:
		return stillRefused, a.refusal
	}
	var cfg *config
	if err == nil {
		cfg, err = parseConfig(a.opts.mergeDomains, files...)
	}
	if err == nil {
		err = a.svc.setConfig(cfg)
	}
	a.metrics.configLoaded(err)
	if err != nil {
		a.refused, a.refusal = digest, err // digest is zero when the files could not be read
		return refused, err
	}
	a.inForce, a.refused, a.refusal = digest, [sha256.Size]byte{}, nil
	return reloaded, nil
}

// serve serves gRPC on grpcLn and, when they are not nil, /metrics,
// /healthcheck and /json on httpLn and pprof on debugLn, until stop. It
// starts probing the store and, with -watch, watching the configuration.
func (a *app) serve(grpcLn, httpLn, debugLn net.Listener) error {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return grpc.ErrServerStopped
	}
	for _, l := range []struct {
		ln net.Listener
		h  http.Handler
	}{{httpLn, a.httpHandler()}, {debugLn, debugHandler()}} {
		if l.ln == nil {
			continue
		}
		srv := &http.Server{Handler: l.h, ReadHeaderTimeout: 5 * time.Second}
		a.http = append(a.http, srv)
		go func() {
			if err := srv.Serve(l.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("http server", "addr", l.ln.Addr().String(), "err", err)
			}
		}()
	}
	a.store.start()
	if a.opts.watch {
		unwatch, err := a.watch()
		if err != nil {
			a.log.Warn("not watching the configuration (SIGHUP reloads it)", "err", err)
		} else {
			a.unwatch = unwatch
		}
	}
	a.mu.Unlock()
	return a.grpc.Serve(grpcLn)
}

// stop marks the server not serving, lets calls in flight finish for up
// to the stop timeout, and closes the store.
func (a *app) stop() {
	a.mu.Lock()
	a.stopped = true
	unwatch, servers := a.unwatch, a.http
	a.mu.Unlock()
	unwatch()
	a.store.close()
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
	for _, srv := range servers {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		srv.Shutdown(ctx)
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
		cfg, err := loadConfig(o.configPath, o.mergeDomains, o.maxConfigBytes)
		if err != nil {
			fmt.Fprintln(stderr, "ratelimit-server:", err)
			return 1
		}
		fmt.Fprintf(stderr, "ratelimit-server: %s: %d domains in %d files\n", o.configPath, len(cfg.domains), len(cfg.files))
		return 0
	}
	// go-redis logs each failed dial of its pool: once a call while
	// Redis is down. The store's health logs the outage, once.
	redis.SetLogger(debugLogger{log})
	a, err := newApp(o, nil, log)
	if err != nil {
		fmt.Fprintln(stderr, "ratelimit-server:", err)
		return 1
	}
	var lns [3]net.Listener // gRPC, HTTP, debug
	for i, addr := range []string{o.grpcAddr, o.httpAddr, o.debugAddr} {
		if addr == "" {
			continue
		}
		if lns[i], err = net.Listen("tcp", addr); err != nil {
			fmt.Fprintln(stderr, "ratelimit-server:", err)
			for _, ln := range lns[:i] {
				if ln != nil {
					ln.Close()
				}
			}
			a.close()
			return 1
		}
	}
	attrs := []any{"grpc", lns[0].Addr().String(), "store", o.storeKind, "config", o.configPath}
	for i, name := range []string{"", "http", "debug"} {
		if i > 0 && lns[i] != nil {
			attrs = append(attrs, name, lns[i].Addr().String())
		}
	}
	log.Info("serving", attrs...)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	served := make(chan error, 1)
	go func() { served <- a.serve(lns[0], lns[1], lns[2]) }()
	for {
		select {
		case err := <-served:
			log.Error("grpc server stopped", "err", err)
			a.close()
			return 1
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				a.logReload("SIGHUP")
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

// logReload reloads the configuration, and logs what came of it: every
// outcome of a SIGHUP; of a change on disk, only what changed.
func (a *app) logReload(cause string) {
	outcome, err := a.reload()
	switch {
	case outcome == reloaded:
		a.log.Info("configuration reloaded", "cause", cause, "config", a.opts.configPath)
	case outcome == refused, outcome == stillRefused && cause == "SIGHUP":
		a.log.Error("reload failed, the configuration in force stays", "cause", cause, "err", err)
	case outcome == unchanged && cause == "SIGHUP":
		a.log.Info("configuration unchanged", "cause", cause, "config", a.opts.configPath)
	}
}

// debugLogger takes go-redis's log lines (redis.SetLogger) at level DEBUG.
type debugLogger struct{ log *slog.Logger }

// Printf logs a line of go-redis's.
func (l debugLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, fmt.Sprintf(format, v...), "from", "go-redis")
}
