package ratelimit

// The defaults of a Breaker's zero fields, for the tests of package
// ratelimit_test.
const (
	DefaultBreakerFailures = defaultBreakerFailures
	DefaultProbeInterval   = defaultProbeInterval
	DefaultSlowCall        = defaultSlowCall
)

// MaxWithLimiters is how many Limiters of With a Limiter keeps.
const MaxWithLimiters = maxWithLimiters

// BreakerIsOpen reports whether l's breaker is open: a call that failed
// records its failure after the store's table returned, which a test's
// fake table cannot signal.
func BreakerIsOpen[K comparable](l *Limiter[K]) bool {
	b := l.wrap.breaker
	return b != nil && b.probeAt.Load() != closed
}
