package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// hammer has goroutines ask decide for costs of 1 to 3 until each has
// been denied 20 times in a row, and returns the units admitted and the
// decisions made.
func hammer(t *testing.T, goroutines int, decide func(ctx context.Context, cost int) (bool, error)) (admitted, decisions int64) {
	t.Helper()
	var adm, dec atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, inARow := 0, 0; inARow < 20; i++ {
				cost := 1 + (g+i)%3
				ok, err := decide(t.Context(), cost)
				if err != nil {
					t.Errorf("goroutine %d: %v", g, err)
					return
				}
				dec.Add(1)
				if ok {
					adm.Add(int64(cost))
					inARow = 0
				} else {
					inARow++
				}
			}
		}()
	}
	wg.Wait()
	return adm.Load(), dec.Load()
}

// coalesceLag is how late the coalescing tests' go-redis clients send each
// script: coalescing merges the calls that arrive while one is in flight,
// and without the lag a fast machine answers each call before the next
// arrives (without -race, on a real Redis, 1.3 to 1.9 decisions a call),
// which would fail the check that coalescing happened.
const coalesceLag = time.Millisecond

// TestCoalescedExact: 64 goroutines hammering one key with costs of 1 to
// 3, through a Limiter on either Redis store with coalescing on (the
// default), admit exactly the limit (5,000 units, 1,000 on miniredis:
// onMiniredis; nothing refilling), for every algorithm and for a Policy of
// a bucket and a sliding log (the log charged exactly what was admitted),
// on miniredis, Redis and the cluster, with the local clock and with
// Redis's, with the stores' default calls in flight per key and with one.
// With go-redis the script calls are counted: far fewer than the
// decisions (each sent coalesceLag late), or the test would not have
// tested coalescing.
func TestCoalescedExact(t *testing.T) {
	const goroutines = 64
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		limit := onMiniredis(target, 5000)
		algs := unrefilled(limit)
		for _, client := range clients(target) {
			for _, c := range []struct {
				clk      clock.Clock
				inFlight int
			}{{clock.Local(), redisstore.DefaultInFlight}, {clock.Server(), redisstore.DefaultInFlight}, {clock.Local(), 1}} {
				clk := c.clk
				newStore := func(t *testing.T) (store.Store[string], *scriptCounter) {
					switch client {
					case "goredis":
						rc := redistest.GoRedis(t, target)
						calls := &scriptCounter{lag: coalesceLag}
						rc.AddHook(calls)
						st, err := goredisstore.New[string](rc, goredisstore.WithPrefix[string](redistest.Prefix(t)), goredisstore.WithCoalescing[string](c.inFlight),
							goredisstore.WithTimeout[string](time.Minute)) // exactness, not latency: a batch under -race may take seconds
						if err != nil {
							t.Fatal(err)
						}
						return st, calls
					default:
						st, err := rueidisstore.New[string](redistest.Rueidis(t, target), rueidisstore.WithPrefix[string](redistest.Prefix(t)), rueidisstore.WithCoalescing[string](c.inFlight),
							rueidisstore.WithTimeout[string](time.Minute))
						if err != nil {
							t.Fatal(err)
						}
						return st, nil
					}
				}
				check := func(t *testing.T, calls *scriptCounter, admitted, decisions int64) {
					t.Helper()
					if admitted != limit {
						t.Errorf("admitted %d units, want exactly %d", admitted, limit)
					}
					if calls != nil {
						n := calls.n.Load()
						t.Logf("%d decisions in %d script calls", decisions, n)
						if n*2 > decisions {
							t.Errorf("%d script calls for %d decisions: coalescing did not happen", n, decisions)
						}
					}
				}
				name := fmt.Sprintf("%s/%s/inflight=%d", client, map[bool]string{true: "server", false: "local"}[clock.IsServer(clk)], c.inFlight)
				for _, a := range algs {
					t.Run(name+"/"+a.name, func(t *testing.T) {
						alg, err := a.new()
						if err != nil {
							t.Fatal(err)
						}
						st, calls := newStore(t)
						lim, err := ratelimit.New(alg, st, ratelimit.WithName("coalesce"), ratelimit.WithClock(clk))
						if err != nil {
							t.Fatal(err)
						}
						admitted, decisions := hammer(t, goroutines, func(ctx context.Context, cost int) (bool, error) {
							d, err := lim.AllowN(ctx, "hot", cost)
							return d.Allowed(), err
						})
						check(t, calls, admitted, decisions)
					})
				}
				t.Run(name+"/policy", func(t *testing.T) {
					bucket, err := algs[0].new()
					if err != nil {
						t.Fatal(err)
					}
					log, err := slidinglog.Per(2*limit, time.Hour)
					if err != nil {
						t.Fatal(err)
					}
					st, calls := newStore(t)
					p, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Name: "bucket", Algorithm: bucket}, {Name: "log", Algorithm: log}}, ratelimit.WithName("coalesce"), ratelimit.WithClock(clk))
					if err != nil {
						t.Fatal(err)
					}
					admitted, decisions := hammer(t, goroutines, func(ctx context.Context, cost int) (bool, error) {
						d, err := p.AllowN(ctx, "hot", cost)
						return d.Allowed(), err
					})
					check(t, calls, admitted, decisions)
					// Peeked with the local clock: miniredis refuses TIME in
					// a read-only script.
					local, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Name: "bucket", Algorithm: bucket}, {Name: "log", Algorithm: log}}, ratelimit.WithName("coalesce"))
					if err != nil {
						t.Fatal(err)
					}
					d, err := local.Peek(t.Context(), "hot")
					if err != nil {
						t.Fatal(err)
					}
					if got := d.Limits()[1].Remaining(); got != 2*limit-admitted {
						t.Errorf("the log holds %d, want %d: charged other than what was admitted", 2*limit-got, admitted)
					}
				})
			}
		}
	})
}

