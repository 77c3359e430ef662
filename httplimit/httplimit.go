// Package httplimit limits HTTP requests with ratelimit Limiters and
// Policies, and tells clients where they stand with standard headers.
//
// A [Middleware] wraps an http.Handler (its Handler method has the shape
// func(http.Handler) http.Handler, so it plugs into net/http, chi,
// gorilla/mux and anything else that takes that). For each request it
// resolves a key and the limits that apply, charges the request's cost to
// every limit or to none in one decision (one round trip to Redis), and
// either passes the request on or answers 429 Too Many Requests.
//
// Headers follow the IETF draft "RateLimit header fields for HTTP"
// (draft-ietf-httpapi-ratelimit-headers): every response carries
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=42;t=17
//
// where q is the policy's limit, w its window in seconds, r what remains
// and t the seconds until the key is fresh again, one list item per limit.
// WithLegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset (seconds until reset) for older clients. A denied
// request gets Retry-After in whole seconds, rounded up and never 0, and
// an application/problem+json body.
package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-ratelimit/ratelimit"
)

// Resolver picks the key of a request and the policy that applies to it,
// for example a tier chosen by API key, or an anonymous limit by client IP.
// A nil policy lets the request through unlimited. An error answers the
// request with the middleware's error handler. Policies are made once (per
// tier, say) and reused: the middleware keeps what their headers say.
type Resolver[K comparable] func(r *http.Request) (key K, policy *ratelimit.Policy[K], err error)

// Middleware limits the requests that pass through it. Create it with
// [New], [NewPolicy] or [NewResolver]; it is safe for concurrent use.
type Middleware[K comparable] struct {
	resolve func(r *http.Request) (K, limits[K], error)
	config
	fields sync.Map // *ratelimit.Policy[K] → *Fields, for a Resolver's policies
}

type config struct {
	cost    func(*http.Request) int
	legacy  bool
	dryRun  bool
	onError func(http.ResponseWriter, *http.Request, error)
}

// Option configures a Middleware.
type Option func(*config)

// WithCost sets the cost of a request (default 1), for example by the
// size of a batch it carries.
func WithCost(cost func(*http.Request) int) Option {
	return func(c *config) {
		if cost != nil {
			c.cost = cost
		}
	}
}

// WithLegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset, describing the binding limit.
func WithLegacyHeaders() Option {
	return func(c *config) { c.legacy = true }
}

// WithDryRun runs the middleware in dry-run (shadow) mode: requests are
// charged and answered with the RateLimit headers as usual, but one that a
// limit denies is passed on instead of answered 429 (and without
// Retry-After). Its denying decisions reach the handler through Decisions
// with Allowed and DryRunDenied set, as a dry-run Limiter's would.
//
// The limiter's own ratelimit.WithDryRun does the same for every user of the
// limiter, and marks its observer's events as dry run; this option is for
// limiters that other routes share and enforce.
func WithDryRun() Option {
	return func(c *config) { c.dryRun = true }
}

// WithErrorHandler sets how a request is answered when no decision could be
// made: the resolver failed, or a limiter returned an error (a store
// failure under ratelimit.FailWithError). The default answers 503 for
// store failures and 500 otherwise, with a problem+json body that reveals
// nothing of the error.
func WithErrorHandler(h func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(c *config) {
		if h != nil {
			c.onError = h
		}
	}
}

// limits is what the middleware charges a request: a Limiter or a Policy.
type limits[K comparable] struct {
	lim    *ratelimit.Limiter[K]
	policy *ratelimit.Policy[K]
	fields *Fields // made once by New and NewPolicy; nil from a Resolver
}

// New returns a middleware charging lim, under the policy name "default",
// for the key that key returns.
func New[K comparable](lim *ratelimit.Limiter[K], key func(*http.Request) (K, error), opts ...Option) *Middleware[K] {
	ls := limits[K]{lim: lim, fields: LimiterFields(lim)}
	return newMiddleware(func(r *http.Request) (K, limits[K], error) {
		k, err := key(r)
		return k, ls, err
	}, opts)
}

// NewPolicy returns a middleware charging every limit of p, under their
// names, for the key that key returns: one decision, one round trip to a
// Redis store, however many limits p has.
func NewPolicy[K comparable](p *ratelimit.Policy[K], key func(*http.Request) (K, error), opts ...Option) *Middleware[K] {
	ls := limits[K]{policy: p, fields: PolicyFields(p)}
	return newMiddleware(func(r *http.Request) (K, limits[K], error) {
		k, err := key(r)
		return k, ls, err
	}, opts)
}

// NewResolver returns a middleware charging the policy resolve picks. A
// request is charged to every limit of the policy or to none, atomically
// (see ratelimit.Policy).
func NewResolver[K comparable](resolve Resolver[K], opts ...Option) *Middleware[K] {
	return newMiddleware(func(r *http.Request) (K, limits[K], error) {
		k, p, err := resolve(r)
		return k, limits[K]{policy: p}, err
	}, opts)
}

