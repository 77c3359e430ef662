//go:build go1.25

package clock_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-ratelimit/ratelimit/clock"
)

// TestLocalUnderSynctest: inside a testing/synctest bubble, whose time
// starts before the local clock was made, the clock's microseconds are
// still its Now's, floored, as clock.Micros requires.
func TestLocalUnderSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.AsMicros(clock.Local())
		for range 5 {
			if got, want := c.UnixMicro(), c.Now().UnixMicro(); got != want {
				t.Fatalf("UnixMicro() = %d, Now().UnixMicro() = %d", got, want)
			}
			time.Sleep(1500 * time.Nanosecond)
		}
	})
}
