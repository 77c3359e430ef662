//go:build go1.25

package ratelimit_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestMaxBookAheadDefault: by default a key is booked at most one reset
// period ahead, so 109 Reserves of a 1-per-30-days key book two and leave
// it fresh after 60 days, not locked for 9 years; bookings refused charge
// nothing. WithMaxBookAhead(-1) books them all, as x/time/rate does.
func TestMaxBookAheadDefault(t *testing.T) {
	const month = 30 * 24 * time.Hour
	alg, err := tokenbucket.Per(1, month)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		opts   []ratelimit.Option
		booked int
	}{
		{"default", nil, 2},
		{"explicit 3 months", []ratelimit.Option{ratelimit.WithMaxBookAhead(3 * month)}, 4},
		{"unbounded", []ratelimit.Option{ratelimit.WithMaxBookAhead(-1)}, 109},
		{"none ahead", []ratelimit.Option{ratelimit.WithMaxBookAhead(0)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			lim, err := ratelimit.New(alg, memorystore.New[string](), append(tc.opts, ratelimit.WithClock(fake))...)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			booked := 0
			for i := range 109 {
				r, err := lim.Reserve(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				if r.OK() {
					booked++
					if want := time.Duration(i) * month; r.Delay() != want {
						t.Fatalf("booking %d due in %v, want %v", i, r.Delay(), want)
					}
				} else if r.Decision().RetryAfter() != time.Duration(booked)*month {
					t.Fatalf("refused booking %d: retry after %v, want %v (a refusal must charge nothing)", i, r.Decision().RetryAfter(), time.Duration(booked)*month)
				}
			}
			if booked != tc.booked {
				t.Fatalf("booked %d of 109, want %d", booked, tc.booked)
			}
			fake.Advance(time.Duration(booked) * month)
			if d, err := lim.Allow(ctx, "k"); err != nil || !d.Allowed() {
				t.Fatalf("after the %d bookings' %v: %+v, %v; want admitted", booked, time.Duration(booked)*month, d, err)
			}
		})
	}
}

// TestMaxBookAheadPolicy: a Policy's default bound is its longest limit's
// reset period; a booking needing the daily quota's next day fits, one a
// day later does not. A limit faster than a minute books a minute ahead.
func TestMaxBookAheadPolicy(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	perSecond, err := gcra.PerSecond(10)
	if err != nil {
		t.Fatal(err)
	}
	daily, err := fixedwindow.Per(3, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
		{Name: "burst", Algorithm: perSecond}, {Name: "day", Algorithm: daily},
	}, ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var delays []time.Duration
	for range 8 {
		r, err := p.Reserve(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			break
		}
		delays = append(delays, r.Delay())
	}
	want := []time.Duration{0, 0, 0, 24 * time.Hour, 24 * time.Hour, 24 * time.Hour}
	if !slices.Equal(delays, want) {
		t.Fatalf("booked delays %v, want %v", delays, want)
	}

	lim, err := ratelimit.New(perSecond, memorystore.New[string](), ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	booked := 0
	for range 1000 {
		if r, err := lim.Reserve(ctx, "k"); err != nil || !r.OK() {
			break
		}
		booked++
	}
	if want := 10 + 60*10; booked != want { // a burst of 10, then a minute of 10 a second
		t.Fatalf("booked %d at 10 a second, want %d: a minute ahead", booked, want)
	}
}

// TestMaxBookAheadWait: a Wait without a deadline whose booking would be
// due beyond the bound (1s here) waits until it fits and is then admitted
// at the instant an unbounded booking would have been.
func TestMaxBookAheadWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		alg, err := tokenbucket.PerSecond(2) // bursts of 2
		if err != nil {
			t.Fatal(err)
		}
		lim, err := ratelimit.New(alg, memorystore.New[string](), ratelimit.WithMaxBookAhead(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		var wg sync.WaitGroup
		for range 7 {
			wg.Go(func() {
				if _, err := lim.Wait(t.Context(), "k"); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				at = append(at, time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(at)
		want := []time.Duration{0, 0, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second, 2500 * time.Millisecond}
		if !slices.Equal(at, want) {
			t.Fatalf("admitted at %v, want %v", at, want)
		}
	})
}