func newMiddleware[K comparable](resolve func(*http.Request) (K, limits[K], error), opts []Option) *Middleware[K] {
	m := &Middleware[K]{resolve: resolve, config: config{
		cost:    func(*http.Request) int { return 1 },
		onError: defaultError,
	}}
	for _, o := range opts {
		o(&m.config)
	}
	return m
}

// Handler returns next wrapped by the middleware.
func (m *Middleware[K]) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ls, err := m.resolve(r)
		if err != nil {
			m.onError(w, r, err)
			return
		}
		if ls.lim == nil && ls.policy == nil {
			next.ServeHTTP(w, r)
			return
		}
		d, f, err := m.decide(r.Context(), key, ls, m.cost(r))
		if errors.Is(err, ratelimit.ErrCostExceedsLimit) || errors.Is(err, ratelimit.ErrInvalidCost) {
			writeProblem(w, http.StatusRequestEntityTooLarge, "Request Too Costly",
				"the request costs more than the rate limit can ever admit")
			return
		}
		if err != nil {
			m.onError(w, r, err)
			return
		}
		m.writeHeaders(w.Header(), f, &d)
		if m.dryRun && !d.Allowed() {
			// Passed on: every denying decision is marked, as a dry-run
			// Limiter's would be.
			d.Decision = d.DryRun()
			limits := d.Limits()
			for i := range limits {
				limits[i] = limits[i].DryRun()
			}
		}
		if !d.Allowed() {
			retry := max(1, seconds(d.RetryAfter()))
			w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
			writeProblem(w, http.StatusTooManyRequests, "Too Many Requests",
				fmt.Sprintf("rate limit %q exceeded; retry in %d s", f.Name(d.Binding), retry))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), decisionsKey{}, newDecided(f, d))))
	})
}

// decide charges cost for key to ls, and returns the fields of ls.
func (m *Middleware[K]) decide(ctx context.Context, key K, ls limits[K], cost int) (ratelimit.PolicyDecision, *Fields, error) {
	if ls.lim != nil {
		d, err := ls.lim.AllowN(ctx, key, cost)
		return ratelimit.DecisionOfOne(d), ls.fields, err
	}
	d, err := ls.policy.AllowN(ctx, key, cost)
	f := ls.fields
	if f == nil {
		f = m.fieldsOf(ls.policy)
	}
	return d, f, err
}

// fieldsOf returns p's fields, made once per policy a resolver returns.
func (m *Middleware[K]) fieldsOf(p *ratelimit.Policy[K]) *Fields {
	if f, ok := m.fields.Load(p); ok {
		return f.(*Fields)
	}
	f := PolicyFields(p)
	m.fields.Store(p, f)
	return f
}

// Named is the decision of one named limit on a request.
type Named struct {
	// Name is the limit's name.
	Name string
	// Decision is what its limiter decided.
	Decision ratelimit.Decision
}

type decisionsKey struct{}

// decided is what the middleware hands the wrapped handler.
type decided struct {
	named []Named
	d     ratelimit.PolicyDecision
}

func newDecided(f *Fields, d ratelimit.PolicyDecision) *decided {
	out := &decided{named: make([]Named, len(d.Limits())), d: d}
	for i, di := range d.Limits() {
		out.named[i] = Named{Name: f.Name(i), Decision: di}
	}
	return out
}

// Decisions returns the decisions the middleware made for the request
// whose context ctx is, one per limit in the resolver's order, so that the
// wrapped handler can use them (to log, or to show the remaining quota).
// It returns nil outside the middleware.
func Decisions(ctx context.Context) []Named {
	if d, ok := ctx.Value(decisionsKey{}).(*decided); ok {
		return d.named
	}
	return nil
}

// PolicyDecision returns the whole decision the middleware made for the
// request whose context ctx is (the combined decision, the binding limit
// and each limit's decision), and false outside the middleware.
func PolicyDecision(ctx context.Context) (ratelimit.PolicyDecision, bool) {
	if d, ok := ctx.Value(decisionsKey{}).(*decided); ok {
		return d.d, true
	}
	return ratelimit.PolicyDecision{}, false
}

// seconds rounds d up to whole seconds.
func seconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}

func (m *Middleware[K]) writeHeaders(h http.Header, f *Fields, d *ratelimit.PolicyDecision) {
	h.Set("RateLimit-Policy", f.Policy())
	h.Set("RateLimit", f.RateLimit(d))
	if m.legacy {
		b := d.Limits()[d.Binding]
		h.Set("X-RateLimit-Limit", strconv.FormatInt(b.Limit(), 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(b.Remaining(), 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(seconds(b.ResetAfter()), 10))
	}
}

// problem is an RFC 9457 problem details body.
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

func defaultError(w http.ResponseWriter, _ *http.Request, err error) {
	switch {
	case errors.Is(err, ratelimit.ErrStoreUnavailable), errors.Is(err, ratelimit.ErrStoreFull),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeProblem(w, http.StatusServiceUnavailable, "Service Unavailable", "the rate limiter is unavailable; try again later")
		return
	case errors.Is(err, ratelimit.ErrKeyTooLong):
		writeProblem(w, http.StatusBadRequest, "Bad Request", "the request's rate-limit key is too long")
		return
	}
	writeProblem(w, http.StatusInternalServerError, "Internal Server Error", "")
}
