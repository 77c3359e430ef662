package httplimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func newLimiter[K comparable](t *testing.T, alg algorithm.Algorithm, fake *clock.Fake) *ratelimit.Limiter[K] {
	t.Helper()
	lim, err := ratelimit.New(alg, memorystore.New[K](), ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// newPolicy returns a policy of per-second and per-day fixed windows of 3
// and 5, named "second" and "day", on a memory store.
func newPolicy(t *testing.T, fake *clock.Fake) *ratelimit.Policy[string] {
	t.Helper()
	p, err := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
		{Name: "second", Algorithm: must(fixedwindow.New(fixedwindow.Config{Limit: 3, Window: time.Second}))},
		{Name: "day", Algorithm: must(fixedwindow.New(fixedwindow.Config{Limit: 5, Window: 24 * time.Hour}))},
	}, ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })

func byHeader(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }

func serve(h http.Handler, user string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-User", user)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

type step struct {
	advance    time.Duration
	status     int
	ratelimit  string
	retryAfter string
}

func TestHeadersPerAlgorithm(t *testing.T) {
	tests := []struct {
		name   string
		alg    algorithm.Algorithm
		policy string
		steps  []step
	}{{
		name:   "tokenbucket",
		alg:    must(tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 0.5})),
		policy: `"default";q=2;w=4`,
		steps: []step{
			{0, 200, `"default";r=1;t=2`, ""},
			{0, 200, `"default";r=0;t=4`, ""},
			{0, 429, `"default";r=0;t=4`, "2"},
			{1500 * time.Millisecond, 429, `"default";r=0;t=3`, "1"}, // 0.75 tokens: 0.5 s to go, rounded up
			{500 * time.Millisecond, 200, `"default";r=0;t=4`, ""},
		},
	}, {
		name:   "tokenbucket-interval",
		alg:    must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 2, Tokens: 1, Interval: 10 * time.Second})),
		policy: `"default";q=2;w=20`,
		steps: []step{
			{0, 200, `"default";r=1;t=10`, ""},
			{0, 200, `"default";r=0;t=20`, ""},
			{2500 * time.Millisecond, 429, `"default";r=0;t=18`, "8"},
		},
	}, {
		name:   "slidinglog",
		alg:    must(slidinglog.New(slidinglog.Config{Limit: 2, Window: time.Minute})),
		policy: `"default";q=2;w=60`,
		steps: []step{
			{0, 200, `"default";r=1;t=60`, ""},
			{30 * time.Second, 200, `"default";r=0;t=60`, ""},
			{100 * time.Millisecond, 429, `"default";r=0;t=60`, "30"},
		},
	}, {
		name:   "fixedwindow",
		alg:    must(fixedwindow.New(fixedwindow.Config{Limit: 2, Window: time.Minute})),
		policy: `"default";q=2;w=60`,
		steps: []step{
			{0, 200, `"default";r=1;t=60`, ""},
			{15 * time.Second, 200, `"default";r=0;t=45`, ""},
			{15 * time.Second, 429, `"default";r=0;t=30`, "30"},
			{30 * time.Second, 200, `"default";r=1;t=60`, ""},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := clock.NewFake(t0)
			h := httplimit.New(newLimiter[string](t, tt.alg, fake), byHeader, httplimit.WithLegacyHeaders()).Handler(ok)
			for i, s := range tt.steps {
				fake.Advance(s.advance)
				w := serve(h, "alice")
				if w.Code != s.status {
					t.Errorf("step %d: status got %d, want %d", i, w.Code, s.status)
				}
				if got := w.Header().Get("RateLimit-Policy"); got != tt.policy {
					t.Errorf("step %d: RateLimit-Policy got %q, want %q", i, got, tt.policy)
				}
				if got := w.Header().Get("RateLimit"); got != s.ratelimit {
					t.Errorf("step %d: RateLimit got %q, want %q", i, got, s.ratelimit)
				}
				if got := w.Header().Get("Retry-After"); got != s.retryAfter {
					t.Errorf("step %d: Retry-After got %q, want %q", i, got, s.retryAfter)
				}
			}
		})
	}
}

