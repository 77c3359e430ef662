package main

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

//go:embed static
var staticFiles embed.FS

const (
	// storeTimeout bounds every call to the store made for one API request.
	storeTimeout = 2 * time.Second
	// maxKeyLen is the longest key the API accepts, in bytes.
	maxKeyLen = 200
	// maxBodyLen is the largest PUT /api/config body read, in bytes.
	maxBodyLen = 64 << 10
	// defaultKeyPrefix starts every key the demo writes to Redis.
	defaultKeyPrefix = "ratelimit-demo:"
)

// serverOptions configures newServer.
type serverOptions struct {
	// Store is the store to start on: memory (the default), miniredis or
	// redis.
	Store string
	// RedisAddr is the host:port of a real Redis; "" offers no redis store.
	RedisAddr string
	// KeyPrefix starts every Redis key the server writes; default
	// "ratelimit-demo:". Each configuration adds a part of its own.
	KeyPrefix string
}

// server is the demo's HTTP handler: the page and the JSON API. The limiter
// in use is swapped atomically when the configuration changes, so a request
// is decided entirely by the configuration it started with. Close releases
// the Redis clients and the embedded miniredis.
type server struct {
	mux       *http.ServeMux
	cur       atomic.Pointer[active]
	redisAddr string
	keyPrefix string // KeyPrefix plus a part unique to this server

	mu         sync.Mutex // serialises reconfiguration, miniredis start-up and Close
	gen        int64      // generation of the latest configuration
	compares   int64      // comparisons run, each on keys of its own
	mini       *miniredis.Miniredis
	miniClient *redis.Client
	redis      *redis.Client // nil without RedisAddr
}

// active is one configuration in service.
type active struct {
	cfg    demoConfig
	gen    int64
	desc   string // the limits' String()s
	policy *ratelimit.Policy[string]
	names  []string // the policy's limits' names
	// request serves POST /api/request: httplimit's middleware in front
	// of serveAllowed.
	request http.Handler
}

// newServer returns the demo's handler configured with the default
// algorithm on opts.Store. With opts.RedisAddr it connects to that Redis
// and fails if it does not answer PING.
func newServer(ctx context.Context, opts serverOptions) (*server, error) {
	if opts.Store == "" {
		opts.Store = storeMemory
	}
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = defaultKeyPrefix
	}
	var run [6]byte
	if _, err := rand.Read(run[:]); err != nil {
		return nil, err
	}
	s := &server{
		mux:       http.NewServeMux(),
		redisAddr: opts.RedisAddr,
		keyPrefix: opts.KeyPrefix + hex.EncodeToString(run[:]) + ":",
	}
	if opts.RedisAddr != "" {
		s.redis = redis.NewClient(&redis.Options{Addr: opts.RedisAddr, ContextTimeoutEnabled: true,
			DialTimeout: storeTimeout, ReadTimeout: storeTimeout, WriteTimeout: storeTimeout})
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := s.redis.Ping(pctx).Err()
		cancel()
		if err != nil {
			s.redis.Close()
			return nil, fmt.Errorf("cannot reach Redis at %s: %w", opts.RedisAddr, err)
		}
	}
	if _, err := s.apply(defaultConfig(opts.Store)); err != nil {
		s.Close()
		return nil, err
	}

	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	files := http.FileServerFS(static)
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	// Each file has a route of its own, rather than "GET /" for all, so
	// that a wrong method on an API path is answered 405, not 404.
	s.mux.Handle("GET /{$}", page)
	names, err := fs.Glob(static, "*")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if name != "index.html" { // FileServer redirects /index.html to /
			s.mux.Handle("GET /"+name, page)
		}
	}
	s.mux.HandleFunc("POST /api/request", s.handleRequest)
	s.mux.HandleFunc("GET /api/config", s.handleGetConfig)
	s.mux.HandleFunc("PUT /api/config", s.handlePutConfig)
	s.mux.HandleFunc("GET /api/state", s.handleState)
	s.mux.HandleFunc("POST /api/reset", s.handleReset)
	s.mux.HandleFunc("GET /api/compare", s.handleCompare)
	return s, nil
}