// namedAlgorithm makes an algorithm a test names.
type namedAlgorithm struct {
	name string
	new  func() (algorithm.Algorithm, error)
}

// onMiniredis returns limit, or a fifth of it on miniredis. The sliding
// log's script reads and rewrites the key's whole log, and miniredis runs
// it in gopher-lua: a log of 5,000 took 77 to 99 s a subtest under -race
// on a loaded machine (of the package's 10-minute timeout, which it
// exceeded), where a fifth does the same test in a twenty-fifth of the
// time. The real servers run the whole limit.
func onMiniredis(target redistest.Target, limit int64) int64 {
	if target.Mini != nil {
		return limit / 5
	}
	return limit
}

// clients returns the Redis clients whose stores the coalescing tests run
// on target: both, but on miniredis go-redis's alone while a real Redis is
// configured, which runs both (the coalescing is the stores' shared
// redistable's; miniredis under -race took 70 s of the 188 s of
// TestCoalescedExact for rueidis).
func clients(target redistest.Target) []string {
	if _, real := redistest.LookupStandalone(); real && target.Mini != nil {
		return []string{"goredis"}
	}
	return []string{"goredis", "rueidis"}
}

// unrefilled are the algorithms of limit units that nothing refills or
// expires during a test: windows of 2^47 µs, about 4.5 years (they end
// next in December 2027).
func unrefilled(limit int64) []namedAlgorithm {
	slow := time.Duration(1<<47) * time.Microsecond
	return []namedAlgorithm{
		{"tokenbucket", func() (algorithm.Algorithm, error) {
			return tokenbucket.New(tokenbucket.Config{Capacity: limit, Rate: 1e-4})
		}},
		{"tokenbucket-interval", func() (algorithm.Algorithm, error) {
			return tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: limit, Tokens: limit, Interval: 1000 * time.Hour})
		}},
		{"gcra", func() (algorithm.Algorithm, error) { return gcra.Per(limit, slow) }},
		{"fixedwindow", func() (algorithm.Algorithm, error) { return fixedwindow.Per(limit, slow) }},
		{"slidingwindow", func() (algorithm.Algorithm, error) { return slidingwindow.Per(limit, slow) }},
		{"slidinglog", func() (algorithm.Algorithm, error) { return slidinglog.Per(limit, time.Hour) }},
	}
}

// bookingLimiter is what TestCoalescedBookings asks of a Limiter or a
// Policy.
type bookingLimiter interface {
	AllowN(ctx context.Context, key string, n int) (bool, error)
	ReserveN(ctx context.Context, key string, n int) (bool, error)
	Refund(ctx context.Context, key string, n int) error
	Remaining(ctx context.Context, key string) (int64, error)
}

type limiterBooking struct{ l *ratelimit.Limiter[string] }