func TestDeniedResponse(t *testing.T) {
	fake := clock.NewFake(t0)
	alg := must(tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1000}))
	h := httplimit.New(newLimiter[string](t, alg, fake), byHeader, httplimit.WithLegacyHeaders()).Handler(ok)
	serve(h, "bob")
	w := serve(h, "bob")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("status got %d, want 429", w.Code)
	}
	// 1 ms to wait: Retry-After is rounded up and never 0.
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After got %q, want %q", got, "1")
	}
	if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("Content-Type got %q", got)
	}
	var p struct {
		Title  string
		Status int
		Detail string
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	if p.Status != 429 || p.Title != "Too Many Requests" || !strings.Contains(p.Detail, `"default"`) {
		t.Errorf("problem got %+v", p)
	}
	for h, want := range map[string]string{"X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1"} {
		if got := w.Header().Get(h); got != want {
			t.Errorf("%s got %q, want %q", h, got, want)
		}
	}
	if w := serve(h, "carol"); w.Code != 200 || w.Body.String() != "ok" {
		t.Errorf("another key: got %d %q, want 200 ok", w.Code, w.Body)
	}
}

func TestCost(t *testing.T) {
	fake := clock.NewFake(t0)
	alg := must(fixedwindow.New(fixedwindow.Config{Limit: 10, Window: time.Minute}))
	cost := func(r *http.Request) int { return len(r.Header.Get("X-User")) }
	h := httplimit.New(newLimiter[string](t, alg, fake), byHeader, httplimit.WithCost(cost)).Handler(ok)
	if w := serve(h, "abcdef"); w.Code != 200 || w.Header().Get("RateLimit") != `"default";r=4;t=60` {
		t.Errorf("cost 6: got %d %q", w.Code, w.Header().Get("RateLimit"))
	}
	if w := serve(h, "abcdefghijk"); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("cost 11 > limit 10: got %d, want 413", w.Code)
	}
}

func TestMultipleLimitsChargeAllOrNone(t *testing.T) {
	fake := clock.NewFake(t0)
	p := newPolicy(t, fake)
	h := httplimit.NewPolicy(p, byHeader).Handler(ok)

	for i := 0; i < 3; i++ {
		if w := serve(h, "dan"); w.Code != 200 {
			t.Fatalf("request %d: got %d, want 200", i, w.Code)
		}
	}
	w := serve(h, "dan")
	if w.Code != 429 {
		t.Fatalf("4th in one second: got %d, want 429", w.Code)
	}
	// The day window is aligned to the epoch: it ends at midnight UTC.
	if got, want := w.Header().Get("RateLimit"), `"second";r=0;t=1, "day";r=2;t=50400`; got != want {
		t.Errorf("RateLimit got %q, want %q", got, want)
	}
	if got, want := w.Header().Get("RateLimit-Policy"), `"second";q=3;w=1, "day";q=5;w=86400`; got != want {
		t.Errorf("RateLimit-Policy got %q, want %q", got, want)
	}
	// The denied request charged neither limit: the day still has 2.
	d, err := p.Peek(context.Background(), "dan")
	if err != nil || d.Limits()[1].Remaining() != 2 {
		t.Fatalf("day limit after a denial: got %d (%v), want 2", d.Limits()[1].Remaining(), err)
	}
	fake.Advance(time.Second)
	for i := 0; i < 2; i++ {
		if w := serve(h, "dan"); w.Code != 200 {
			t.Fatalf("next second, request %d: got %d, want 200", i, w.Code)
		}
	}
	w = serve(h, "dan")
	if w.Code != 429 || !strings.Contains(w.Body.String(), `\"day\"`) {
		t.Fatalf("day exhausted: got %d %s", w.Code, w.Body)
	}
	if d, _ := p.Peek(context.Background(), "dan"); d.Limits()[0].Remaining() != 1 {
		t.Errorf("per-second after the day denied: got %d, want 1 (not charged)", d.Remaining())
	}
}

// A Limiter of several limits (ratelimit.NewPolicy) given to New, as a
// Limiter, is described by its limits, as NewPolicy's middleware does.
func TestNewWithSeveralLimits(t *testing.T) {
	fake := clock.NewFake(t0)
	h := httplimit.New(newPolicy(t, fake), byHeader).Handler(ok)
	w := serve(h, "dan")
	if got, want := w.Header().Get("RateLimit-Policy"), `"second";q=3;w=1, "day";q=5;w=86400`; w.Code != 200 || got != want {
		t.Errorf("got %d, RateLimit-Policy %q; want 200, %q", w.Code, got, want)
	}
}

