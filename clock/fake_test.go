package clock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/clock"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fired reports whether tm has fired, and what time it sent, without
// blocking.
func fired(tm clock.Timer) (time.Time, bool) {
	select {
	case at := <-tm.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestFakeNowSetAdvance(t *testing.T) {
	f := clock.NewFake(t0)
	if got := f.Now(); !got.Equal(t0) {
		t.Fatalf("Now() = %v, want %v", got, t0)
	}
	f.Advance(1500 * time.Millisecond)
	if got, want := f.Now(), t0.Add(1500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after Advance(1.5s): Now() = %v, want %v", got, want)
	}
	f.Advance(-time.Second)
	if got, want := f.Now(), t0.Add(500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after Advance(-1s): Now() = %v, want %v", got, want)
	}
	t1 := t0.Add(-time.Hour)
	f.Set(t1)
	if got := f.Now(); !got.Equal(t1) {
		t.Fatalf("after Set(%v): Now() = %v", t1, got)
	}
	// The fake clock does not move by itself.
	time.Sleep(time.Millisecond)
	if got := f.Now(); !got.Equal(t1) {
		t.Fatalf("after a real sleep: Now() = %v, want %v", got, t1)
	}
}

func TestFakeTimerFiresExactlyAtDeadline(t *testing.T) {
	f := clock.NewFake(t0)
	tm := f.NewTimer(time.Second)
	if got := f.Timers(); got != 1 {
		t.Fatalf("Timers() = %d, want 1", got)
	}
	f.Advance(time.Second - time.Nanosecond)
	if _, ok := fired(tm); ok {
		t.Fatal("timer fired 1ns before its deadline")
	}
	if got := f.Timers(); got != 1 {
		t.Fatalf("Timers() = %d before the deadline, want 1", got)
	}
	f.Advance(time.Nanosecond)
	at, ok := fired(tm)
	if !ok {
		t.Fatal("timer did not fire at its deadline")
	}
	if want := t0.Add(time.Second); !at.Equal(want) {
		t.Errorf("timer sent %v, want %v", at, want)
	}
	if got := f.Timers(); got != 0 {
		t.Errorf("Timers() = %d after firing, want 0", got)
	}
	// It fires once.
	f.Advance(time.Hour)
	if _, ok := fired(tm); ok {
		t.Error("timer fired a second time")
	}
}

func TestFakeTimerFiresWhenJumpedPast(t *testing.T) {
	f := clock.NewFake(t0)
	short, long := f.NewTimer(time.Second), f.NewTimer(time.Minute)
	f.Set(t0.Add(2 * time.Second))
	if at, ok := fired(short); !ok || !at.Equal(t0.Add(2*time.Second)) {
		t.Errorf("1s timer after Set(t0+2s): fired=%v at %v, want fired at t0+2s", ok, at)
	}
	if _, ok := fired(long); ok {
		t.Error("1m timer fired after Set(t0+2s)")
	}
	if got := f.Timers(); got != 1 {
		t.Errorf("Timers() = %d, want 1", got)
	}
}

func TestFakeTimerNonPositiveFiresAtOnce(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		f := clock.NewFake(t0)
		tm := f.NewTimer(d)
		at, ok := fired(tm)
		if !ok {
			t.Errorf("NewTimer(%v) did not fire at once", d)
			continue
		}
		if !at.Equal(t0) {
			t.Errorf("NewTimer(%v) sent %v, want %v", d, at, t0)
		}
		if got := f.Timers(); got != 0 {
			t.Errorf("NewTimer(%v): Timers() = %d, want 0", d, got)
		}
		if tm.Stop() {
			t.Errorf("NewTimer(%v): Stop() = true after firing, want false", d)
		}
	}
}

func TestFakeTimerStop(t *testing.T) {
	f := clock.NewFake(t0)
	tm := f.NewTimer(time.Second)
	other := f.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop() before firing = false, want true")
	}
	if got := f.Timers(); got != 1 {
		t.Errorf("Timers() after Stop = %d, want 1", got)
	}
	if tm.Stop() {
		t.Error("second Stop() = true, want false")
	}
	f.Advance(time.Hour)
	if _, ok := fired(tm); ok {
		t.Error("stopped timer fired")
	}
	if _, ok := fired(other); !ok {
		t.Error("the other timer did not fire")
	}
	if other.Stop() {
		t.Error("Stop() after firing = true, want false")
	}
}

