package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/clock"
)

func TestLocalNeverGoesBackwards(t *testing.T) {
	c := clock.Local()
	prev := c.Now()
	for i := range 100000 {
		now := c.Now()
		if now.Before(prev) {
			t.Fatalf("call %d: Now() = %v, before the previous %v", i, now, prev)
		}
		prev = now
	}
}

func TestLocalNeverGoesBackwardsConcurrently(t *testing.T) {
	c := clock.Local()
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := c.Now()
			for range 20000 {
				now := c.Now()
				if now.Before(prev) {
					errs <- now.String() + " before " + prev.String()
					return
				}
				prev = now
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error("Now() went backwards:", e)
	}
}

func TestLocalIsCloseToTimeNow(t *testing.T) {
	c := clock.Local()
	for range 10 {
		before := time.Now()
		got := c.Now()
		after := time.Now()
		// The local clock is anchored to the wall clock once, then runs on
		// the monotonic clock; the two agree unless the system clock was
		// stepped during the test.
		if got.Before(before.Add(-5*time.Millisecond)) || got.After(after.Add(5*time.Millisecond)) {
			t.Fatalf("Local().Now() = %v, want within 5ms of [%v, %v]", got, before, after)
		}
	}
}

func TestLocalNowHasNoMonotonicReading(t *testing.T) {
	now := clock.Local().Now()
	if got, want := now.String(), now.Round(0).String(); got != want {
		t.Errorf("Local().Now() = %q, want a plain instant %q", got, want)
	}
}

func TestLocalTimer(t *testing.T) {
	c := clock.Local()
	start := time.Now()
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	if elapsed := time.Since(start); elapsed < time.Millisecond {
		t.Errorf("timer fired after %v, want at least 1ms", elapsed)
	}
	if tm.Stop() {
		t.Error("Stop() after firing = true, want false")
	}
	tm = c.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Error("Stop() before firing = false, want true")
	}
}

func TestIsServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    clock.Clock
		want bool
	}{
		{"Server", clock.Server(), true},
		{"Local", clock.Local(), false},
		{"Fake", clock.NewFake(time.Unix(0, 0)), false},
		{"nil", nil, false},
	} {
		if got := clock.IsServer(tc.c); got != tc.want {
			t.Errorf("IsServer(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestServerTellsLocalTime(t *testing.T) {
	before := clock.Local().Now()
	got := clock.Server().Now()
	after := clock.Local().Now()
	if got.Before(before) || got.After(after) {
		t.Errorf("Server().Now() = %v, want within [%v, %v]", got, before, after)
	}
	if !clock.Server().NewTimer(time.Hour).Stop() {
		t.Error("Server() timer: Stop() before firing = false, want true")
	}
}

// TestLocalUnixMicro checks that the fast read agrees with Now.
func TestLocalUnixMicro(t *testing.T) {
	c := clock.Local().(clock.Micros)
	for range 10000 {
		before := c.Now().UnixMicro()
		got := c.UnixMicro()
		after := c.Now().UnixMicro()
		if got < before || got > after {
			t.Fatalf("UnixMicro() = %d, outside [%d, %d] read by Now around it", got, before, after)
		}
	}
}
