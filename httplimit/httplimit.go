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
// where q and w are the limit's quota as its user configured it (q per w
// seconds: the limiter's Quota, or what WithAdvertised says), r
// what remains now and t the seconds until the key is fresh again, one list
// item per limit. WithLegacyHeaders adds X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset (seconds until reset) for
// older clients. A denied request gets Retry-After in whole seconds,
// rounded up and never 0, and an application/problem+json body (RFC 9457).
//
// A key function or Resolver refuses a request with [Reject] (a missing
// API key: 401); any other error it returns, and a limiter's errors, go to
// the error handler (see WithErrorHandler), whose default answers with a
// problem body and logs the error (see WithLogger).
//
// [Middleware.Admit] is the whole decision for one request, for adapters
// to other frameworks: the modules ginratelimit and echoratelimit use it,
// so that their headers, statuses and bodies are net/http's.
package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Resolver picks the key of a request and the policy that applies to it,
// for example a tier chosen by API key, or an anonymous limit by client IP.
// A nil policy lets the request through unlimited. An error answers the
// request with the middleware's error handler; one made by [Reject]
// answers it with a client error. Policies are made once (per tier, say)
// and reused: the middleware keeps what their headers say.
type Resolver[K comparable] func(r *http.Request) (key K, policy *ratelimit.Policy[K], err error)

// Middleware limits the requests that pass through it. Create it with
// [New], [NewPolicy] or [NewResolver]; it is safe for concurrent use.
type Middleware[K comparable] struct {
	resolve func(r *http.Request) (K, limits[K], error)
	config
	fields  FieldsCache[K] // the fields of the limiters and policies met
	waiting atomic.Int64   // requests held by WithWait now
}

type config struct {
	cost       func(*http.Request) int
	legacy     bool
	dryRun     bool
	onError    func(http.ResponseWriter, *http.Request, error)  // nil: answerError
	logger     *slog.Logger                                     // nil: slog.Default()
	advertised map[string]Advertised                            // by the limit's own name
	maxWait    time.Duration                                    // WithWait's; 0: none
	maxWaiting int64                                            // WithWait's bound on requests held at once; 0: none
	refundIf   func(status int) bool                            // WithRefund's; nil: none
	settleTo   func(*http.Request, int, http.Header, int64) int // WithSettle's; nil: none
}

// WithWait lets a request that does not fit now wait for its turn, up to
// maxWait (and never past its context's deadline), with at most maxWaiting
// requests held at once by the middleware (0: no bound; past it, a request
// that does not fit now is answered 429 at once, so that a flood of keys,
// each within its own limit, cannot hold every connection the server has).
// A held request is booked
// (ratelimit.Limiter.ReserveN), charged at once, and held until its
// instant, then passed on; waiting requests pass in the order they were
// booked, each costing one store call. A request waiting for a slot of an
// in-flight limit is not booked ahead (ReserveN decides a hold now): it
// tries again after the denial's RetryAfter or 50ms, whichever is sooner,
// one store call each, until maxWait. A request that cannot be booked in
// time is answered 429 as without this option, charged nothing. A client
// that goes away while it waits gives its booking back. Use it for
// traffic that is better late than refused (webhooks, batch clients), with
// a maxWait well under the server's write timeout. Ignored in dry-run
// mode, which never holds a request.
func WithWait(maxWait time.Duration, maxWaiting int) Option {
	return func(c *config) {
		if maxWait > 0 {
			c.maxWait = maxWait
			c.maxWaiting = int64(max(0, maxWaiting))
		}
	}
}

// WithRefund gives back a request's cost when the handler's response
// status satisfies refund, so that only some responses count: refund
// successful logins (status < 400) to count failed ones alone, or refund
// 5xx so that clients are not charged for the server's failures. Each
// request is then admitted as a reservation at now (ReserveN with no
// delay), and a refund gives back that admission alone
// (Reservation.Refund): never another request's booking, nor into a
// window that no longer counts. The refund is one more store call, after
// the handler has written its response, with the request's context freed
// of its cancellation. Handler does it; adapters that call Admit call
// Middleware.Refund themselves.
func WithRefund(refund func(status int) bool) Option {
	return func(c *config) { c.refundIf = refund }
}

