package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// newTestServer returns a server closed when the test ends. Its Redis keys
// start with rltest:, like every other test's in this module.
func newTestServer(t *testing.T, opts serverOptions) *server {
	t.Helper()
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = "rltest:demo:"
	}
	s, err := newServer(context.Background(), opts)
	if err != nil {
		t.Fatalf("newServer: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// call serves one request and returns the response with its body read.
func call(t *testing.T, h http.Handler, method, target, body string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, r))
	res := w.Result()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// put sets the configuration and fails the test unless it is accepted.
func put(t *testing.T, h http.Handler, body string) configJSON {
	t.Helper()
	res, b := call(t, h, http.MethodPut, "/api/config", body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("PUT /api/config %s: %d %s", body, res.StatusCode, b)
	}
	var cfg configJSON
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("PUT /api/config: %v in %s", err, b)
	}
	return cfg
}

// request sends POST /api/request and decodes a 200's decision.
func request(t *testing.T, h http.Handler, query string) (*http.Response, decisionJSON) {
	t.Helper()
	res, b := call(t, h, http.MethodPost, "/api/request?"+query, "")
	var d decisionJSON
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("POST /api/request?%s: %v in %s", query, err, b)
		}
	}
	return res, d
}

func stateOf(t *testing.T, h http.Handler, method, target string) decisionJSON {
	t.Helper()
	res, b := call(t, h, method, target, "")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, target, res.StatusCode, b)
	}
	var d decisionJSON
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s %s: %v in %s", method, target, err, b)
	}
	return d
}

func TestConfigDefaults(t *testing.T) {
	s := newTestServer(t, serverOptions{})
	res, b := call(t, s, http.MethodGet, "/api/config", "")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/config: %d %s", res.StatusCode, b)
	}
	var cfg configJSON
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.demoConfig, defaultConfig(storeMemory); got != want {
		t.Errorf("config = %+v, want %+v", got, want)
	}
	if got, want := cfg.Description, "tokenbucket(capacity=10, rate=1/s) and slidinglog(limit=20, window=1m0s)"; got != want {
		t.Errorf("description = %q, want %q", got, want)
	}
	if cfg.Generation != 1 || cfg.MaxCost != 10 || cfg.WindowMs != 10000 {
		t.Errorf("generation, maxCost, windowMs = %d, %d, %v, want 1, 10, 10000", cfg.Generation, cfg.MaxCost, cfg.WindowMs)
	}
	avail := map[string]bool{}
	for _, st := range cfg.Stores {
		avail[st.Name] = st.Available
	}
	if want := map[string]bool{storeMemory: true, storeMiniredis: true, storeRedis: false}; !equalMaps(avail, want) {
		t.Errorf("stores available = %v, want %v", avail, want)
	}
}

func equalMaps(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"zero capacity", `{"capacity":0}`, "ratelimit: invalid config: tokenbucket: Capacity must be in [1, "},
		{"negative rate", `{"rate":-1}`, "ratelimit: invalid config: tokenbucket: Rate must be a finite number above 0, got -1"},
		{"zero tokens", `{"algorithm":"tokenbucket-interval","tokens":0}`, "tokenbucket: Tokens must be in [1, "},
		{"zero window", `{"algorithm":"slidinglog","window":"0s"}`, "slidinglog: Window must be between 1µs"},
		{"bad duration", `{"algorithm":"fixedwindow","window":"soon"}`, `ratelimit: invalid config: bad duration "soon"`},
		{"duration as number", `{"window":10}`, "ratelimit: invalid config: interval, every and window are strings"},
		{"zero burst", `{"algorithm":"gcra","burst":0}`, "gcra: Burst must be in [1, "},
		{"zero every", `{"algorithm":"gcra","every":"0s"}`, "gcra: Every must be between 1µs"},
		{"counter above its limit", `{"algorithm":"slidingwindow","limit":1099511627777}`, "slidingwindow: Limit must be in [1, "},
		{"unknown algorithm", `{"algorithm":"leakybucket"}`, `ratelimit: invalid config: unknown algorithm "leakybucket"`},
		{"unknown store", `{"store":"etcd"}`, `ratelimit: invalid config: unknown store "etcd"`},
		{"redis not configured", `{"store":"redis"}`, `store "redis" is not configured: start the demo with -redis host:port`},
		{"unknown field", `{"capacty":3}`, `ratelimit: invalid config: json: unknown field "capacty"`},
		{"wrong type", `{"capacity":"3"}`, "ratelimit: invalid config: json: cannot unmarshal string"},
		{"not JSON", `capacity=3`, "ratelimit: invalid config: invalid character"},
		{"two objects", `{"capacity":3}{"capacity":4}`, "ratelimit: invalid config: the body must hold one JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, serverOptions{})
			res, b := call(t, s, http.MethodPut, "/api/config", tc.body)
			if res.StatusCode != http.StatusBadRequest {
				t.Fatalf("PUT %s: status %d, want 400; body %s", tc.body, res.StatusCode, b)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q, want application/problem+json", ct)
			}
			var p problem
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatalf("body %s: %v", b, err)
			}
			if !strings.Contains(p.Detail, tc.want) {
				t.Errorf("detail = %q, want it to contain %q", p.Detail, tc.want)
			}
			// The configuration in service is unchanged.
			if cfg := getConfigOf(t, s); cfg.Generation != 1 || cfg.demoConfig != defaultConfig(storeMemory) {
				t.Errorf("after a rejected PUT: generation %d, config %+v; want the default, generation 1", cfg.Generation, cfg.demoConfig)
			}
		})
	}
}