// ServeHTTP serves the page and the API.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close closes the Redis clients and stops the embedded miniredis.
func (s *server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.redis != nil {
		errs = append(errs, s.redis.Close())
		s.redis = nil
	}
	if s.miniClient != nil {
		errs = append(errs, s.miniClient.Close())
		s.miniClient = nil
	}
	if s.mini != nil {
		s.mini.Close()
		s.mini = nil
	}
	return errors.Join(errs...)
}

// apply builds a limiter for cfg and puts it in service. Errors in cfg
// wrap ratelimit.ErrInvalidConfig; the configuration in service is then
// unchanged.
func (s *server) apply(cfg demoConfig) (*active, error) {
	limits, err := cfg.limits()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := s.gen + 1
	st, err := s.openStore(cfg.Store, s.keyPrefix+strconv.FormatInt(gen, 10)+":")
	if err != nil {
		return nil, err
	}
	p, err := ratelimit.NewPolicy(st, limits, ratelimit.WithName("demo"))
	if err != nil {
		return nil, err
	}
	a := &active{cfg: cfg, gen: gen, policy: p}
	for i, l := range limits {
		if i > 0 {
			a.desc += " and "
		}
		a.desc += fmt.Sprint(l.Algorithm)
		a.names = append(a.names, l.Name)
	}
	a.request = httplimit.NewPolicy(p, requestKey, httplimit.WithCost(requestCost), httplimit.WithLegacyHeaders()).
		Handler(http.HandlerFunc(a.serveAllowed))
	s.gen = gen
	s.cur.Store(a)
	return a, nil
}

// openStore returns a store named name whose Redis keys start with prefix,
// with opts if it is on Redis. A memory store is new each time; on Redis,
// each configuration (and each comparison) has a prefix of its own, so
// state left by an earlier one (another algorithm's, maybe) is never read.
// Called with s.mu held.
func (s *server) openStore(name, prefix string, opts ...goredisstore.Option[string]) (store.Store[string], error) {
	opts = append(opts, goredisstore.WithPrefix[string](prefix))
	switch name {
	case storeMemory:
		return memorystore.New[string](), nil
	case storeMiniredis:
		if s.mini == nil {
			mr, err := miniredis.Run()
			if err != nil {
				return nil, fmt.Errorf("starting miniredis: %w", err)
			}
			s.mini = mr
			s.miniClient = redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
		}
		return goredisstore.New[string](s.miniClient, opts...)
	case storeRedis:
		if s.redis == nil {
			return nil, fmt.Errorf("%w: store %q is not configured: start the demo with -redis host:port",
				ratelimit.ErrInvalidConfig, name)
		}
		return goredisstore.New[string](s.redis, opts...)
	}
	return nil, fmt.Errorf("%w: unknown store %q (want %s, %s or %s)", ratelimit.ErrInvalidConfig,
		name, storeMemory, storeMiniredis, storeRedis)
}

// storeJSON tells the page whether a store can be chosen.
type storeJSON struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Detail    string `json:"detail"`
}

// stores lists the stores and whether each can be chosen.
func (s *server) stores() []storeJSON {
	redisStore := storeJSON{Name: storeRedis, Detail: "not configured: start with -redis host:port"}
	if s.redisAddr != "" {
		redisStore = storeJSON{Name: storeRedis, Available: true, Detail: "Redis at " + s.redisAddr}
	}
	return []storeJSON{
		{Name: storeMemory, Available: true, Detail: "in this process"},
		{Name: storeMiniredis, Available: true, Detail: "embedded miniredis, started on first use"},
		redisStore,
	}
}

// configJSON is the body of GET and PUT /api/config: the configuration,
// and facts about it that PUT ignores.
type configJSON struct {
	demoConfig
	// Generation counts configurations put in service, from 1.
	Generation int64 `json:"generation"`
	// Description is the limits' String()s.
	Description string `json:"description"`
	// MaxCost is the largest cost a request may have.
	MaxCost int64 `json:"maxCost"`
	// WindowMs is the period over which MaxCost is admitted.
	WindowMs float64 `json:"windowMs"`
	// Stores lists the stores and whether they can be chosen.
	Stores []storeJSON `json:"stores"`
}

