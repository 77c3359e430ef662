package ratelimit_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestBigPolicy runs Policies of many limits on every store: Takes,
// coalesced Takes, a booking, its cancel and a refund. The Redis stores'
// scripts hold a few locals and registers per limit, of which Lua allows
// a function 200 and 250: a script that kept one per limit failed to
// compile on every call past a hundred limits (past 33 for the booking
// scripts). The Redis stores take at most goredisstore.MaxLimits (and
// rueidisstore.MaxLimits, the same): a Policy of that many runs every
// operation, and one more is refused when it is made, with
// store.ErrAlgorithmUnsupported (the memory store takes it).
func TestBigPolicy(t *testing.T) {
	limits := func(n int) []ratelimit.Limit {
		out := make([]ratelimit.Limit, n)
		for i := range out {
			// Limits of 100 and more, each configured apart (alike, two
			// would need state IDs of their own), refilling too slowly to
			// give anything back while the test runs.
			limit := int64(100 + i)
			var alg algorithm.Algorithm
			var err error
			switch i % 6 {
			case 0:
				alg, err = tokenbucket.New(tokenbucket.Config{Capacity: limit, Rate: 1e-3})
			case 1:
				alg, err = tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: limit, Tokens: 1, Interval: time.Hour})
			case 2:
				alg, err = gcra.Per(limit, 24*time.Hour)
			case 3:
				alg, err = fixedwindow.Per(limit, 24*time.Hour)
			case 4:
				alg, err = slidingwindow.Per(limit, 24*time.Hour)
			default:
				alg, err = slidinglog.Per(limit, 24*time.Hour)
			}
			if err != nil {
				t.Fatal(err)
			}
			out[i] = ratelimit.Limit{Name: fmt.Sprint("limit", i), Algorithm: alg}
		}
		return out
	}
	run := func(t *testing.T, st store.Store[string], sizes ...int) {
		for _, n := range sizes {
			p, err := ratelimit.NewPolicy(st, limits(n), ratelimit.WithName(fmt.Sprint("big", n)))
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			key := fmt.Sprint("big", n)
			d, err := p.AllowN(ctx, key, 2)
			if err != nil || !d.Allowed() {
				t.Fatalf("%d limits: AllowN: %+v, %v", n, d, err)
			}
			// Concurrent Takes, which the Redis stores coalesce.
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if d, err := p.AllowN(ctx, key, 1); err != nil || !d.Allowed() {
						t.Errorf("%d limits: concurrent AllowN: %+v, %v", n, d, err)
					}
				}()
			}
			wg.Wait()
			r, err := p.ReserveN(ctx, key, 3, time.Second)
			if err != nil || !r.OK() {
				t.Fatalf("%d limits: ReserveN: %v, %v", n, r, err)
			}
			if err := r.Cancel(ctx); err != nil {
				t.Fatalf("%d limits: Cancel: %v", n, err)
			}
			if _, err := p.Refund(ctx, key, 1); err != nil {
				t.Fatalf("%d limits: Refund: %v", n, err)
			}
			// An admission refunded through its Reservation (the undo
			// script, with as many limits): nothing charged since, so
			// all of it comes back.
			once, err := p.ReserveN(ctx, key, 1, 0)
			if err != nil || !once.OK() {
				t.Fatalf("%d limits: ReserveN(1, 0): %v, %v", n, once, err)
			}
			if _, err := once.Refund(ctx); err != nil {
				t.Fatalf("%d limits: Reservation.Refund: %v", n, err)
			}
			// 2 + 16 taken, 3 booked for now (due at once: its Cancel
			// gives nothing back), 1 refunded, 1 taken and given back.
			pd, err := p.Peek(ctx, key)
			if err != nil {
				t.Fatalf("%d limits: Peek: %v", n, err)
			}
			if pd.Remaining() != 100-20 {
				t.Fatalf("%d limits: %d remaining after 20 units, want %d", n, pd.Remaining(), 100-20)
			}
		}
		_, err := ratelimit.NewPolicy(st, limits(goredisstore.MaxLimits+1), ratelimit.WithName("too-big"))
		if _, memory := st.(*memorystore.Store[string]); memory != (err == nil) || (err != nil && !errors.Is(err, store.ErrAlgorithmUnsupported)) {
			t.Fatalf("%d limits on %T: %v", goredisstore.MaxLimits+1, st, err)
		}
	}
	// 24: the most whose closures are locals; the last, the most a Redis
	// store takes.
	sizes := []int{24, 25, 40, 130, goredisstore.MaxLimits}
	t.Run("memory", func(t *testing.T) { run(t, memorystore.New[string](), sizes...) })
	// A script of 300 limits is 0.8 MB of Lua: miniredis, which compiles
	// every EVAL anew, under the race detector on a loaded machine once
	// took past go-redis's 3 s read timeout to answer its first call. The
	// test is of what the scripts do, not of how fast: a minute each. With
	// a real Redis configured, which runs them all, miniredis stops short
	// of the largest (138 s of the test's 168 under -race, for go-redis).
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		sizes := sizes
		if _, real := redistest.LookupStandalone(); real && target.Mini != nil {
			sizes = sizes[:len(sizes)-1]
		}
		t.Run("goredis", func(t *testing.T) {
			client := redistest.GoRedis(t, target)
			if c, ok := client.(*redis.Client); ok {
				opt := *c.Options()
				opt.ReadTimeout, opt.WriteTimeout = time.Minute, time.Minute
				client = redis.NewClient(&opt)
				t.Cleanup(func() { client.Close() })
			}
			st, err := goredisstore.New[string](client, goredisstore.WithPrefix[string](redistest.Prefix(t)),
				goredisstore.WithTimeout[string](time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			run(t, st, sizes...)
		})
		t.Run("rueidis", func(t *testing.T) {
			st, err := rueidisstore.New[string](redistest.Rueidis(t, target), rueidisstore.WithPrefix[string](redistest.Prefix(t)),
				rueidisstore.WithTimeout[string](time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			run(t, st, sizes...)
		})
	})
}
