// Package echoratelimit limits the requests of an echo server with an
// httplimit.Middleware. It is a module of its own, so that the library's
// users who do not use echo never have it in their module graph.
//
// The middleware is built with httplimit (New, NewPolicy or NewResolver,
// and its options) and decides exactly as it does for net/http, through
// httplimit's Middleware.Admit: the same RateLimit headers, the same 429
// with Retry-After and problem body, the same answers to a key function's
// httplimit.Reject and to store failures.
//
//	m := httplimit.New(lim, ip.Key, httplimit.WithLegacyHeaders())
//	e := echo.New()
//	e.Use(echoratelimit.Middleware(m))
//
// A handler finds the decisions in its request's context:
// httplimit.Decisions(c.Request().Context()). With WithHTTPErrors, echo's
// HTTPErrorHandler answers the requests the middleware does not admit.
package echoratelimit

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/go-ratelimit/ratelimit/httplimit"
)

// Option configures Middleware.
type Option func(*config)

type config struct {
	httpErrors bool // WithHTTPErrors
}

// WithHTTPErrors makes Middleware return each answer m makes instead of
// admitting a request (a 429, a Reject, a store failure) as an
// *echo.HTTPError for echo's HTTPErrorHandler to answer: its Code is m's
// status, its Message the detail of m's problem body (for a 429: rate
// limit "second" exceeded; retry in 1 s). The RateLimit headers and
// Retry-After are set on c.Response() first; m's body and Content-Type
// are not written.
func WithHTTPErrors() Option {
	return func(c *config) { c.httpErrors = true }
}

// Middleware returns echo middleware limiting requests with m. A request
// m admits goes on to next with m's decisions in the context of
// c.Request(), holding its slots of m's in-flight limits until next
// returns or panics; any other has been answered on c.Response() (so echo's
// HTTPErrorHandler does not see it, unless WithHTTPErrors is given), and
// next is not called.
func Middleware[K comparable](m *httplimit.Middleware[K], opts ...Option) echo.MiddlewareFunc {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if cfg.httpErrors {
				return admitOrError(m, c, next)
			}
			r, ok := m.Admit(c.Response(), c.Request())
			if !ok {
				return nil
			}
			defer m.Release(r)
			c.SetRequest(r)
			return next(c)
		}
	}
}

// admitOrError is Middleware's handler under WithHTTPErrors: m answers
// into a held response, whose headers but its body's are copied to
// c.Response() when m does not admit the request.
func admitOrError[K comparable](m *httplimit.Middleware[K], c echo.Context, next echo.HandlerFunc) error {
	held := &heldResponse{header: http.Header{}}
	r, ok := m.Admit(held, c.Request())
	h := c.Response().Header()
	for k, vs := range held.header {
		if ok || k != "Content-Type" && k != "Content-Length" {
			h[k] = vs
		}
	}
	if ok {
		defer m.Release(r)
		c.SetRequest(r)
		return next(c)
	}
	status := held.status
	if status == 0 {
		status = http.StatusOK
	}
	var problem struct {
		Detail string `json:"detail"`
	}
	msg := http.StatusText(status)
	if json.Unmarshal(held.body.Bytes(), &problem) == nil && problem.Detail != "" {
		msg = problem.Detail
	}
	return echo.NewHTTPError(status, msg)
}

// heldResponse is a ResponseWriter that keeps what it is given.
type heldResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *heldResponse) Header() http.Header { return w.header }

func (w *heldResponse) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *heldResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}