// WithSettle charges a request what its response says it cost, once the
// handler has returned: cost gets the request, the response's status, its
// header (trailers included, as http.TrailerPrefix keys the handler set)
// and the bytes of body written, and returns the cost (the request's
// WithCost was the estimate charged to admit it). An LLM proxy that puts
// the upstream's token count in a trailer returns it; a download limit
// returns written. The request's reservation is settled to it
// (ratelimit.Reservation.Settle): less is given back as WithRefund gives
// back, more is charged past the limit, a debt the key's next requests
// wait out. A negative cost leaves the charge as it is. Each request is
// admitted as a reservation at now, as with WithRefund, and the settle is
// one more store call after the response, with the request's context freed
// of its cancellation; WithRefund's refund, when it applies, comes
// instead. Handler does it; adapters that call Admit call
// Middleware.Settle themselves.
func WithSettle(cost func(r *http.Request, status int, header http.Header, written int64) int) Option {
	return func(c *config) { c.settleTo = cost }
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
// X-RateLimit-Reset, describing the binding limit. X-RateLimit-Limit is
// its quota, the q RateLimit-Policy gives it (100 for 100 a minute with a
// burst of 20), so that no two headers name different limits;
// X-RateLimit-Remaining is what it admits now (at most the burst).
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
// made: the key function or resolver failed (errors made by [Reject]
// included: find them with errors.As and a *RejectError), or a limiter
// returned an error (a store failure under ratelimit.FailWithError). The
// default answers with an application/problem+json body that reveals
// nothing of the error but a RejectError's reason:
//
//   - a RejectError: its status;
//   - ratelimit.ErrStoreUnavailable, ratelimit.ErrStoreFull, or the
//     request's context ended: 503 Service Unavailable;
//   - ratelimit.ErrKeyTooLong: 400 Bad Request;
//   - ratelimit.ErrTooManyStates: 429 Too Many Requests (the key holds
//     the most limits a store keeps for one key: limits given per call
//     that change faster than its state expires), logged at debug level;
//   - ratelimit.ErrStateMismatch: 500 Internal Server Error, with a detail
//     that says the limiter is misconfigured (two limits configured
//     differently share a state ID), logged at warning level: the server's
//     fault, not the client's, and not an outage that a retry outlasts;
//   - any other error: 500 Internal Server Error. A key function that
//     cannot tell a key is the server's failure (a lookup that failed, a
//     RemoteAddr that is not an address); a request that lacks what its key
//     needs is the client's, and is answered with Reject.
//
// The default also logs the error (see WithLogger); a handler set here logs
// what it wants itself.
func WithErrorHandler(h func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(c *config) {
		if h != nil {
			c.onError = h
		}
	}
}

// WithLogger sets the logger of the default error handler (default
// slog.Default(), as it is when the error happens). Every error that the
// middleware answers itself, rather than through a handler set by
// WithErrorHandler, is logged once: at slog.LevelWarn when the answer is
// a 5xx, at slog.LevelDebug when it is a 4xx (a client's mistake, such as
// a Reject or a request costing more than the limit, which a busy server
// would log by the thousand) or when the request's own context ended (the
// client went away). The record's message is "httplimit: request not
// limited" and its attributes are status, error (the error's text), method
// and path (the URL path, without the query); the key, headers and client
// address are never logged, so the error text is all that a key function
// controls there: keep secrets out of it. A logger over
// slog.DiscardHandler logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// Advertised is what the headers say of one limit.
type Advertised struct {
	// Name is the limit's name in RateLimit-Policy, RateLimit, 429 bodies
	// and Decisions. Empty keeps the limit's own.
	Name string
	// Quota is the quota RateLimit-Policy announces: q=Limit, and
	// w=Window in seconds (left out when Window is 0). A Limit of 0 or
	// less keeps the quota its user configured (the limiter's or policy's
	// Quota).
	Quota algorithm.Quota
}

// WithAdvertised sets what the headers say of the limit named limit:
// [New]'s limiter's name (ratelimit.WithName, "default" when it has
// none), a ratelimit.Limit's Name in a policy
// ([NewPolicy], and every policy of a [NewResolver] that has a limit of
// that name). What it leaves zero keeps its default; by default a limit is
// advertised under its own name with the quota its user configured, so
// that a token bucket of 100 a minute with a burst of 20 is announced as
// q=100;w=60, not q=20. Set it when the configuration says something else
// than the clients should read, such as a name of the API's own:
//
//	httplimit.New(lim, key, httplimit.WithAdvertised("default", httplimit.Advertised{Name: "api"}))
//
// A limit no middleware's policy has is ignored. Later options for the same
// limit replace earlier ones.
func WithAdvertised(limit string, a Advertised) Option {
	return func(c *config) {
		if c.advertised == nil {
			c.advertised = make(map[string]Advertised)
		}
		c.advertised[limit] = a
	}
}

// RejectError is the error [Reject] makes. A key function or Resolver
// returns it (or an error wrapping it) to refuse a request as the
// client's mistake.
type RejectError struct {
	// Status is the response's status, a client error (4xx).
	Status int
	// Reason is the problem body's detail, sent to the client.
	Reason string
}

// Reject returns an error that a key function or Resolver returns to
// answer the request with status and an application/problem+json body
// whose detail is reason, such as Reject(401, "an X-API-Key header is
// required"). Reject is for the client's mistakes: a status outside
// 400–499 becomes 400 Bad Request. The request is not charged to any
// limit, and has no RateLimit headers.
func Reject(status int, reason string) error {
	if status < 400 || status > 499 {
		status = http.StatusBadRequest
	}
	return &RejectError{Status: status, Reason: reason}
}

// Error returns "httplimit: rejected (STATUS): REASON".
func (e *RejectError) Error() string {
	return fmt.Sprintf("httplimit: rejected (%d): %s", e.Status, e.Reason)
}

// limits is what the middleware charges a request: a Limiter or a Policy.
type limits[K comparable] struct {
	lim    *ratelimit.Limiter[K]
	policy *ratelimit.Policy[K]
}

// New returns a middleware charging lim, under its name
// (ratelimit.WithName, "default" when it has none), for the key that key
// returns.
func New[K comparable](lim *ratelimit.Limiter[K], key func(*http.Request) (K, error), opts ...Option) *Middleware[K] {
	m := newMiddleware[K](opts)
	ls := limits[K]{lim: lim}
	m.resolve = func(r *http.Request) (K, limits[K], error) {
		k, err := key(r)
		return k, ls, err
	}
	return m
}

// NewPolicy returns a middleware charging every limit of p, under their
// names, for the key that key returns: one decision, one round trip to a
// Redis store, however many limits p has.
func NewPolicy[K comparable](p *ratelimit.Policy[K], key func(*http.Request) (K, error), opts ...Option) *Middleware[K] {
	m := newMiddleware[K](opts)
	ls := limits[K]{policy: p}
	m.resolve = func(r *http.Request) (K, limits[K], error) {
		k, err := key(r)
		return k, ls, err
	}
	return m
}

// NewResolver returns a middleware charging the policy resolve picks. A
// request is charged to every limit of the policy or to none, atomically
// (see ratelimit.Policy).
func NewResolver[K comparable](resolve Resolver[K], opts ...Option) *Middleware[K] {
	m := newMiddleware[K](opts)
	m.resolve = func(r *http.Request) (K, limits[K], error) {
		k, p, err := resolve(r)
		return k, limits[K]{policy: p}, err
	}
	return m
}

// NewLimiterResolver returns a middleware charging the limiter resolve
// picks: a limit per customer, say, with ratelimit.Limiter.With of the
// customer's plan. A nil limiter lets the request through unlimited.
func NewLimiterResolver[K comparable](resolve func(r *http.Request) (K, *ratelimit.Limiter[K], error), opts ...Option) *Middleware[K] {
	m := newMiddleware[K](opts)
	m.resolve = func(r *http.Request) (K, limits[K], error) {
		k, lim, err := resolve(r)
		return k, limits[K]{lim: lim}, err
	}
	return m
}

func newMiddleware[K comparable](opts []Option) *Middleware[K] {
	m := &Middleware[K]{config: config{
		cost: func(*http.Request) int { return 1 },
	}}
	for _, o := range opts {
		o(&m.config)
	}
	m.fields.describe = m.describe
	if m.onError == nil {
		m.onError = m.answerError
	}
	return m
}

// Handler returns next wrapped by the middleware: [Middleware.Admit], then
// next for the requests it admits (and, with WithRefund, the refund of
// those whose response status asks for it). A slot of an in-flight limit
// is held while next runs, and released when it returns or panics
// ([Middleware.Release]).
func (m *Middleware[K]) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, ok := m.Admit(w, r)
		if !ok {
			return
		}
		if d, _ := r.Context().Value(decisionsKey{}).(*decided); d != nil && d.release != nil {
			defer m.Release(r)
		}
		if m.refundIf == nil && m.settleTo == nil {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		switch {
		case m.refundIf != nil && m.refundIf(sw.code()):
			m.Refund(r)
		case m.settleTo != nil:
			if n := m.settleTo(r, sw.code(), sw.Header(), sw.written); n >= 0 {
				m.Settle(r, n)
			}
		}
	})
}

