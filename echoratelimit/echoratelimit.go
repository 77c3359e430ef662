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
// httplimit.Decisions(c.Request().Context()).
package echoratelimit

import (
	"github.com/labstack/echo/v4"

	"github.com/go-ratelimit/ratelimit/httplimit"
)

// Middleware returns echo middleware limiting requests with m. A request
// m admits goes on to next with m's decisions in the context of
// c.Request(); any other has been answered on c.Response() (so echo's
// HTTPErrorHandler does not see it), and next is not called.
func Middleware[K comparable](m *httplimit.Middleware[K]) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r, ok := m.Admit(c.Response(), c.Request())
			if !ok {
				return nil
			}
			c.SetRequest(r)
			return next(c)
		}
	}
}