func getConfigOf(t *testing.T, h http.Handler) configJSON {
	t.Helper()
	_, b := call(t, h, http.MethodGet, "/api/config", "")
	var cfg configJSON
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("GET /api/config: %v in %s", err, b)
	}
	return cfg
}

func TestConfigPutKeepsOmittedFields(t *testing.T) {
	s := newTestServer(t, serverOptions{})
	put(t, s, `{"capacity":3,"limit":7}`)
	cfg := put(t, s, `{"algorithm":"slidinglog","window":"90s"}`)
	want := defaultConfig(storeMemory)
	want.Algorithm, want.Capacity, want.Limit, want.Window = algSlidingLog, 3, 7, duration(90*time.Second)
	if cfg.demoConfig != want {
		t.Errorf("config = %+v, want %+v", cfg.demoConfig, want)
	}
	if want := "slidinglog(limit=7, window=1m30s) and slidinglog(limit=20, window=1m0s)"; cfg.Generation != 3 || cfg.Description != want {
		t.Errorf("generation %d, description %q; want 3, %s", cfg.Generation, cfg.Description, want)
	}
	// A GET body put back is accepted: its read-only fields are ignored.
	_, b := call(t, s, http.MethodGet, "/api/config", "")
	if again := put(t, s, string(b)); again.demoConfig != want || again.Generation != 4 {
		t.Errorf("GET body put back: %+v generation %d, want %+v generation 4", again.demoConfig, again.Generation, want)
	}
}

func TestRequestAllowedHeaders(t *testing.T) {
	s := newTestServer(t, serverOptions{})
	put(t, s, `{"algorithm":"tokenbucket","capacity":2,"rate":0.01,"sustainedLimit":0}`) // refills in 200 s
	res, d := request(t, s, "key=alice")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", res.StatusCode)
	}
	want := decisionJSON{Allowed: true, Limit: 2, Remaining: 1, ResetAfterMs: 100000, Source: "store", Key: "alice", Cost: 1, Generation: 2,
		Binding: "default", Limits: []limitJSON{{Name: "default", Allowed: true, Limit: 2, Remaining: 1, ResetAfterMs: 100000}}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("decision = %+v, want %+v", d, want)
	}
	for h, want := range map[string]string{
		"Content-Type":          "application/json",
		"RateLimit-Policy":      `"default";q=2;w=200`,
		"RateLimit":             `"default";r=1;t=100`,
		"X-RateLimit-Limit":     "2",
		"X-RateLimit-Remaining": "1",
		"X-RateLimit-Reset":     "100",
		"Cache-Control":         "no-store",
	} {
		if got := res.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if got := res.Header.Get("Retry-After"); got != "" {
		t.Errorf("Retry-After = %q on an admitted request, want none", got)
	}
}