// Refund gives back the cost the middleware charged for r, a request it
// admitted (r as Admit returned it), to every limit that charged it, and
// reports whether it did. It needs a middleware built WithRefund, whose
// Handler calls it for the statuses the option names; an adapter calling
// Admit calls it itself (with a refund func that returns false, Handler
// never does). Only what the store charged is refunded: a request
// admitted uncharged (dry run, or a limit that denied it in dry-run mode),
// one a failure policy admitted (FailOpen, or FailLocal's table) and one
// the middleware did not admit are not. A store error goes to the logger, as the
// request has been answered.
func (m *Middleware[K]) Refund(r *http.Request) bool {
	d, ok := r.Context().Value(decisionsKey{}).(*decided)
	if !ok || d.refund == nil || d.d.DryRunDenied() || d.d.Source() != ratelimit.FromStore {
		return false // the store did not charge it
	}
	if _, err := d.refund(context.WithoutCancel(r.Context())); err != nil {
		m.log(r, http.StatusServiceUnavailable, fmt.Errorf("refund: %w", err))
		return false
	}
	return true
}

// Release frees the slots that the middleware's in-flight limits (see
// Fields.Holds) hold for r, a request it admitted (r as Admit returned
// it), and reports whether it did; the other limits keep the request's
// charge (ratelimit.Reservation.Release). Handler calls it when the
// handler returns or panics; an adapter calling Admit defers it right
// after an admission. A second call, or one after Refund, frees nothing. A
// store error goes to the logger, as the request has been answered; the
// slot is then freed when its lease ends.
func (m *Middleware[K]) Release(r *http.Request) bool {
	d, ok := r.Context().Value(decisionsKey{}).(*decided)
	if !ok || d.release == nil {
		return false
	}
	if _, err := d.release(context.WithoutCancel(r.Context())); err != nil {
		m.log(r, http.StatusServiceUnavailable, fmt.Errorf("release: %w", err))
		return false
	}
	return true
}

