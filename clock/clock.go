// Package clock provides the clocks a Limiter reads: the local clock, a
// fake clock for deterministic tests, and the server clock of a remote store.
//
// A Limiter reads its clock once per decision and passes that instant to
// the store; nothing else in the library reads the time. Instants are
// handled in whole microseconds.
package clock

import (
	"time"
)

// Clock tells the time and makes timers. Implementations must be safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once d has passed on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer fires once, like time.Timer.
type Timer interface {
	// C returns the channel the timer sends the time on when it fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it did so.
	Stop() bool
}

// Local returns the clock of this process. It never goes backwards: it is
// the wall-clock time when the program started, advanced by the monotonic
// clock, so a step of the system clock (NTP, an operator) does not move it.
func Local() Clock { return local }

// Micros is implemented by clocks that can tell the time as Unix
// microseconds without building a time.Time, which the Limiter prefers:
// it reads its clock once per decision, and on the local clock this halves
// the cost of the read. UnixMicro must equal Now().UnixMicro().
type Micros interface {
	Clock
	UnixMicro() int64
}

// AsMicros returns c as a Micros: c itself when it is one, else c behind
// an adapter whose UnixMicro is c.Now().UnixMicro().
func AsMicros(c Clock) Micros {
	if m, ok := c.(Micros); ok {
		return m
	}
	return microsOf{c}
}

type microsOf struct{ Clock }

func (c microsOf) UnixMicro() int64 { return c.Now().UnixMicro() }

var local = newLocalClock()

type localClock struct {
	mono  time.Time // carries the monotonic reading time.Since uses
	wall  time.Time // mono without its monotonic reading
	nanos int64     // mono in Unix nanoseconds
}

func newLocalClock() *localClock {
	mono := time.Now()
	return &localClock{mono: mono, wall: mono.Round(0), nanos: mono.UnixNano()}
}

func (c *localClock) Now() time.Time { return c.wall.Add(time.Since(c.mono)) }

// UnixMicro is Now().UnixMicro() without building a time.Time: floored,
// also when time.Since is negative (under testing/synctest, whose bubble's
// time starts in 2000, before mono), so that an instant read from it is
// never later than Now and a Wait booked from it wakes at its instant.
func (c *localClock) UnixMicro() int64 {
	n := c.nanos + int64(time.Since(c.mono))
	q := n / 1000
	if n%1000 < 0 {
		q--
	}
	return q
}

func (c *localClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// Server returns the clock of the store: a store that supports it reads
// the time itself when it decides (the Redis stores read TIME inside the
// script), so that servers with skewed clocks share limits correctly.
// Stores that cannot read a clock of their own reject it when a Limiter is
// built. Its Now and timers are the local clock's; they serve only Wait.
func Server() Clock { return server }

var server = serverClock{}

type serverClock struct{}

func (serverClock) Now() time.Time                 { return local.Now() }
func (serverClock) UnixMicro() int64               { return local.UnixMicro() }
func (serverClock) NewTimer(d time.Duration) Timer { return local.NewTimer(d) }
func (serverClock) String() string                 { return "clock.Server()" }

// IsServer reports whether c is the clock returned by [Server].
func IsServer(c Clock) bool {
	_, ok := c.(serverClock)
	return ok
}