func TestFakeSetBackwardsFiresNothing(t *testing.T) {
	f := clock.NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.Set(t0.Add(-time.Hour))
	f.Advance(-time.Minute)
	if _, ok := fired(tm); ok {
		t.Fatal("timer fired when the time went backwards")
	}
	if got := f.Timers(); got != 1 {
		t.Fatalf("Timers() = %d, want 1", got)
	}
	// The deadline stays where it was set: t0+1s.
	f.Set(t0.Add(time.Second - time.Nanosecond))
	if _, ok := fired(tm); ok {
		t.Fatal("timer fired before t0+1s")
	}
	f.Set(t0.Add(time.Second))
	if _, ok := fired(tm); !ok {
		t.Fatal("timer did not fire at t0+1s")
	}
}

func TestFakeBlockUntilTimers(t *testing.T) {
	f := clock.NewFake(t0)
	f.BlockUntilTimers(0) // returns at once

	started := make(chan struct{})
	done := make(chan time.Time)
	go func() {
		close(started)
		tm := f.NewTimer(time.Second)
		done <- <-tm.C()
	}()
	<-started
	f.BlockUntilTimers(1)
	select {
	case <-done:
		t.Fatal("timer fired before the time moved")
	default:
	}
	f.Advance(time.Second)
	if at := <-done; !at.Equal(t0.Add(time.Second)) {
		t.Errorf("timer sent %v, want %v", at, t0.Add(time.Second))
	}
}

func TestFakeBlockUntilTimersWaitsForSeveral(t *testing.T) {
	f := clock.NewFake(t0)
	const n = 5
	for i := range n {
		go f.NewTimer(time.Duration(i+1) * time.Second)
	}
	f.BlockUntilTimers(n)
	if got := f.Timers(); got != n {
		t.Fatalf("Timers() = %d, want %d", got, n)
	}
	f.Advance(3 * time.Second)
	if got := f.Timers(); got != 2 {
		t.Errorf("after Advance(3s): Timers() = %d, want 2", got)
	}
}

func TestFakeBlockUntilTimersContext(t *testing.T) {
	f := clock.NewFake(t0)
	ctx := context.Background()
	if err := f.BlockUntilTimersContext(ctx, 0); err != nil {
		t.Fatalf("BlockUntilTimersContext(0) = %v, want nil", err)
	}
	f.NewTimer(time.Second)
	if err := f.BlockUntilTimersContext(ctx, 1); err != nil {
		t.Fatalf("BlockUntilTimersContext(1) with 1 timer = %v, want nil", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.BlockUntilTimersContext(cancelled, 1); err != nil {
		t.Errorf("BlockUntilTimersContext(1) with 1 timer and an ended context = %v, want nil", err)
	}
	if err := f.BlockUntilTimersContext(cancelled, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("BlockUntilTimersContext(2) with 1 timer and an ended context = %v, want context.Canceled", err)
	}
}

// A wait that BlockUntilTimers would never end ends with the context, when
// the context ends while it waits.
func TestFakeBlockUntilTimersContextEnds(t *testing.T) {
	f := clock.NewFake(t0)
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			got := make(chan error, 1)
			go func() { got <- f.BlockUntilTimersContext(ctx, 1) }()
			select {
			case err := <-got:
				if !errors.Is(err, tc.want) {
					t.Errorf("BlockUntilTimersContext = %v, want %v", err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("BlockUntilTimersContext still blocked 10s after its context ended")
			}
		})
	}
}

// The loop BlockUntilTimersContext documents advances a waiter through
// several timers and ends once the waiter has returned.
func TestFakeBlockUntilTimersContextDrivesWaiter(t *testing.T) {
	f := clock.NewFake(t0)
	ctx, cancel := context.WithCancel(context.Background())
	woke := make(chan []time.Time, 1)
	go func() {
		defer cancel()
		var at []time.Time
		for _, d := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
			at = append(at, <-f.NewTimer(d).C())
		}
		woke <- at
	}()
	advances := 0
	for f.BlockUntilTimersContext(ctx, 1) == nil {
		f.Advance(500 * time.Millisecond)
		advances++
		if advances > 100 {
			t.Fatal("still advancing after 100 steps")
		}
	}
	want := []time.Time{t0.Add(time.Second), t0.Add(3 * time.Second), t0.Add(6 * time.Second)}
	got := <-woke
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("timers fired at %v, want %v", got, want)
	}
	if advances != 12 {
		t.Errorf("advanced %d times, want 12 (6s in steps of 0.5s)", advances)
	}
}
