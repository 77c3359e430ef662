// Package httplimit limits HTTP requests with ratelimit Limiters, and tells
// clients where they stand with standard headers.
//
// A [Middleware] wraps an http.Handler (its Handler method has the shape
// func(http.Handler) http.Handler, so it plugs into net/http, chi,
// gorilla/mux and anything else that takes that). For each request it
// resolves a key and the limits that apply, charges the request's cost,
// and either passes the request on or answers 429 Too Many Requests.
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
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-ratelimit/ratelimit"
)

// Limit is one named limit that the middleware charges.
type Limit[K comparable] struct {
	// Name names the limit in the RateLimit and RateLimit-Policy headers.
	Name string
	// Limiter decides.
	Limiter *ratelimit.Limiter[K]
}

// Resolver picks the key of a request and the limits that apply to it,
// for example a tier chosen by API key, or an anonymous limit by client IP.
// An error answers the request with the middleware's error handler.
type Resolver[K comparable] func(r *http.Request) (key K, limits []Limit[K], err error)

// Middleware limits the requests that pass through it. Create it with
// [New] or [NewResolver]; it is safe for concurrent use.
type Middleware[K comparable] struct {
	resolve Resolver[K]
	config
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
// X-RateLimit-Reset, describing the most constraining limit.
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

// New returns a middleware charging lim, under the policy name "default",
// for the key that key returns.
func New[K comparable](lim *ratelimit.Limiter[K], key func(*http.Request) (K, error), opts ...Option) *Middleware[K] {
	limits := []Limit[K]{{Name: "default", Limiter: lim}}
	return NewResolver(func(r *http.Request) (K, []Limit[K], error) {
		k, err := key(r)
		return k, limits, err
	}, opts...)
}

// NewResolver returns a middleware charging the limits resolve picks. A
// request is charged only if every one of its limits admits it: the
// limits are peeked, then charged tightest first, stopping at the first
// denial, which has charged nothing. Only when requests race for the last
// units can one be charged by some limits and denied by a later one.
func NewResolver[K comparable](resolve Resolver[K], opts ...Option) *Middleware[K] {
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
		key, limits, err := m.resolve(r)
		if err != nil {
			m.onError(w, r, err)
			return
		}
		if len(limits) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		ds, err := m.decide(r.Context(), key, limits, m.cost(r))
		if errors.Is(err, ratelimit.ErrCostExceedsLimit) || errors.Is(err, ratelimit.ErrInvalidCost) {
			writeProblem(w, http.StatusRequestEntityTooLarge, "Request Too Costly",
				"the request costs more than the rate limit can ever admit")
			return
		}
		if err != nil {
			m.onError(w, r, err)
			return
		}
		m.writeHeaders(w.Header(), limits, ds)
		if m.dryRun {
			for i := range ds {
				if !ds[i].Allowed {
					ds[i].Allowed, ds[i].DryRunDenied = true, true
				}
			}
		}
		if denied := deniedBy(limits, ds); denied != "" {
			retry := retryAfter(ds)
			w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
			writeProblem(w, http.StatusTooManyRequests, "Too Many Requests",
				fmt.Sprintf("rate limit %q exceeded; retry in %d s", denied, retry))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), decisionsKey{}, namedDecisions(limits, ds))))
	})
}

// Named is the decision of one named limit on a request.
type Named struct {
	// Name is the limit's name.
	Name string
	// Decision is what its limiter decided.
	Decision ratelimit.Decision
}

type decisionsKey struct{}

func namedDecisions[K comparable](limits []Limit[K], ds []ratelimit.Decision) []Named {
	out := make([]Named, len(limits))
	for i, l := range limits {
		out[i] = Named{Name: l.Name, Decision: ds[i]}
	}
	return out
}

// Decisions returns the decisions the middleware made for the request
// whose context ctx is, one per limit in the resolver's order, so that the
// wrapped handler can use them (to log, or to show the remaining quota).
// It returns nil outside the middleware.
func Decisions(ctx context.Context) []Named {
	ds, _ := ctx.Value(decisionsKey{}).([]Named)
	return ds
}

// decide charges cost against every limit, or, unless two requests race,
// against none: it peeks every limit, then charges them from the one with
// the least remaining up, and stops at the first that denies. A limit that
// cannot fit the cost is thus charged first, denies without charging, and
// gives the exact RetryAfter. Limits it did not reach keep their peek.
func (m *Middleware[K]) decide(ctx context.Context, key K, limits []Limit[K], cost int) ([]ratelimit.Decision, error) {
	ds := make([]ratelimit.Decision, len(limits))
	if len(limits) == 1 {
		d, err := limits[0].Limiter.AllowN(ctx, key, cost)
		ds[0] = d
		return ds, err
	}
	order := make([]int, len(limits))
	for i, l := range limits {
		d, err := l.Limiter.Peek(ctx, key)
		if err != nil {
			return nil, err
		}
		ds[i], order[i] = d, i
	}
	sort.SliceStable(order, func(a, b int) bool { return ds[order[a]].Remaining < ds[order[b]].Remaining })
	for _, i := range order {
		d, err := limits[i].Limiter.AllowN(ctx, key, cost)
		if err != nil {
			return nil, err
		}
		ds[i] = d
		if !d.Allowed {
			break
		}
	}
	return ds, nil
}

// deniedBy returns the name of the limit that denied, or "" if all
// admitted. Only a charged decision can deny: a peek that found nothing
// left is superseded by the charge that follows it.
func deniedBy[K comparable](limits []Limit[K], ds []ratelimit.Decision) string {
	for i, d := range ds {
		if !d.Allowed {
			return limits[i].Name
		}
	}
	return ""
}

// retryAfter is the longest wait among the denying decisions, in whole
// seconds rounded up, and at least 1.
func retryAfter(ds []ratelimit.Decision) int64 {
	var longest time.Duration
	for _, d := range ds {
		if !d.Allowed {
			longest = max(longest, d.RetryAfter)
		}
	}
	return max(1, seconds(longest))
}

// seconds rounds d up to whole seconds.
func seconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}

func (m *Middleware[K]) writeHeaders(h http.Header, limits []Limit[K], ds []ratelimit.Decision) {
	var policy, state strings.Builder
	tightest := 0
	for i, l := range limits {
		d := ds[i]
		if i > 0 {
			policy.WriteString(", ")
			state.WriteString(", ")
		}
		name := quote(l.Name)
		fmt.Fprintf(&policy, "%s;q=%d", name, d.Limit)
		if w := seconds(l.Limiter.Window()); w > 0 {
			fmt.Fprintf(&policy, ";w=%d", w)
		}
		fmt.Fprintf(&state, "%s;r=%d;t=%d", name, d.Remaining, seconds(d.ResetAfter))
		if !d.Allowed && ds[tightest].Allowed || d.Remaining < ds[tightest].Remaining && d.Allowed == ds[tightest].Allowed {
			tightest = i
		}
	}
	h.Set("RateLimit-Policy", policy.String())
	h.Set("RateLimit", state.String())
	if m.legacy {
		d := ds[tightest]
		h.Set("X-RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(seconds(d.ResetAfter), 10))
	}
}

// quote renders s as a structured-field string (RFC 8941): printable
// ASCII, with '"' and '\' escaped; anything else becomes '?'.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
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
	if errors.Is(err, ratelimit.ErrStoreUnavailable) {
		writeProblem(w, http.StatusServiceUnavailable, "Service Unavailable", "the rate limiter is unavailable; try again later")
		return
	}
	writeProblem(w, http.StatusInternalServerError, "Internal Server Error", "")
}
