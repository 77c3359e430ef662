package clock

import (
	"context"
	"sync"
	"time"
)

// Fake is a clock that moves only when told to, for deterministic tests.
// Its timers fire when Set or Advance moves the time to or past their
// deadline. The zero value is not usable; create one with [NewFake].
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed *sync.Cond
}

var _ Clock = (*Fake)(nil)

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake {
	f := &Fake{now: start}
	f.changed = sync.NewCond(&f.mu)
	return f
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the time forward by d (backward if d < 0) and fires the
// timers that are due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(f.now.Add(d))
}

// Set moves the time to t, which may be earlier than now (to test a clock
// that steps back), and fires the timers that are due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(t)
}

func (f *Fake) setLocked(t time.Time) {
	f.now = t
	kept := f.timers[:0]
	for _, tm := range f.timers {
		if !tm.deadline.After(t) {
			tm.c <- t // buffered, capacity 1, sent once
			continue
		}
		kept = append(kept, tm)
	}
	clear(f.timers[len(kept):])
	f.timers = kept
	f.changed.Broadcast()
}

// NewTimer returns a timer that fires when the fake time reaches now+d.
// A timer with d ≤ 0 fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	tm := &fakeTimer{f: f, deadline: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		tm.c <- f.now
		return tm
	}
	f.timers = append(f.timers, tm)
	f.changed.Broadcast()
	return tm
}

// Timers returns how many timers are waiting to fire.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// BlockUntilTimers blocks until at least n timers are waiting, so a test
// can advance the time only once the code under test sleeps on the clock.
// It never returns if no timer comes, as when the code under test has
// already finished; [Fake.BlockUntilTimersContext] can give up.
func (f *Fake) BlockUntilTimers(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.timers) < n {
		f.changed.Wait()
	}
}

// BlockUntilTimersContext blocks until at least n timers are waiting, like
// BlockUntilTimers, or until ctx ends first, and then returns ctx's error.
// It returns nil whenever n timers are waiting, even if ctx has ended.
//
// To drive code that sleeps on the clock until it returns (a
// Limiter's Wait, say), cancel a context when that code returns and
// advance the time for as long as it sleeps:
//
//	ctx, cancel := context.WithCancel(context.Background())
//	go func() {
//		defer cancel()
//		lim.Wait(context.Background(), key)
//	}()
//	for fake.BlockUntilTimersContext(ctx, 1) == nil {
//		fake.Advance(step)
//	}
//
// The loop ends once the waiter has returned, however many timers it slept
// on, and never advances while the waiter is between two timers.
func (f *Fake) BlockUntilTimersContext(ctx context.Context, n int) error {
	// Wake the waiter below when ctx ends. Taking the lock orders the
	// broadcast after the waiter's check of ctx, so no wake-up is lost.
	stop := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.changed.Broadcast()
	})
	defer stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.timers) < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		f.changed.Wait()
	}
	return nil
}

type fakeTimer struct {
	f        *Fake
	deadline time.Time
	c        chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, tm := range t.f.timers {
		if tm == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			t.f.changed.Broadcast()
			return true
		}
	}
	return false
}
