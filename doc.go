// Package ratelimit limits how often something may happen per key, in one
// process or shared by many through Redis.
//
// A [Limiter] is composed of three parts:
//
//   - an algorithm, which decides: a token bucket refilled continuously or
//     by whole tokens per interval (package tokenbucket), the same
//     continuous bucket kept as one number (package gcra), an exact sliding
//     log (package slidinglog), the sliding-window counter that
//     approximates it in constant memory (package slidingwindow), or a
//     fixed window (package fixedwindow);
//   - a store, which keeps each key's state and applies decisions
//     atomically: in memory (package store/memorystore) or in Redis;
//   - a clock, which tells the time: the local clock, the store's server
//     clock, or a fake clock for deterministic tests (package clock).
//
// Any algorithm runs on any store and gives the same decisions for the same
// instants and costs. The Limiter reads its clock once per decision and
// hands that instant down; no algorithm or store reads the time itself.
//
// A [Policy] decides several limits on one key together (a burst and an
// hourly limit, say, of any algorithms): a request is charged to every
// limit or to none, atomically, in one round trip on Redis.
//
// Limits built apart never share a quota unless asked: a Limiter or Policy
// shares with itself, and with any limit given the same state ID
// (WithStateID, Limit.StateID). Without one, a limit's state ID is a
// fingerprint of its configuration, so building a second limit configured
// alike on the same store value while the first lives fails with
// [ErrStateInUse]. Processes sharing one Redis share such limits, as they
// must.
//
// Limiter methods come in four families: Allow and AllowN decide at once;
// ReserveN books a request at the earliest instant it fits and charges it
// now (a [Reservation], which Cancel gives back), and Wait and WaitN book
// and sleep until that instant, so that waiters are admitted in the order
// they booked with one store call each; Refund gives back what was
// charged; Peek reports a key's state without consuming, and Reset
// forgets it.
//
// WithObserver reports every decision to an [Observer] (package
// otelratelimit, a module of its own, turns them into OpenTelemetry
// metrics), and WithDryRun makes the limiter admit what it would deny,
// marking such decisions DryRunDenied, so that a new limit can be watched
// before it is enforced.
//
// Options shape what happens around a remote store: WithFailurePolicy
// decides while it fails, WithBreaker stops asking it for a while once it
// keeps failing, and WithDenialCache answers requests on keys it denied,
// until their denial ends, without asking it again.
package ratelimit