// Settle makes the cost the middleware charged for r, a request it
// admitted (r as Admit returned it), n to every limit that charged it
// (ratelimit.Reservation.Settle), and reports whether it did. It needs a
// middleware built WithSettle (or WithRefund), whose Handler calls it with
// the cost WithSettle's func returns; an adapter calling Admit calls it
// itself. Only what the store charged is settled, as Refund refunds only
// that. A store error goes to the logger, as the request has been
// answered.
func (m *Middleware[K]) Settle(r *http.Request, n int) bool {
	d, ok := r.Context().Value(decisionsKey{}).(*decided)
	if !ok || d.settle == nil || d.d.DryRunDenied() || d.d.Source() != ratelimit.FromStore {
		return false // the store did not charge it
	}
	if err := d.settle(context.WithoutCancel(r.Context()), n); err != nil {
		m.log(r, http.StatusServiceUnavailable, fmt.Errorf("settle: %w", err))
		return false
	}
	return true
}

// statusWriter records the status a handler answers with, and the bytes
// of body it writes.
type statusWriter struct {
	http.ResponseWriter
	status  int
	written int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.written += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the writer's own methods.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// code is the status written, 200 when the handler wrote nothing.
func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Admit decides whether r may go on to the handler, and sets the
// RateLimit headers on w. When it may, Admit returns r with the decisions
// in its context (for [Decisions] and [PolicyDecision]) and true: serve
// that request. Otherwise it has answered r on w (429 Too Many Requests,
// 413 Content Too Large for a request costing more than a limit can ever
// admit, a [Reject], or the error handler's answer) and returns nil and
// false: write nothing more. Handler is Admit in front of a handler; Admit
// is for adapters to frameworks that do not take func(http.Handler)
// http.Handler, so that they answer as Handler does.
func (m *Middleware[K]) Admit(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	key, ls, err := m.resolve(r)
	if err != nil {
		m.onError(w, r, err)
		return nil, false
	}
	if ls.lim == nil && ls.policy == nil {
		return r, true
	}
	d, f, res, err := m.decide(r.Context(), key, ls, m.cost(r))
	if errors.Is(err, ratelimit.ErrCostExceedsLimit) || errors.Is(err, ratelimit.ErrInvalidCost) {
		m.log(r, http.StatusRequestEntityTooLarge, err)
		writeProblem(w, http.StatusRequestEntityTooLarge, "Request Too Costly",
			"the request costs more than the rate limit can ever admit")
		return nil, false
	}
	if err != nil {
		m.onError(w, r, err)
		return nil, false
	}
	m.writeHeaders(w.Header(), f, &d)
	if m.dryRun && !d.Allowed() {
		// Passed on: every denying decision is marked, as a dry-run
		// Limiter's would be.
		d = d.DryRun()
	}
	if !d.Allowed() {
		retry := max(1, seconds(d.RetryAfter()))
		w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
		writeProblem(w, http.StatusTooManyRequests, "Too Many Requests",
			fmt.Sprintf("rate limit %q exceeded; retry in %d s", f.Name(d.Binding()), retry))
		return nil, false
	}
	dd := newDecided(f, d)
	if res != nil {
		dd.refund, dd.settle = res.Refund, res.Settle // method values cost allocations: only when asked for
		if f.Holds() {
			dd.release = res.Release
		}
	}
	return r.WithContext(context.WithValue(r.Context(), decisionsKey{}, dd)), true
}

// decide charges cost for key to ls, and returns the fields of ls. With
// WithWait it books a request that does not fit now, and waits for it;
// with WithRefund or WithSettle, or when a limit holds (an in-flight
// limit), it books one that fits now, and returns its reservation, whose
// Refund gives back that admission alone, whose Settle changes its cost
// and whose Release frees its slots.
func (m *Middleware[K]) decide(ctx context.Context, key K, ls limits[K], cost int) (ratelimit.Decision, *Fields, *ratelimit.Reservation[K], error) {
	booked := m.refundIf != nil || m.settleTo != nil || m.maxWait > 0 && !m.dryRun
	if ls.lim != nil {
		f := m.fields.Limiter(ls.lim)
		if booked || f.Holds() {
			return m.wait(ctx, key, ls, cost)
		}
		d, err := ls.lim.AllowN(ctx, key, cost)
		return d, f, nil, err
	}
	f := m.fields.Policy(ls.policy)
	if booked || f.Holds() {
		return m.wait(ctx, key, ls, cost)
	}
	d, err := ls.policy.AllowN(ctx, key, cost)
	return d, f, nil, err
}

// slotPoll bounds how long a request waiting for a slot sleeps between
// tries.
const slotPoll = 50 * time.Millisecond

// wait books cost for key on ls within maxWait (0 without WithWait or in
// dry-run mode), and sleeps until it is due: the admission and its
// reservation, or the denial when it could not be booked in time.
func (m *Middleware[K]) wait(ctx context.Context, key K, ls limits[K], cost int) (ratelimit.Decision, *Fields, *ratelimit.Reservation[K], error) {
	maxWait := m.maxWait
	if m.dryRun {
		maxWait = 0
	}
	if deadline, ok := ctx.Deadline(); ok {
		maxWait = max(0, min(maxWait, time.Until(deadline)))
	}
	if m.maxWaiting > 0 {
		// A place among the held requests, taken before booking (and given
		// back when the request goes on or is refused), or none: then only
		// what fits now.
		if m.waiting.Add(1) > m.maxWaiting {
			maxWait = 0
		}
		defer m.waiting.Add(-1)
	}
	var f *Fields
	if ls.lim != nil {
		f = m.fields.Limiter(ls.lim)
	} else {
		f = m.fields.Policy(ls.policy)
	}
	reserve := func() (*ratelimit.Reservation[K], error) {
		if ls.lim != nil {
			return ls.lim.ReserveN(ctx, key, cost, maxWait)
		}
		return ls.policy.ReserveN(ctx, key, cost, maxWait)
	}
	res, err := reserve()
	// ReserveN decides a hold now whatever maxWait (no store knows when a
	// slot frees): a request waiting for a slot tries again after the
	// denial's RetryAfter or slotPoll, whichever is sooner, until maxWait.
	for end := time.Now().Add(maxWait); err == nil && !res.OK() && f.Holds(); res, err = reserve() {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		t := time.NewTimer(min(res.Decision().RetryAfter(), slotPoll, left))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ratelimit.Decision{}, f, nil, ctx.Err() // the client has gone, holding nothing
		}
	}
	if err != nil {
		return ratelimit.Decision{}, f, nil, err
	}
	if !res.OK() {
		return res.Decision(), f, nil, nil
	}
	if err := res.Wait(ctx); err != nil {
		return ratelimit.Decision{}, f, nil, err // the client has gone; its booking was given back
	}
	return res.Decision(), f, res, nil // due: as it admits the request
}

