// Package clock provides the clocks a Limiter reads: the local clock, a
// fake clock for deterministic tests, and the server clock of a remote store.
//
// A Limiter reads its clock once per decision and passes that instant to
// the store; nothing else in the library reads the time. Instants are
// handled in whole microseconds.
package clock

import (
	"sync"
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
// the wall-clock time at the first call, advanced by the monotonic clock,
// so a step of the system clock (NTP, an operator) does not move it.
func Local() Clock { return local }

var local = &localClock{}

type localClock struct {
	once  sync.Once
	start time.Time
}

func (c *localClock) Now() time.Time {
	c.once.Do(func() { c.start = time.Now() })
	// Round(0) strips the monotonic reading so the result is a plain
	// instant; the addition itself used it.
	return c.start.Add(time.Since(c.start)).Round(0)
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
func (serverClock) NewTimer(d time.Duration) Timer { return local.NewTimer(d) }
func (serverClock) String() string                 { return "clock.Server()" }

// IsServer reports whether c is the clock returned by [Server].
func IsServer(c Clock) bool {
	_, ok := c.(serverClock)
	return ok
}
