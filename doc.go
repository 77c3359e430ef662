// Package ratelimit limits how often something may happen per key, in one
// process or shared by many through Redis.
//
// A [Limiter] decides with an algorithm (tokenbucket, gcra, slidinglog,
// slidingwindow, fixedwindow) on state in a store (store/memorystore, Redis),
// under one limit or several charged all or none ([NewPolicy]).
//
//	alg, err := tokenbucket.PerSecond(2, tokenbucket.Burst(5))
//	lim, err := ratelimit.New(alg, memorystore.New[string]())
//	d, err := lim.Allow(ctx, "alice") // d.Allowed(), d.RetryAfter()
//
// examples/quickstart has it in full; docs/design/limiter.md the reasons.
package ratelimit