// describe returns the fields of limits of these names and configured
// quotas, after WithAdvertised.
func (c *config) describe(names []string, quotas []algorithm.Quota) *Fields {
	names = append([]string(nil), names...)
	quotas = append([]algorithm.Quota(nil), quotas...)
	for i, name := range names {
		if a, ok := c.advertised[name]; ok {
			if a.Name != "" {
				names[i] = a.Name
			}
			if a.Quota.Limit > 0 {
				quotas[i] = a.Quota
			}
		}
	}
	return newFields(names, quotas)
}

// Named is the decision of one named limit on a request.
type Named struct {
	// Name is the limit's name, as the headers give it (see WithAdvertised).
	Name string
	// Decision is what its limiter decided.
	Decision ratelimit.Decision
}

type decisionsKey struct{}

// decided is what the middleware hands the wrapped handler.
type decided struct {
	named   []Named
	d       ratelimit.Decision
	refund  func(context.Context) (int64, error) // gives the request's cost back (Refund)
	settle  func(context.Context, int) error     // makes the request's cost another (Settle)
	release func(context.Context) (int64, error) // frees its slots (Release); nil when no limit holds
}

func newDecided(f *Fields, d ratelimit.Decision) *decided {
	ds := d.Limits()
	if ds == nil {
		ds = []ratelimit.Decision{d} // one limit's
	}
	out := &decided{named: make([]Named, len(ds)), d: d}
	for i, di := range ds {
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
func PolicyDecision(ctx context.Context) (ratelimit.Decision, bool) {
	if d, ok := ctx.Value(decisionsKey{}).(*decided); ok {
		return d.d, true
	}
	return ratelimit.Decision{}, false
}

// seconds rounds d up to whole seconds.
func seconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}

func (m *Middleware[K]) writeHeaders(h http.Header, f *Fields, d *ratelimit.Decision) {
	if d.Source() != ratelimit.FromStore {
		return // a failure policy decided: the quota left is not known
	}
	h.Set("RateLimit-Policy", f.Policy())
	h.Set("RateLimit", f.RateLimit(d))
	if m.legacy {
		b := *d
		if ds := d.Limits(); ds != nil {
			b = ds[d.Binding()]
		}
		h.Set("X-RateLimit-Limit", strconv.FormatInt(f.Quota(d.Binding()), 10))
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

// answerError is the default error handler (see WithErrorHandler).
func (m *Middleware[K]) answerError(w http.ResponseWriter, r *http.Request, err error) {
	status, detail := http.StatusInternalServerError, "the rate limit could not be applied to this request"
	var reject *RejectError
	switch {
	case errors.As(err, &reject):
		status, detail = reject.Status, reject.Reason
		if status < 400 || status > 499 { // made without Reject
			status = http.StatusBadRequest
		}
	case errors.Is(err, ratelimit.ErrStoreUnavailable), errors.Is(err, ratelimit.ErrStoreFull),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		status, detail = http.StatusServiceUnavailable, "the rate limiter is unavailable; try again later"
	case errors.Is(err, ratelimit.ErrKeyTooLong):
		status, detail = http.StatusBadRequest, "the request's rate-limit key is too long"
	case errors.Is(err, ratelimit.ErrTooManyStates):
		status, detail = http.StatusTooManyRequests, "the request's rate-limit key holds the most limits it may"
	case errors.Is(err, ratelimit.ErrStateMismatch):
		status, detail = http.StatusInternalServerError, "the rate limiter is misconfigured: a key's stored state is not its own"
	}
	m.log(r, status, err)
	writeProblem(w, status, http.StatusText(status), detail)
}

// log logs err, answered with status, as WithLogger says.
func (c *config) log(r *http.Request, status int, err error) {
	level := slog.LevelWarn
	if status < 500 || r.Context().Err() != nil {
		level = slog.LevelDebug
	}
	l := c.logger
	if l == nil {
		l = slog.Default()
	}
	ctx := r.Context()
	if !l.Enabled(ctx, level) {
		return
	}
	l.LogAttrs(ctx, level, "httplimit: request not limited",
		slog.Int("status", status), slog.String("error", err.Error()),
		slog.String("method", r.Method), slog.String("path", r.URL.Path))
}