func TestTiers(t *testing.T) {
	fake := clock.NewFake(t0)
	tier := func(limit int64) *ratelimit.Policy[string] {
		p, err := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
			{Name: "tier", Algorithm: must(fixedwindow.New(fixedwindow.Config{Limit: limit, Window: time.Minute}))},
		}, ratelimit.WithClock(fake))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	free, pro, anon := tier(2), tier(100), tier(1)
	keys := map[string]*ratelimit.Policy[string]{"free-key": free, "pro-key": pro}
	ip := httplimit.ClientIP{}
	h := httplimit.NewResolver(func(r *http.Request) (string, *ratelimit.Policy[string], error) {
		if k := r.Header.Get("X-API-Key"); k != "" {
			limits, ok := keys[k]
			if !ok {
				return "", nil, errors.New("unknown API key")
			}
			return "key:" + k, limits, nil
		}
		p, err := ip.Key(r)
		return "ip:" + p.String(), anon, err
	}).Handler(ok)
	call := func(apiKey, remote string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		if apiKey != "" {
			r.Header.Set("X-API-Key", apiKey)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := call("pro-key", "192.0.2.1:1"); w.Header().Get("RateLimit-Policy") != `"tier";q=100;w=60` {
		t.Errorf("pro policy got %q", w.Header().Get("RateLimit-Policy"))
	}
	if w := call("free-key", "192.0.2.1:1"); w.Header().Get("RateLimit") != `"tier";r=1;t=60` {
		t.Errorf("free got %q", w.Header().Get("RateLimit"))
	}
	if w := call("", "192.0.2.1:1"); w.Code != 200 {
		t.Errorf("anonymous first: got %d", w.Code)
	}
	if w := call("", "192.0.2.1:2"); w.Code != 429 {
		t.Errorf("anonymous second from the same IP: got %d, want 429", w.Code)
	}
	if w := call("", "[2001:db8::1]:1"); w.Code != 200 {
		t.Errorf("anonymous IPv6: got %d", w.Code)
	}
	if w := call("", "[2001:db8::2]:1"); w.Code != 429 {
		t.Errorf("same IPv6 /64: got %d, want 429", w.Code)
	}
	w := call("stolen", "192.0.2.9:1")
	if w.Code != 500 || strings.Contains(w.Body.String(), "unknown API key") {
		t.Errorf("resolver error: got %d %q, want 500 revealing nothing", w.Code, w.Body)
	}
	if p := problemOf(t, w); p.Status != 500 || p.Detail == "" {
		t.Errorf("resolver error: problem got %+v, want a 500 that says what failed", p)
	}
}

func TestClientIP(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	tests := []struct {
		name    string
		cfg     httplimit.ClientIP
		remote  string
		headers map[string][]string
		want    string
	}{
		{"peer", httplimit.ClientIP{}, "192.0.2.1:1234", nil, "192.0.2.1"},
		{"spoofed XFF from an untrusted peer", httplimit.ClientIP{TrustedProxies: proxies}, "192.0.2.1:1234",
			map[string][]string{"X-Forwarded-For": {"203.0.113.7"}}, "192.0.2.1"},
		{"no proxies configured ignores XFF", httplimit.ClientIP{}, "10.0.0.1:1",
			map[string][]string{"X-Forwarded-For": {"203.0.113.7"}}, "10.0.0.1"},
		{"rightmost untrusted hop", httplimit.ClientIP{TrustedProxies: proxies}, "10.0.0.1:1",
			map[string][]string{"X-Forwarded-For": {"6.6.6.6, 203.0.113.7, 10.1.1.1"}}, "203.0.113.7"},
		{"several header lines", httplimit.ClientIP{TrustedProxies: proxies}, "10.0.0.1:1",
			map[string][]string{"X-Forwarded-For": {"6.6.6.6, 203.0.113.7", "10.1.1.1"}}, "203.0.113.7"},
		{"all trusted: leftmost", httplimit.ClientIP{TrustedProxies: proxies}, "10.0.0.1:1",
			map[string][]string{"X-Forwarded-For": {"10.2.2.2, 10.1.1.1"}}, "10.2.2.2"},
		{"garbage hop: the proxy that passed it", httplimit.ClientIP{TrustedProxies: proxies}, "10.0.0.1:1",
			map[string][]string{"X-Forwarded-For": {"1.1.1.1, garbage, 10.1.1.1"}}, "10.1.1.1"},
		{"IPv6 peer, mapped IPv4", httplimit.ClientIP{}, "[::ffff:192.0.2.5]:1", nil, "192.0.2.5"},
		{"Forwarded header", httplimit.ClientIP{TrustedProxies: proxies, Header: "Forwarded"}, "[2001:db8:ffff::1]:443",
			map[string][]string{"Forwarded": {`for=198.51.100.1;proto=https, for="[2001:db8:cafe::17]:4711"`}}, "2001:db8:cafe::17"},
		{"Forwarded ignores XFF", httplimit.ClientIP{TrustedProxies: proxies, Header: "Forwarded"}, "10.0.0.1:1",
			map[string][]string{"X-Forwarded-For": {"203.0.113.7"}}, "10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for k, vs := range tt.headers {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			got, err := tt.cfg.Addr(r)
			if err != nil || got.String() != tt.want {
				t.Errorf("got %v (%v), want %s", got, err, tt.want)
			}
		})
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "not an address"
	if _, err := (httplimit.ClientIP{}).Addr(r); !errors.Is(err, httplimit.ErrNoClientIP) {
		t.Errorf("bad RemoteAddr: got %v, want ErrNoClientIP", err)
	}
	r.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:80"
	if p, _ := (httplimit.ClientIP{}).Key(r); p.String() != "2001:db8:1:2::/64" {
		t.Errorf("IPv6 key got %v, want the /64", p)
	}
	if p, _ := (httplimit.ClientIP{IPv6Bits: 128}).Key(r); p.Bits() != 128 {
		t.Errorf("IPv6 key with 128 bits got %v", p)
	}
}

// failing is a store whose backend is down.
type failing struct{}

func (failing) Open([]store.Limit, clock.Clock) (store.Table[string], error) {
	return failing{}, nil
}
func (failing) Take(context.Context, string, int64, int64, []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{}, errors.Join(store.ErrUnavailable, errors.New("dial tcp 10.1.2.3:6379: secret internals"))
}
func (failing) Peek(ctx context.Context, k string, now int64, _ []algorithm.Result) (algorithm.Result, error) {
	return failing{}.Take(ctx, k, now, 1, nil)
}
func (failing) Reset(context.Context, string) error { return store.ErrUnavailable }

func TestStoreFailure(t *testing.T) {
	alg := must(fixedwindow.New(fixedwindow.Config{Limit: 1, Window: time.Minute}))
	for _, tt := range []struct {
		policy ratelimit.FailurePolicy
		codes  []int
	}{
		{ratelimit.FailWithError, []int{503, 503}},
		{ratelimit.FailOpen, []int{200, 200}},
		{ratelimit.FailClosed, []int{429, 429}},
		{ratelimit.FailLocal, []int{200, 429}},
	} {
		lim, err := ratelimit.New[string](alg, failing{}, ratelimit.WithFailurePolicy(tt.policy), ratelimit.WithName(fmt.Sprint(tt.policy)))
		if err != nil {
			t.Fatal(err)
		}
		h := httplimit.New(lim, byHeader).Handler(ok)
		for i, want := range tt.codes {
			w := serve(h, "eve")
			if w.Code != want {
				t.Errorf("policy %d request %d: got %d, want %d", tt.policy, i, w.Code, want)
			}
			if strings.Contains(w.Body.String(), "secret") {
				t.Errorf("policy %d: body reveals the error: %s", tt.policy, w.Body)
			}
			if w.Code == 429 && w.Header().Get("Retry-After") == "" {
				t.Errorf("policy %d: 429 without Retry-After", tt.policy)
			}
		}
	}
}

// refusing is a store that fails every call with err.
type refusing struct{ err error }

func (s refusing) Open([]store.Limit, clock.Clock) (store.Table[string], error) { return s, nil }
func (s refusing) Take(context.Context, string, int64, int64, []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{}, s.err
}
func (s refusing) Peek(context.Context, string, int64, []algorithm.Result) (algorithm.Result, error) {
	return algorithm.Result{}, s.err
}
func (s refusing) Reset(context.Context, string) error { return s.err }

// TestErrorStatuses: a store out of room is unavailable (503), a key too
// long is the client's error (400), a key holding the most states a store
// keeps is refused (429), a key's state of another algorithm the server's
// misconfiguration (500), even under FailOpen.
func TestErrorStatuses(t *testing.T) {
	alg := must(fixedwindow.New(fixedwindow.Config{Limit: 1, Window: time.Minute}))
	for _, tt := range []struct {
		err    error
		policy ratelimit.FailurePolicy
		want   int
	}{
		{fmt.Errorf("%w: OOM command not allowed", store.ErrFull), ratelimit.FailWithError, 503},
		{fmt.Errorf("%w: 4096 bytes", store.ErrKeyTooLong), ratelimit.FailWithError, 400},
		{fmt.Errorf("%w: RLTOOMANY rl:{eve}#", store.ErrTooManyStates), ratelimit.FailOpen, 429},
		{fmt.Errorf("%w: RLMISMATCH rl:{eve}", store.ErrStateMismatch), ratelimit.FailOpen, 500},
	} {
		lim, err := ratelimit.New[string](alg, refusing{tt.err}, ratelimit.WithName("refusing"), ratelimit.WithFailurePolicy(tt.policy))
		if err != nil {
			t.Fatal(err)
		}
		if w := serve(httplimit.New(lim, byHeader).Handler(ok), "eve"); w.Code != tt.want {
			t.Errorf("a store failing with %v: got %d, want %d", tt.err, w.Code, tt.want)
		}
	}
}

func TestDecisionsReachTheHandler(t *testing.T) {
	fake := clock.NewFake(t0)
	p := newPolicy(t, fake)
	var got []httplimit.Named
	h := httplimit.NewResolver(func(r *http.Request) (string, *ratelimit.Policy[string], error) {
		return "frank", p, nil
	}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = httplimit.Decisions(r.Context())
	}))
	serve(h, "frank")
	if len(got) != 2 || got[0].Name != "second" || got[0].Decision.Remaining() != 2 || got[1].Name != "day" || got[1].Decision.Remaining() != 4 {
		t.Fatalf("Decisions got %+v, want second with 2 left, day with 4", got)
	}
	if ds := httplimit.Decisions(context.Background()); ds != nil {
		t.Errorf("Decisions outside the middleware got %+v, want nil", ds)
	}
}