func (s *server) configOf(a *active) configJSON {
	return configJSON{demoConfig: a.cfg, Generation: a.gen, Description: a.desc,
		MaxCost: a.policy.Limit(), WindowMs: millis(algorithm.QuotaOf(a.policy.Limits()[0].Algorithm).Window), Stores: s.stores()}
}

func (s *server) handleGetConfig(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.configOf(s.cur.Load()))
}

// handlePutConfig sets the configuration. Fields left out keep their
// current values; generation, description, maxCost, windowMs and stores
// are ignored, so a GET body can be edited and put back.
func (s *server) handlePutConfig(w http.ResponseWriter, r *http.Request) {
	body := configJSON{demoConfig: s.cur.Load().cfg}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyLen))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeProblem(w, http.StatusBadRequest, "Bad Request", fmt.Sprintf("%v: %v", ratelimit.ErrInvalidConfig, err))
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		writeProblem(w, http.StatusBadRequest, "Bad Request", fmt.Sprintf("%v: the body must hold one JSON object", ratelimit.ErrInvalidConfig))
		return
	}
	a, err := s.apply(body.demoConfig)
	if errors.Is(err, ratelimit.ErrInvalidConfig) {
		writeProblem(w, http.StatusBadRequest, "Bad Request", err.Error())
		return
	}
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "Internal Server Error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.configOf(a))
}

// decisionJSON is a Decision as the API reports it.
type decisionJSON struct {
	Allowed      bool    `json:"allowed"`
	Limit        int64   `json:"limit"`
	Remaining    int64   `json:"remaining"`
	RetryAfterMs float64 `json:"retryAfterMs"`
	ResetAfterMs float64 `json:"resetAfterMs"`
	Source       string  `json:"source"`
	// Key is the key decided for.
	Key string `json:"key"`
	// Cost is the request's cost; 0 for a peek.
	Cost int `json:"cost,omitempty"`
	// Generation is the configuration that decided.
	Generation int64 `json:"generation"`
	// Binding names the limit that decided: the one that denied, or the
	// one with the least left.
	Binding string `json:"binding"`
	// Limits holds each limit's own decision, in order.
	Limits []limitJSON `json:"limits"`
}

// limitJSON is one limit's decision within a policy's.
type limitJSON struct {
	Name         string  `json:"name"`
	Allowed      bool    `json:"allowed"`
	Limit        int64   `json:"limit"`
	Remaining    int64   `json:"remaining"`
	RetryAfterMs float64 `json:"retryAfterMs"`
	ResetAfterMs float64 `json:"resetAfterMs"`
}

func (a *active) decisionJSON(d ratelimit.Decision, key string, cost int) decisionJSON {
	out := decisionJSON{Allowed: d.Allowed(), Limit: d.Limit(), Remaining: d.Remaining(),
		RetryAfterMs: millis(d.RetryAfter()), ResetAfterMs: millis(d.ResetAfter()),
		Source: d.Source().String(), Key: key, Cost: cost, Generation: a.gen, Binding: a.names[d.Binding()]}
	for i, di := range d.Limits() {
		out.Limits = append(out.Limits, limitJSON{Name: a.names[i], Allowed: di.Allowed(), Limit: di.Limit(),
			Remaining: di.Remaining(), RetryAfterMs: millis(di.RetryAfter()), ResetAfterMs: millis(di.ResetAfter())})
	}
	return out
}

// handleRequest serves POST /api/request?key=K&cost=N: a request of cost N
// (default 1) for key K (default "demo") through httplimit's middleware.
// Admitted, it answers 200 with the decision as JSON; denied, the
// middleware answers 429 with problem+json. Either way the response
// carries RateLimit, RateLimit-Policy and X-RateLimit-* headers.
func (s *server) handleRequest(w http.ResponseWriter, r *http.Request) {
	key, ok := queryKey(w, r)
	if !ok {
		return
	}
	cost := 1
	if c := r.URL.Query().Get("cost"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			writeProblem(w, http.StatusBadRequest, "Bad Request", fmt.Sprintf("cost must be a whole number of at least 1, got %q", c))
			return
		}
		cost = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	info := &requestInfo{key: key, cost: cost}
	w.Header().Set("Cache-Control", "no-store")
	s.cur.Load().request.ServeHTTP(w, r.WithContext(context.WithValue(ctx, requestInfoKey{}, info)))
}

