package ratelimit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
)

// TestCoalescedSettles settles 64 reservations of one key at once, first
// up from 1 to 3, then down to 1, through both clients with coalescing
// on (a batch of settle scripts, luascript.OpBatch), at one instant of a
// fake clock, where every algorithm settles exactly: each settle counts
// once, whatever batch it ran in. Through go-redis each script call lags
// a millisecond, so that the settles queue behind it and go in batches.
func TestCoalescedSettles(t *testing.T) {
	const goroutines = 64
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		limit := onMiniredis(target, 2000)
		for _, client := range clients(target) {
			for _, a := range unrefilled(limit) {
				t.Run(client+"/"+a.name, func(t *testing.T) {
					var st store.Store[string]
					var calls *scriptCounter
					var err error
					if client == "goredis" {
						rc := redistest.GoRedis(t, target)
						calls = &scriptCounter{lag: coalesceLag}
						rc.AddHook(calls)
						st, err = goredisstore.New[string](rc, goredisstore.WithPrefix[string](redistest.Prefix(t)))
					} else {
						st, err = rueidisstore.New[string](redistest.Rueidis(t, target), rueidisstore.WithPrefix[string](redistest.Prefix(t)))
					}
					if err != nil {
						t.Fatal(err)
					}
					alg, err := a.new()
					if err != nil {
						t.Fatal(err)
					}
					lim, err := ratelimit.New(alg, st, ratelimit.WithName("settles"), ratelimit.WithClock(clock.NewFake(time.UnixMicro(1_700_000_000_000_000))))
					if err != nil {
						t.Fatal(err)
					}
					rs := make([]*ratelimit.Reservation[string], goroutines)
					for i := range rs {
						if rs[i], err = lim.ReserveN(t.Context(), "hot", 1, 0); err != nil || !rs[i].OK() {
							t.Fatalf("ReserveN: %v, %v", rs[i], err)
						}
					}
					for _, c := range []struct{ n, used int64 }{{3, 3 * goroutines}, {1, goroutines}} {
						before := int64(0)
						if calls != nil {
							before = calls.n.Load()
						}
						var wg sync.WaitGroup
						for _, r := range rs {
							wg.Add(1)
							go func() {
								defer wg.Done()
								if err := r.Settle(t.Context(), int(c.n)); err != nil {
									t.Error(err)
								}
							}()
						}
						wg.Wait()
						if calls != nil {
							if n := calls.n.Load() - before; n*2 > goroutines {
								t.Errorf("%d script calls for %d settles: coalescing did not happen", n, goroutines)
							}
						}
						d, err := lim.Peek(t.Context(), "hot")
						if err != nil {
							t.Fatal(err)
						}
						if got, want := d.Remaining(), limit-c.used; got != want {
							t.Errorf("%d reservations settled to %d at once: %d left, want %d", goroutines, c.n, got, want)
						}
					}
				})
			}
		}
	})
}