func TestRequestDenied(t *testing.T) {
	s := newTestServer(t, serverOptions{})
	put(t, s, `{"algorithm":"fixedwindow","limit":2,"window":"1h","sustainedLimit":0}`)
	for i := range 2 {
		if res, d := request(t, s, "key=bob"); res.StatusCode != http.StatusOK || !d.Allowed || d.Remaining != int64(1-i) {
			t.Fatalf("request %d: status %d, decision %+v; want 200, allowed, remaining %d", i+1, res.StatusCode, d, 1-i)
		}
	}
	res, b := call(t, s, http.MethodPost, "/api/request?key=bob", "")
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: status %d, want 429; body %s", res.StatusCode, b)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var p problem
	if err := json.Unmarshal(b, &p); err != nil || p.Status != 429 || p.Title != "Too Many Requests" {
		t.Errorf("body %s (%v), want a 429 problem", b, err)
	}
	if got := res.Header.Get("Retry-After"); got == "" || got == "0" {
		t.Errorf("Retry-After = %q, want whole seconds until the next window", got)
	}
	for _, h := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if res.Header.Get(h) == "" {
			t.Errorf("%s missing on the 429", h)
		}
	}
	if got := res.Header.Get("X-RateLimit-Remaining"); got != "0" {
		t.Errorf("X-RateLimit-Remaining = %q, want 0", got)
	}
	if got := res.Header.Get("RateLimit-Policy"); got != `"default";q=2;w=3600` {
		t.Errorf("RateLimit-Policy = %q, want \"default\";q=2;w=3600", got)
	}
	// Another key has its own window.
	if res, d := request(t, s, "key=carol"); res.StatusCode != http.StatusOK || d.Remaining != 1 {
		t.Errorf("another key: status %d, decision %+v; want 200, remaining 1", res.StatusCode, d)
	}
}

func TestRequestCost(t *testing.T) {
	s := newTestServer(t, serverOptions{})
	put(t, s, `{"algorithm":"slidinglog","limit":5,"window":"1h"}`)
	if res, d := request(t, s, "key=k&cost=3"); res.StatusCode != http.StatusOK || d.Remaining != 2 || d.Cost != 3 {
		t.Errorf("cost 3: status %d, decision %+v; want 200, remaining 2, cost 3", res.StatusCode, d)
	}
	if res, _ := request(t, s, "key=k&cost=3"); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("cost 3 with 2 left: status %d, want 429", res.StatusCode)
	}
	if res, _ := request(t, s, "key=k&cost=6"); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("cost above the limit: status %d, want 413", res.StatusCode)
	}
	for _, bad := range []string{"0", "-1", "x", "1.5"} {
		res, b := call(t, s, http.MethodPost, "/api/request?key=k&cost="+bad, "")
		if res.StatusCode != http.StatusBadRequest || !bytes.Contains(b, []byte("cost must be a whole number")) {
			t.Errorf("cost %s: %d %s, want 400", bad, res.StatusCode, b)
		}
	}
	if d := stateOf(t, s, http.MethodGet, "/api/state?key=k"); d.Remaining != 2 {
		t.Errorf("after rejected costs: remaining %d, want 2 (nothing charged)", d.Remaining)
	}
	res, _ := call(t, s, http.MethodPost, "/api/request?key="+strings.Repeat("k", maxKeyLen+1), "")
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("key of %d bytes: status %d, want 400", maxKeyLen+1, res.StatusCode)
	}
}

// TestRequestNewAlgorithms sends requests through GCRA and the
// sliding-window counter: both are offered, advertise their window and
// deny once their limit is used.
func TestRequestNewAlgorithms(t *testing.T) {
	for _, c := range []struct {
		body, description, policy string
	}{
		{`{"algorithm":"gcra","burst":3,"every":"20m","sustainedLimit":0}`, "gcra(burst=3, every=20m0s)", `"default";q=3;w=3600`},
		{`{"algorithm":"slidingwindow","limit":3,"window":"1h","sustainedLimit":0}`, "slidingwindow(limit=3, window=1h0m0s)", `"default";q=3;w=3600`},
	} {
		s := newTestServer(t, serverOptions{})
		if cfg := put(t, s, c.body); cfg.Description != c.description {
			t.Errorf("PUT %s: description %q, want %q", c.body, cfg.Description, c.description)
		}
		for i := range 3 {
			if res, d := request(t, s, "key=k"); res.StatusCode != http.StatusOK || d.Remaining != int64(2-i) {
				t.Fatalf("%s: request %d: status %d, decision %+v; want 200, remaining %d", c.description, i+1, res.StatusCode, d, 2-i)
			}
		}
		res, _ := call(t, s, http.MethodPost, "/api/request?key=k", "")
		if res.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s: fourth request: status %d, want 429", c.description, res.StatusCode)
		}
		if got := res.Header.Get("RateLimit-Policy"); got != c.policy {
			t.Errorf("%s: RateLimit-Policy = %q, want %q", c.description, got, c.policy)
		}
	}
}