func (b limiterBooking) AllowN(ctx context.Context, key string, n int) (bool, error) {
	d, err := b.l.AllowN(ctx, key, n)
	return d.Allowed(), err
}

func (b limiterBooking) ReserveN(ctx context.Context, key string, n int) (bool, error) {
	r, err := b.l.ReserveN(ctx, key, n, 0)
	return err == nil && r.OK(), err
}

func (b limiterBooking) Refund(ctx context.Context, key string, n int) error {
	_, err := b.l.Refund(ctx, key, n)
	return err
}

func (b limiterBooking) Remaining(ctx context.Context, key string) (int64, error) {
	d, err := b.l.Peek(ctx, key)
	return d.Remaining(), err
}

type policyBooking struct{ p *ratelimit.Policy[string] }

func (b policyBooking) AllowN(ctx context.Context, key string, n int) (bool, error) {
	d, err := b.p.AllowN(ctx, key, n)
	return d.Allowed(), err
}

func (b policyBooking) ReserveN(ctx context.Context, key string, n int) (bool, error) {
	r, err := b.p.ReserveN(ctx, key, n, 0)
	return err == nil && r.OK(), err
}

func (b policyBooking) Refund(ctx context.Context, key string, n int) error {
	_, err := b.p.Refund(ctx, key, n)
	return err
}

// Remaining is the Policy's first limit's.
func (b policyBooking) Remaining(ctx context.Context, key string) (int64, error) {
	d, err := b.p.Peek(ctx, key)
	if err != nil {
		return 0, err
	}
	return d.Limits()[0].Remaining(), nil
}

// TestCoalescedBookings: bookings and refunds of a hot key wait in its
// line as Takes do and go in batches of their kind, exactly: 64
// goroutines, half booking now or not at all (ReserveN with no delay),
// half taking, admit exactly the limit for every algorithm and for a
// Policy (a bucket and a sliding log of twice its size), on both stores
// with coalescing on, on miniredis, Redis and the cluster; then 64
// concurrent refunds of one unit each leave exactly 64 units to take.
// With go-redis the script calls are counted: far fewer than the
// operations.
func TestCoalescedBookings(t *testing.T) {
	const goroutines = 64
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		limit := onMiniredis(target, 2000)
		cases := append(unrefilled(limit), namedAlgorithm{"policy", nil})
		for _, client := range clients(target) {
			for _, a := range cases {
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
					var lim bookingLimiter
					if a.new == nil {
						bucket, err := cases[0].new()
						if err != nil {
							t.Fatal(err)
						}
						log, err := slidinglog.Per(2*limit, time.Hour)
						if err != nil {
							t.Fatal(err)
						}
						p, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Name: "bucket", Algorithm: bucket}, {Name: "log", Algorithm: log}}, ratelimit.WithName("coalesce"))
						if err != nil {
							t.Fatal(err)
						}
						lim = policyBooking{p}
					} else {
						alg, err := a.new()
						if err != nil {
							t.Fatal(err)
						}
						l, err := ratelimit.New(alg, st, ratelimit.WithName("coalesce"))
						if err != nil {
							t.Fatal(err)
						}
						lim = limiterBooking{l}
					}
					var turn atomic.Int64
					admitted, decisions := hammer(t, goroutines, func(ctx context.Context, cost int) (bool, error) {
						if turn.Add(1)%2 == 0 {
							return lim.AllowN(ctx, "hot", cost)
						}
						return lim.ReserveN(ctx, "hot", cost)
					})
					if admitted != limit {
						t.Errorf("admitted %d units, want exactly %d", admitted, limit)
					}
					var wg sync.WaitGroup
					for range goroutines {
						wg.Add(1)
						go func() {
							defer wg.Done()
							if err := lim.Refund(t.Context(), "hot", 1); err != nil {
								t.Error(err)
							}
						}()
					}
					wg.Wait()
					left, err := lim.Remaining(t.Context(), "hot")
					if err != nil {
						t.Fatal(err)
					}
					if left != goroutines {
						t.Errorf("%d refunds of 1 left %d to take, want %d", goroutines, left, goroutines)
					}
					if calls != nil {
						n, ops := calls.n.Load(), decisions+goroutines+1
						t.Logf("%d operations in %d script calls", ops, n)
						if n*2 > ops {
							t.Errorf("%d script calls for %d operations: coalescing did not happen", n, ops)
						}
					}
				})
			}
		}
	})
}
