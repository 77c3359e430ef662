package ratelimit

// The defaults of a Breaker's zero fields, for the tests of package
// ratelimit_test.
const (
	DefaultBreakerFailures = defaultBreakerFailures
	DefaultProbeInterval   = defaultProbeInterval
	DefaultSlowCall        = defaultSlowCall
)