func TestStateAndReset(t *testing.T) {
	s := newTestServer(t, serverOptions{})
	put(t, s, `{"algorithm":"tokenbucket-interval","capacity":3,"tokens":1,"interval":"1h"}`)
	if d := stateOf(t, s, http.MethodGet, "/api/state"); d.Key != "demo" || d.Remaining != 3 || !d.Allowed || d.ResetAfterMs != 0 {
		t.Errorf("fresh state = %+v, want key demo, allowed, remaining 3, fresh", d)
	}
	for range 3 {
		request(t, s, "")
	}
	d := stateOf(t, s, http.MethodGet, "/api/state?key=demo")
	if d.Allowed || d.Remaining != 0 || d.RetryAfterMs <= 0 || d.RetryAfterMs > 3600e3 {
		t.Errorf("state after 3 requests = %+v, want denied, 0 remaining, retry within the hour", d)
	}
	// Peeking charges nothing.
	if again := stateOf(t, s, http.MethodGet, "/api/state?key=demo"); again.Remaining != 0 || again.Cost != 0 {
		t.Errorf("second peek = %+v", again)
	}
	if d := stateOf(t, s, http.MethodPost, "/api/reset?key=demo"); d.Remaining != 3 || !d.Allowed {
		t.Errorf("after reset = %+v, want 3 remaining", d)
	}
	if res, _ := call(t, s, http.MethodGet, "/api/reset?key=demo", ""); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /api/reset: status %d, want 405", res.StatusCode)
	}
}

func TestStoreMiniredis(t *testing.T) {
	s := newTestServer(t, serverOptions{})
	if s.mini != nil {
		t.Fatal("miniredis started before it was chosen")
	}
	cfg := put(t, s, `{"store":"miniredis","algorithm":"tokenbucket","capacity":2,"rate":0.001,"sustainedLimit":0}`)
	if cfg.Store != storeMiniredis || s.mini == nil {
		t.Fatalf("store = %q, miniredis running %v; want miniredis, running", cfg.Store, s.mini != nil)
	}
	for i, want := range []int{200, 200, 429} {
		if res, _ := request(t, s, "key=m"); res.StatusCode != want {
			t.Fatalf("request %d on miniredis: status %d, want %d", i+1, res.StatusCode, want)
		}
	}
	keys := s.mini.Keys()
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "rltest:demo:") || !strings.HasSuffix(keys[0], ":2:{m}#") {
		t.Errorf("miniredis keys = %q, want one hash rltest:demo:RUN:2:{m}#", keys)
	}

	// Another algorithm on the same store starts fresh under a prefix of
	// its own: the bucket's state is never read as a window's.
	put(t, s, `{"algorithm":"fixedwindow","limit":5,"window":"1h"}`)
	if res, d := request(t, s, "key=m"); res.StatusCode != http.StatusOK || d.Remaining != 4 || d.Generation != 3 {
		t.Errorf("first request of the new configuration: status %d, decision %+v; want 200, remaining 4, generation 3", res.StatusCode, d)
	}
	if keys := s.mini.Keys(); len(keys) != 2 {
		t.Errorf("miniredis keys = %q, want the old bucket's and the new window's", keys)
	}

	// Back to memory, and the state there is fresh too.
	put(t, s, `{"store":"memory"}`)
	if d := stateOf(t, s, http.MethodGet, "/api/state?key=m"); d.Remaining != 5 {
		t.Errorf("on memory after miniredis: remaining %d, want 5", d.Remaining)
	}
}

// TestStoreRedis runs on the real Redis at $RATELIMIT_REDIS_ADDR, which
// .ci/run starts.
func TestStoreRedis(t *testing.T) {
	addr := os.Getenv("RATELIMIT_REDIS_ADDR")
	if addr == "" {
		t.Skip("no real Redis: set RATELIMIT_REDIS_ADDR=host:port to run this test (bash .ci/run starts one)")
	}
	s := newTestServer(t, serverOptions{Store: storeRedis, RedisAddr: addr})
	if cfg := getConfigOf(t, s); cfg.Store != storeRedis {
		t.Fatalf("store = %q, want redis", cfg.Store)
	}
	put(t, s, `{"algorithm":"slidinglog","limit":2,"window":"10s"}`)
	for i, want := range []int{200, 200, 429} {
		if res, _ := request(t, s, "key=r"); res.StatusCode != want {
			t.Fatalf("request %d on redis: status %d, want %d", i+1, res.StatusCode, want)
		}
	}
	if d := stateOf(t, s, http.MethodPost, "/api/reset?key=r"); d.Remaining != 2 {
		t.Errorf("after reset: remaining %d, want 2", d.Remaining)
	}
}