// serveAllowed answers a request the middleware admitted, with the
// decision the middleware hands on.
func (a *active) serveAllowed(w http.ResponseWriter, r *http.Request) {
	info := infoOf(r.Context())
	d, ok := httplimit.PolicyDecision(r.Context())
	if info == nil || !ok {
		writeProblem(w, http.StatusInternalServerError, "Internal Server Error", "no decision was made")
		return
	}
	writeJSON(w, http.StatusOK, a.decisionJSON(d, info.key, info.cost))
}

// handleState serves GET /api/state?key=K: key's state now (a Peek, which
// charges nothing).
func (s *server) handleState(w http.ResponseWriter, r *http.Request) {
	key, ok := queryKey(w, r)
	if !ok {
		return
	}
	s.peek(w, r, s.cur.Load(), key)
}

// handleReset serves POST /api/reset?key=K: forgets key's state, then
// reports it as GET /api/state does.
func (s *server) handleReset(w http.ResponseWriter, r *http.Request) {
	key, ok := queryKey(w, r)
	if !ok {
		return
	}
	a := s.cur.Load()
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	if err := a.policy.Reset(ctx, key); err != nil {
		writeStoreError(w, err)
		return
	}
	s.peek(w, r, a, key)
}

func (s *server) peek(w http.ResponseWriter, r *http.Request, a *active, key string) {
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	d, err := a.policy.Peek(ctx, key)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a.decisionJSON(d, key, 0))
}

// handleCompare serves GET /api/compare?pattern=P: pattern P's requests
// (default steady) through all six algorithms on a fake clock, on a fresh
// store of the kind in service, as compareJSON.
func (s *server) handleCompare(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("pattern")
	if name == "" {
		name = patterns[0].Name
	}
	p, ok := patternNamed(name)
	if !ok {
		names := make([]string, len(patterns))
		for i, p := range patterns {
			names[i] = p.Name
		}
		writeProblem(w, http.StatusBadRequest, "Bad Request", fmt.Sprintf("unknown pattern %q (want one of %q)", name, names))
		return
	}
	storeName := s.cur.Load().cfg.Store
	s.mu.Lock()
	s.compares++
	st, err := s.openStore(storeName, s.keyPrefix+"compare:"+strconv.FormatInt(s.compares, 10)+":",
		goredisstore.WithTTLMargin[string](compareTimeout))
	s.mu.Unlock()
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "Internal Server Error", err.Error())
		return
	}
	c, err := compare(r.Context(), st, p)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c.json(storeName))
}

// queryKey returns the request's key parameter, "demo" when absent, or
// answers 400 for one that is too long.
func queryKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	key := r.URL.Query().Get("key")
	if key == "" {
		key = "demo"
	}
	if len(key) > maxKeyLen {
		writeProblem(w, http.StatusBadRequest, "Bad Request", fmt.Sprintf("key is longer than %d bytes", maxKeyLen))
		return "", false
	}
	return key, true
}

// requestInfo carries a request's key and cost to httplimit's middleware.
type requestInfo struct {
	key  string
	cost int
}

type requestInfoKey struct{}

func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// requestKey is the middleware's key function.
func requestKey(r *http.Request) (string, error) {
	info := infoOf(r.Context())
	if info == nil {
		return "", errors.New("request without requestInfo")
	}
	return info.key, nil
}

// requestCost is the middleware's cost function.
func requestCost(r *http.Request) int {
	if info := infoOf(r.Context()); info != nil {
		return info.cost
	}
	return 1
}

// millis returns d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// problem is an RFC 9457 problem details body, as httplimit writes them.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

func writeProblem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(problem{Type: "about:blank", Title: title, Status: status, Detail: detail})
}

// writeStoreError answers a failed Peek or Reset: 503 when the store is
// unavailable, 500 otherwise.
func writeStoreError(w http.ResponseWriter, err error) {
	if errors.Is(err, ratelimit.ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		writeProblem(w, http.StatusServiceUnavailable, "Service Unavailable", err.Error())
		return
	}
	writeProblem(w, http.StatusInternalServerError, "Internal Server Error", err.Error())
}