// TestDryRun serves the same requests through an enforcing middleware and
// a dry-run one, each on a limiter of its own: same headers and charges,
// but the dry-run one passes denied requests on, marked DryRunDenied.
func TestDryRun(t *testing.T) {
	alg := must(fixedwindow.New(fixedwindow.Config{Limit: 2, Window: time.Minute}))
	for _, tt := range []struct {
		name string
		new  func(lim *ratelimit.Limiter[string], next http.Handler) http.Handler
		opts []ratelimit.Option
	}{
		{"middleware", func(lim *ratelimit.Limiter[string], next http.Handler) http.Handler {
			return httplimit.New(lim, byHeader, httplimit.WithDryRun(), httplimit.WithLegacyHeaders()).Handler(next)
		}, nil},
		{"limiter", func(lim *ratelimit.Limiter[string], next http.Handler) http.Handler {
			return httplimit.New(lim, byHeader, httplimit.WithLegacyHeaders()).Handler(next)
		}, []ratelimit.Option{ratelimit.WithDryRun()}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := clock.NewFake(t0)
			enforced := httplimit.New(newLimiter[string](t, alg, fake), byHeader, httplimit.WithLegacyHeaders()).Handler(ok)
			dryLim, err := ratelimit.New(alg, memorystore.New[string](), append(tt.opts, ratelimit.WithClock(fake))...)
			if err != nil {
				t.Fatal(err)
			}
			var seen []httplimit.Named
			dry := tt.new(dryLim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = httplimit.Decisions(r.Context())
				w.Write([]byte("ok"))
			}))
			for i, wantDenied := range []bool{false, false, true, true} {
				seen = nil
				want, got := serve(enforced, "grace"), serve(dry, "grace")
				if wantDenied != (want.Code == 429) {
					t.Fatalf("request %d: the enforcing middleware answered %d", i, want.Code)
				}
				if got.Code != 200 || len(seen) != 1 {
					t.Fatalf("request %d: dry run answered %d, handler saw %+v; want 200 through the handler", i, got.Code, seen)
				}
				if d := seen[0].Decision; !d.Allowed() || d.DryRunDenied() != wantDenied {
					t.Errorf("request %d: handler saw %+v, want Allowed and DryRunDenied %v", i, d, wantDenied)
				}
				for _, h := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
					if g, w := got.Header().Get(h), want.Header().Get(h); g != w {
						t.Errorf("request %d: %s = %q, want %q as enforced", i, h, g, w)
					}
				}
				if ra := got.Header().Get("Retry-After"); ra != "" {
					t.Errorf("request %d: Retry-After %q in dry run", i, ra)
				}
			}
		})
	}
}

