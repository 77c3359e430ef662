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
