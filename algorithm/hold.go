package algorithm

import "time"

// Holder is an algorithm whose admissions are holds, as an in-flight
// limit's (package concurrency) are: each counts from its admission until
// it is given back through its booking (a Reservation's Release or
// Refund) or until its lease ends, rather than leaving on a schedule of
// the algorithm's own. Since a hold may be released at any moment, a
// denial's RetryAfter (the end of the oldest leases) is only an upper
// bound on the wait, and booking at it would keep a waiter waiting past
// slots released early: package ratelimit waits for a Holder's slot in
// turn, woken by releases, and never books it ahead. A Reservation's
// Release gives back the limits that are Holders and leaves the others
// charged. Stores and package ratelimit find it by type assertion.
type Holder interface {
	Undoer
	// Lease returns how long a hold counts when it is not given back.
	Lease() time.Duration
}

// Holds reports whether alg is a [Holder].
func Holds(alg Algorithm) bool {
	_, ok := alg.(Holder)
	return ok
}