// quoted is an algorithm that says which quota its user configured
// (algorithm.Quoter), as a token bucket of 100 a minute with a burst of 20
// does.
type quoted struct {
	*tokenbucket.Bucket
	q algorithm.Quota
}

func (a quoted) Quota() algorithm.Quota { return a.q }

// burst20 is a token bucket of 100 a minute with a burst of 20.
func burst20() quoted {
	return quoted{must(tokenbucket.New(tokenbucket.Config{Capacity: 20, Rate: 100.0 / 60})), algorithm.Quota{Limit: 100, Window: time.Minute}}
}

// TestAdvertisedQuota: RateLimit-Policy announces the quota the user
// configured (Limiter.Quota), not the burst.
func TestAdvertisedQuota(t *testing.T) {
	fake := clock.NewFake(t0)
	h := httplimit.New(newLimiter[string](t, burst20(), fake), byHeader).Handler(ok)
	w := serve(h, "alice")
	if got, want := w.Header().Get("RateLimit-Policy"), `"default";q=100;w=60`; got != want {
		t.Errorf("New: RateLimit-Policy got %q, want %q", got, want)
	}
	if got, want := w.Header().Get("RateLimit"), `"default";r=19;t=1`; got != want {
		t.Errorf("New: RateLimit got %q, want %q", got, want)
	}

	p, err := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
		{Name: "minute", Algorithm: burst20()},
		{Name: "day", Algorithm: must(fixedwindow.New(fixedwindow.Config{Limit: 5000, Window: 24 * time.Hour}))},
	}, ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	want := `"minute";q=100;w=60, "day";q=5000;w=86400`
	if got := serve(httplimit.NewPolicy(p, byHeader).Handler(ok), "alice").Header().Get("RateLimit-Policy"); got != want {
		t.Errorf("NewPolicy: RateLimit-Policy got %q, want %q", got, want)
	}
	resolved := httplimit.NewResolver(func(*http.Request) (string, *ratelimit.Policy[string], error) { return "bob", p, nil })
	if got := serve(resolved.Handler(ok), "bob").Header().Get("RateLimit-Policy"); got != want {
		t.Errorf("NewResolver: RateLimit-Policy got %q, want %q", got, want)
	}
}

