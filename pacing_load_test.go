package ratelimit_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// admittedAt is the context key of the slot where an admissionStore
// writes the instant its caller's request was admitted at.
type admittedAt struct{}

// admissionStore wraps a store: each booking it admits writes the instant
// it is due (Unix µs, on the Limiter's clock) to the slot its caller's
// context carries under admittedAt.
type admissionStore struct{ next store.Store[string] }

func (s admissionStore) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.next.Open(limits, clk)
	if err != nil {
		return nil, err
	}
	return admissionTable{t, t.(store.Booker[string])}, nil
}

type admissionTable struct {
	store.Table[string]
	store.Booker[string]
}

func (t admissionTable) Book(ctx context.Context, key string, now, cost, maxDelay int64, out []algorithm.Result) (algorithm.Result, store.Booking, bool, error) {
	r, b, ok, err := t.Booker.Book(ctx, key, now, cost, maxDelay, out)
	if slot, _ := ctx.Value(admittedAt{}).(*int64); ok && err == nil && slot != nil {
		*slot = now + r.RetryAfter
	}
	return r, b, ok, err
}

// TestPacingUnderLoad measures, on the real clock, in a process whose
// processors are all kept busy by spinning goroutines, the instants 8
// workers call a partner paced by gcra at 50 per 1.02 s (one every
// 20.4 ms: the README's recipe with 20 ms of margin), against the
// instants the limiter admitted them at. Whatever the load, the admissions
// are one interval apart, so that a second at the calls holds at most
// ⌈(1 s + J) / 20.4 ms⌉ calls, J the longest any call came after its
// admission; so at most 50 while J is within the margin. That is checked,
// when Wait books ahead (the default: J is how late a worker wakes) and
// when it books nothing ahead (WithMaxBookAhead(0): J is only the time
// from the decision to the call). What J was, and the most calls in a
// second, are logged: timing is the machine's, the bound is the test's.
func TestPacingUnderLoad(t *testing.T) {
	const (
		workers = 8
		span    = 2 * time.Second
		period  = time.Second + 20*time.Millisecond
		margin  = period - time.Second
	)
	every := period / 50
	spin := make(chan struct{})
	var spinning sync.WaitGroup
	for range 2 * runtime.GOMAXPROCS(0) {
		spinning.Add(1)
		go func() {
			defer spinning.Done()
			for {
				select {
				case <-spin:
					return
				default:
				}
			}
		}()
	}
	defer func() { close(spin); spinning.Wait() }()
	local := clock.AsMicros(clock.Local())
	for _, c := range []struct {
		name string
		opts []ratelimit.Option
	}{
		{"booked ahead", nil},
		{"WithMaxBookAhead(0)", []ratelimit.Option{ratelimit.WithMaxBookAhead(0)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			alg, err := gcra.Per(50, period, gcra.Burst(1))
			if err != nil {
				t.Fatal(err)
			}
			lim, err := ratelimit.New(alg, admissionStore{memorystore.New[string]()},
				append([]ratelimit.Option{ratelimit.WithName("partner-api"), ratelimit.WithClock(clock.Local())}, c.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu     sync.Mutex
				sends  []time.Duration // Unix µs
				latest time.Duration   // J: the longest from an admission to its call
				wg     sync.WaitGroup
			)
			end := local.UnixMicro() + span.Microseconds()
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for local.UnixMicro() < end {
						var admitted int64
						if _, err := lim.Wait(context.WithValue(context.Background(), admittedAt{}, &admitted), "partner-api"); err != nil {
							t.Error(err)
							return
						}
						sent := local.UnixMicro() // the call to the partner
						mu.Lock()
						sends = append(sends, time.Duration(sent)*time.Microsecond)
						latest = max(latest, time.Duration(sent-admitted)*time.Microsecond)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			slices.Sort(sends)
			got := mostInAnyWindow(sends, time.Second)
			bound := int((time.Second + latest + every - 1) / every)
			t.Logf("%d calls in %v; at most %d in a second; calls up to %v after their admissions (bound %d)", len(sends), span, got, latest, bound)
			if got > bound {
				t.Errorf("%d calls in a second, each at most %v after its admission: want at most %d, one admission per %v", got, latest, bound, every)
			}
			if latest <= margin && got > 50 {
				t.Errorf("%d calls in a second, each at most %v after its admission (the margin is %v): want at most 50", got, latest, margin)
			}
		})
	}
}