func TestUnreachableRedis(t *testing.T) {
	// Port 1 on loopback: nothing listens there.
	_, err := newServer(context.Background(), serverOptions{RedisAddr: "127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "cannot reach Redis at 127.0.0.1:1") {
		t.Errorf("newServer with an unreachable Redis: %v, want cannot reach Redis", err)
	}
}

// TestReconfigureUnderLoad swaps configurations while requests run, for
// the race detector: each request is decided whole by one configuration.
func TestReconfigureUnderLoad(t *testing.T) {
	s := newTestServer(t, serverOptions{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				w := httptest.NewRecorder()
				s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/api/request?key=load", nil))
				if w.Code != http.StatusOK && w.Code != http.StatusTooManyRequests {
					t.Errorf("status %d under reconfiguration: %s", w.Code, w.Body)
					return
				}
			}
		}()
	}
	bodies := []string{
		`{"algorithm":"tokenbucket","capacity":5}`,
		`{"algorithm":"tokenbucket-interval"}`,
		`{"algorithm":"slidinglog","limit":3}`,
		`{"algorithm":"fixedwindow"}`,
	}
	for i := range 40 {
		put(t, s, bodies[i%len(bodies)])
	}
	close(stop)
	wg.Wait()
}

func TestPage(t *testing.T) {
	s := newTestServer(t, serverOptions{})
	res, b := call(t, s, http.MethodGet, "/", "")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	for _, id := range []string{"send", "send-burst", "burst-n", "allowed-count", "denied-count", "remaining",
		"algorithm", "capacity", "rate", "tokens", "interval", "burst", "every", "limit", "window", "cost", "key", "store",
		"apply", "reset", "chart", "log"} {
		if !bytes.Contains(b, []byte(`id="`+id+`"`)) {
			t.Errorf("page has no #%s", id)
		}
	}
	// An id used twice makes getElementById find the first only: the
	// other element's listeners end up on the wrong one.
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`\sid="([^"]+)"`).FindAllSubmatch(b, -1) {
		if id := string(m[1]); seen[id] {
			t.Errorf("page has two elements with id %q", id)
		} else {
			seen[id] = true
		}
	}
	for _, f := range []string{"/", "/app.js", "/style.css", "/favicon.svg"} {
		res, b := call(t, s, http.MethodGet, f, "")
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", f, res.StatusCode)
		}
		// Nothing is loaded from elsewhere: the page must work offline.
		// (The SVG namespace is a name, not a place: nothing is fetched.)
		b = bytes.ReplaceAll(b, []byte("'http://www.w3.org/2000/svg'"), nil)
		if f != "/favicon.svg" && (bytes.Contains(b, []byte("http://")) || bytes.Contains(b, []byte("https://"))) {
			t.Errorf("%s refers to an external URL", f)
		}
	}
}

// TestTwoLimitPolicy runs the default configuration, a burst of 10 and 20
// a minute, decided together: the burst binds, then the minute, and a
// denied request is charged to neither.
func TestTwoLimitPolicy(t *testing.T) {
	s := newTestServer(t, serverOptions{})
	put(t, s, `{"algorithm":"tokenbucket","capacity":3,"rate":0.001,"sustainedLimit":4,"sustainedWindow":"1h"}`)
	for i := range 3 {
		res, d := request(t, s, "key=p")
		if res.StatusCode != http.StatusOK || d.Binding != "burst" || len(d.Limits) != 2 || d.Limits[1].Remaining != int64(3-i) {
			t.Fatalf("request %d: status %d, decision %+v; want 200, the burst binding, sustained at %d", i+1, res.StatusCode, d, 3-i)
		}
	}
	res, b := call(t, s, http.MethodPost, "/api/request?key=p", "")
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), `\"burst\"`) {
		t.Fatalf("fourth request: status %d, body %s; want 429 naming the burst", res.StatusCode, b)
	}
	if got, want := res.Header.Get("RateLimit-Policy"), `"burst";q=3;w=3000, "sustained";q=4;w=3600`; got != want {
		t.Errorf("RateLimit-Policy = %q, want %q", got, want)
	}
	d := stateOf(t, s, http.MethodGet, "/api/state?key=p")
	if d.Allowed || d.Binding != "burst" || d.Limits[1].Remaining != 1 || !d.Limits[1].Allowed {
		t.Errorf("state after the denial = %+v; want denied by the burst, sustained still 1 (not charged)", d)
	}
	// With a burst larger than the minute, the minute binds.
	put(t, s, `{"algorithm":"tokenbucket","capacity":10,"rate":0.001,"sustainedLimit":2,"sustainedWindow":"1h"}`)
	request(t, s, "key=q")
	request(t, s, "key=q")
	res, b = call(t, s, http.MethodPost, "/api/request?key=q", "")
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), `\"sustained\"`) {
		t.Errorf("third request: status %d, body %s; want 429 naming the sustained limit", res.StatusCode, b)
	}
}