// TestWithAdvertised: names and quotas set per limit reach every header,
// the 429 body and Decisions; what is left zero keeps its default.
func TestWithAdvertised(t *testing.T) {
	fake := clock.NewFake(t0)
	alg := must(fixedwindow.New(fixedwindow.Config{Limit: 1, Window: time.Minute}))
	var seen []httplimit.Named
	h := httplimit.New(newLimiter[string](t, alg, fake), byHeader,
		httplimit.WithAdvertised("default", httplimit.Advertised{Name: "api"}),
		httplimit.WithAdvertised("nonesuch", httplimit.Advertised{Name: "ignored"}),
	).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = httplimit.Decisions(r.Context()) }))
	w := serve(h, "alice")
	if got, want := w.Header().Get("RateLimit-Policy"), `"api";q=1;w=60`; got != want {
		t.Errorf("RateLimit-Policy got %q, want %q", got, want)
	}
	if got, want := w.Header().Get("RateLimit"), `"api";r=0;t=60`; got != want {
		t.Errorf("RateLimit got %q, want %q", got, want)
	}
	if len(seen) != 1 || seen[0].Name != "api" {
		t.Errorf("Decisions got %+v, want one named api", seen)
	}
	if w := serve(h, "alice"); w.Code != 429 || !strings.Contains(w.Body.String(), `\"api\"`) {
		t.Errorf("denied: got %d %s, want 429 naming api", w.Code, w.Body)
	}

	h = httplimit.NewPolicy(newPolicy(t, fake), byHeader,
		httplimit.WithAdvertised("day", httplimit.Advertised{Quota: algorithm.Quota{Limit: 4}}),
		httplimit.WithAdvertised("second", httplimit.Advertised{Name: "burst", Quota: algorithm.Quota{Limit: 2, Window: 500 * time.Millisecond}}),
	).Handler(ok)
	w = serve(h, "bob")
	if got, want := w.Header().Get("RateLimit-Policy"), `"burst";q=2;w=1, "day";q=4`; got != want {
		t.Errorf("policy: RateLimit-Policy got %q, want %q", got, want)
	}
	if got, want := w.Header().Get("RateLimit"), `"burst";r=2;t=1, "day";r=4;t=50400`; got != want {
		t.Errorf("policy: RateLimit got %q, want %q", got, want)
	}
}

