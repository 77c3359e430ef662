// Package ginratelimit limits the requests of a gin engine with an
// httplimit.Middleware. It is a module of its own, so that the library's
// users who do not use gin never have it in their module graph.
//
// The middleware is built with httplimit (New, NewPolicy or NewResolver,
// and its options) and decides exactly as it does for net/http, through
// httplimit's Middleware.Admit: the same RateLimit headers, the same 429
// with Retry-After and problem body, the same answers to a key function's
// httplimit.Reject and to store failures.
//
//	m := httplimit.New(lim, ip.Key, httplimit.WithLegacyHeaders())
//	r := gin.New()
//	r.Use(ginratelimit.Middleware(m))
//
// A handler finds the decisions in its request's context:
// httplimit.Decisions(c.Request.Context()).
package ginratelimit

import (
	"github.com/gin-gonic/gin"

	"github.com/go-ratelimit/ratelimit/httplimit"
)

// Middleware returns gin middleware limiting requests with m. A request m
// admits goes on to the next handlers with m's decisions in the context of
// c.Request, holding its slots of m's in-flight limits until they return
// or panic; any other has been answered, and the chain is aborted.
func Middleware[K comparable](m *httplimit.Middleware[K]) gin.HandlerFunc {
	return func(c *gin.Context) {
		r, ok := m.Admit(c.Writer, c.Request)
		if !ok {
			c.Abort()
			return
		}
		defer m.Release(r)
		c.Request = r
		c.Next()
	}
}