// problemOf decodes w's problem body.
func problemOf(t *testing.T, w *httptest.ResponseRecorder) (p struct {
	Type   string
	Title  string
	Status int
	Detail string
}) {
	t.Helper()
	if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("Content-Type got %q, want application/problem+json", got)
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	return p
}

func TestReject(t *testing.T) {
	fake := clock.NewFake(t0)
	alg := must(fixedwindow.New(fixedwindow.Config{Limit: 1, Window: time.Minute}))
	lim := newLimiter[string](t, alg, fake)
	for _, tt := range []struct {
		name   string
		err    error
		status int
		title  string
		detail string
	}{
		{"401", httplimit.Reject(401, "an X-API-Key header is required"), 401, "Unauthorized", "an X-API-Key header is required"},
		{"403 wrapped", fmt.Errorf("tier lookup: %w", httplimit.Reject(403, "this key is suspended")), 403, "Forbidden", "this key is suspended"},
		{"500 is not a client error", httplimit.Reject(500, "oops"), 400, "Bad Request", "oops"},
		{"302 neither", httplimit.Reject(302, "elsewhere"), 400, "Bad Request", "elsewhere"},
		{"made without Reject", &httplimit.RejectError{Status: 503, Reason: "down"}, 400, "Bad Request", "down"},
		{"unclassified", errors.New("user database: connection refused"), 500, "Internal Server Error", "the rate limit could not be applied to this request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := httplimit.New(lim, func(*http.Request) (string, error) { return "", tt.err }).Handler(ok)
			w := serve(h, "alice")
			if w.Code != tt.status {
				t.Errorf("status got %d, want %d", w.Code, tt.status)
			}
			p := problemOf(t, w)
			if p.Status != tt.status || p.Title != tt.title || p.Detail != tt.detail || p.Type != "about:blank" {
				t.Errorf("problem got %+v, want %d %q %q", p, tt.status, tt.title, tt.detail)
			}
			if got := w.Header().Get("RateLimit"); got != "" {
				t.Errorf("RateLimit got %q on a request not charged", got)
			}
		})
	}
	if d, _ := lim.Peek(context.Background(), ""); d.Remaining() != 1 {
		t.Errorf("after the rejections the limit has %d left, want 1: nothing charged", d.Remaining())
	}
	if got, want := httplimit.Reject(401, "no key").Error(), "httplimit: rejected (401): no key"; got != want {
		t.Errorf("Error() got %q, want %q", got, want)
	}
}

// logRecords returns a logger at debug level and the records it logged.
func logRecords() (*slog.Logger, func() []map[string]any) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return l, func() []map[string]any {
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if line == "" {
				continue
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				panic(err)
			}
			delete(rec, "time")
			out = append(out, rec)
		}
		buf.Reset()
		return out
	}
}

func TestErrorLog(t *testing.T) {
	alg := must(fixedwindow.New(fixedwindow.Config{Limit: 1, Window: time.Minute}))
	down, err := ratelimit.New[string](alg, failing{}, ratelimit.WithName("down"))
	if err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(t0)
	up := newLimiter[string](t, alg, fake)
	logger, records := logRecords()
	record := func(level string, status int, msg string) map[string]any {
		return map[string]any{"level": level, "msg": "httplimit: request not limited", "status": float64(status),
			"error": msg, "method": "GET", "path": "/"}
	}
	for _, tt := range []struct {
		name string
		h    http.Handler
		want []map[string]any
	}{
		{"unclassified key error", httplimit.New(up, func(*http.Request) (string, error) {
			return "", errors.New("user database: connection refused")
		}, httplimit.WithLogger(logger)).Handler(ok),
			[]map[string]any{record("WARN", 500, "user database: connection refused")}},
		{"reject", httplimit.New(up, func(*http.Request) (string, error) {
			return "", httplimit.Reject(401, "an X-API-Key header is required")
		}, httplimit.WithLogger(logger)).Handler(ok),
			[]map[string]any{record("DEBUG", 401, "httplimit: rejected (401): an X-API-Key header is required")}},
		{"store down", httplimit.New(down, byHeader, httplimit.WithLogger(logger)).Handler(ok),
			[]map[string]any{record("WARN", 503, "ratelimit: store unavailable\ndial tcp 10.1.2.3:6379: secret internals")}},
		{"too costly", httplimit.New(up, byHeader, httplimit.WithLogger(logger), httplimit.WithCost(func(*http.Request) int { return 2 })).Handler(ok),
			[]map[string]any{record("DEBUG", 413, "ratelimit: cost exceeds the limit: cost 2, limit 1")}},
		{"custom error handler logs itself", httplimit.New(down, byHeader, httplimit.WithLogger(logger),
			httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(503) })).Handler(ok),
			nil},
		{"admitted", httplimit.New(up, byHeader, httplimit.WithLogger(logger)).Handler(ok), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			records()
			serve(tt.h, "secret-user-key")
			got := records()
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("logged %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestErrorLogDefault: without WithLogger, slog.Default() at the time of
// the error gets the record.
func TestErrorLogDefault(t *testing.T) {
	logger, records := logRecords()
	defer slog.SetDefault(slog.Default())
	alg := must(fixedwindow.New(fixedwindow.Config{Limit: 1, Window: time.Minute}))
	h := httplimit.New(newLimiter[string](t, alg, clock.NewFake(t0)), func(*http.Request) (string, error) {
		return "", errors.New("no tier")
	}).Handler(ok)
	slog.SetDefault(logger)
	serve(h, "alice")
	if got := records(); len(got) != 1 || got[0]["error"] != "no tier" || got[0]["level"] != "WARN" {
		t.Errorf("slog.Default() got %v, want one WARN record of the error", got)
	}
}

// TestHeadersAgree: every header names the same limit (X-RateLimit-Limit
// is RateLimit-Policy's q, not the burst), under the name the Limiter was
// given, and a decision a failure policy made advertises no quota.
func TestHeadersAgree(t *testing.T) {
	alg := must(tokenbucket.PerMinute(100, tokenbucket.Burst(20)))
	lim, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithName("api"))
	if err != nil {
		t.Fatal(err)
	}
	w := serve(httplimit.New(lim, byHeader, httplimit.WithLegacyHeaders()).Handler(ok), "ann")
	for h, want := range map[string]string{
		"RateLimit-Policy":      `"api";q=100;w=60`,
		"RateLimit":             `"api";r=19;t=1`,
		"X-RateLimit-Limit":     "100",
		"X-RateLimit-Remaining": "19",
	} {
		if got := w.Header().Get(h); got != want {
			t.Errorf("%s: got %q, want %q", h, got, want)
		}
	}

	for _, policy := range []ratelimit.FailurePolicy{ratelimit.FailOpen, ratelimit.FailClosed, ratelimit.FailLocal} {
		lim, err := ratelimit.New[string](alg, failing{}, ratelimit.WithFailurePolicy(policy), ratelimit.WithName(fmt.Sprint(policy)))
		if err != nil {
			t.Fatal(err)
		}
		w := serve(httplimit.New(lim, byHeader, httplimit.WithLegacyHeaders()).Handler(ok), "ann")
		for _, h := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
			if got := w.Header().Get(h); got != "" {
				t.Errorf("policy %d (status %d): %s: %q; want none, the quota left is not known", policy, w.Code, h, got)
			}
		}
	}
}
