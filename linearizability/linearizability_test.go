package linearizability

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// The shape of a recorded history.
const (
	clients = 8  // goroutines, half on a go-redis store's Limiter, half on a rueidis one's
	opsEach = 60 // operations per client
	rounds  = 3  // histories per algorithm and target
	limit   = 10 // every algorithm's capacity or limit
)

// keys are the keys the clients share.
var keys = []string{"k0", "k1", "k2"}

// fixedWindow is the fixed window's length, 2^47 µs (about 4.5 years); the
// test skips when its history spans an instant k·2^47 µs (next in December
// 2027).
const fixedWindow = time.Duration(1<<47) * time.Microsecond

// algorithms are configured so that nothing refills or expires while a
// history is recorded (seconds): the token bucket gains 10 tokens per
// 10^6 s, the interval bucket 10 per 1000 hours, the log and the window
// keep everything for an hour and 4.5 years. Whether a request is
// admitted, and what remains, then do not depend on the instant the
// server's clock gives the script, which the client cannot see: the model
// decides every operation at the history's start. (RetryAfter and
// ResetAfter do depend on it, and are not checked here; the differential
// tests check them against the same transitions.)
var algorithms = []struct {
	name string
	new  func() (algorithm.Algorithm, error)
}{
	{"tokenbucket", func() (algorithm.Algorithm, error) {
		return tokenbucket.New(tokenbucket.Config{Capacity: limit, Rate: 1e-5})
	}},
	{"tokenbucket-interval", func() (algorithm.Algorithm, error) {
		return tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: limit, Tokens: limit, Interval: 1000 * time.Hour})
	}},
	{"slidinglog", func() (algorithm.Algorithm, error) {
		return slidinglog.New(slidinglog.Config{Limit: limit, Window: time.Hour})
	}},
	{"fixedwindow", func() (algorithm.Algorithm, error) {
		return fixedwindow.New(fixedwindow.Config{Limit: limit, Window: fixedWindow})
	}},
}

// op is what a client asks.
type op uint8

const (
	take op = iota
	peek
	reset
	reserve // ReserveN: booked (allowed) or not, and the Remaining it reports
	refund
)

// input is an operation's input; cost is 0 for a peek or a reset; wait
// is a reservation's maximum delay in µs (0: now, or never).
type input struct {
	op   op
	key  string
	cost int64
	wait int64
}

// output is what the limiter answered (nothing for a reset).
type output struct {
	allowed   bool
	remaining int64
}

// model returns the sequential specification of alg: one key's state
// under alg's own transition, every operation decided at t0.
func model(alg algorithm.Algorithm, t0 int64) porcupine.Model {
	fresh := func() algorithm.State {
		return alg.Init(algorithm.State{}, t0)
	}
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			for _, o := range history {
				k := o.Input.(input).key
				byKey[k] = append(byKey[k], o)
			}
			var parts [][]porcupine.Operation
			for _, k := range slices.Sorted(maps.Keys(byKey)) {
				parts = append(parts, byKey[k])
			}
			return parts
		},
		Init: func() any { return fresh() },
		Step: func(state, in, out any) (bool, any) {
			s, i, o := state.(algorithm.State), in.(input), out.(output)
			switch i.op {
			case reset:
				return true, fresh()
			case peek:
				r := alg.Peek(s, t0, 1)
				return r.Allowed() == o.allowed && r.Remaining == o.remaining, s
			case reserve:
				b := alg.(algorithm.Booker)
				act, ok := algorithm.EarliestAll([]algorithm.Algorithm{alg}, []algorithm.State{s}, t0, algorithm.BookingDeadline(t0, i.wait), i.cost)
				if !ok {
					return !o.allowed && alg.Peek(s, t0, i.cost).Remaining == o.remaining, s
				}
				next, r := b.Book(clone(s), t0, act, i.cost)
				return o.allowed && r.Remaining == o.remaining, next
			case refund:
				next, r := alg.(algorithm.Booker).Refund(clone(s), t0, i.cost)
				return r.Remaining == o.remaining, next
			}
			next, r := alg.Take(clone(s), t0, i.cost)
			return r.Allowed() == o.allowed && r.Remaining == o.remaining, next
		},
		Equal: func(a, b any) bool { return equal(a.(algorithm.State), b.(algorithm.State)) },
		DescribeOperation: func(in, out any) string {
			i, o := in.(input), out.(output)
			switch i.op {
			case reset:
				return fmt.Sprintf("Reset(%s)", i.key)
			case reserve:
				return fmt.Sprintf("ReserveN(%s, %d, %dµs) → booked=%v remaining=%d", i.key, i.cost, i.wait, o.allowed, o.remaining)
			case refund:
				return fmt.Sprintf("Refund(%s, %d) → remaining=%d", i.key, i.cost, o.remaining)
			case peek:
				return fmt.Sprintf("Peek(%s) → allowed=%v remaining=%d", i.key, o.allowed, o.remaining)
			}
			return fmt.Sprintf("AllowN(%s, %d) → allowed=%v remaining=%d", i.key, i.cost, o.allowed, o.remaining)
		},
		DescribeState: func(state any) string {
			s := state.(algorithm.State)
			return fmt.Sprintf("%d %d %d %v", s.N0, s.N1, s.N2, entries(s))
		},
	}
}

// entries returns the live entries of a sliding log's state.
func entries(s algorithm.State) []algorithm.Entry {
	if s.Log == nil {
		return nil
	}
	return s.Log.Entries[s.Log.Head:]
}

// clone returns a copy of s that shares no memory with it.
func clone(s algorithm.State) algorithm.State {
	if s.Log != nil {
		s.Log = &algorithm.Log{Entries: slices.Clone(entries(s))}
	}
	return s
}

func equal(a, b algorithm.State) bool {
	return a.N0 == b.N0 && a.N1 == b.N1 && a.N2 == b.N2 && slices.Equal(entries(a), entries(b))
}

// limiters returns the limiters the clients use, all on one prefix: even
// clients through go-redis, odd ones through rueidis.
type limiters func(t *testing.T, alg algorithm.Algorithm, prefix string) []*ratelimit.Limiter[string]

// record runs the clients at once and returns their history. With peeks
// unset, clients do not peek; with books unset, they do not reserve or
// refund.
func record(t *testing.T, lims []*ratelimit.Limiter[string], peeks, books bool, seed uint64) []porcupine.Operation {
	ctx := t.Context()
	base := time.Now()
	histories := make([][]porcupine.Operation, len(lims))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c, lim := range lims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			<-start
			for range opsEach {
				in := input{op: take, key: keys[rng.IntN(len(keys))], cost: 1}
				switch x := rng.IntN(100); {
				case x < 6:
					in.op, in.cost = reset, 0
				case x < 20 && peeks:
					in.op, in.cost = peek, 0
				case x < 30:
					in.cost = 1 + rng.Int64N(3)
				case x < 38 && books:
					// Booked now or not at all, or however far ahead.
					in.op, in.cost = reserve, 1+rng.Int64N(3)
					if rng.IntN(2) == 0 {
						in.wait = algorithm.MaxDuration
					}
				case x < 44 && books:
					in.op, in.cost = refund, 1+rng.Int64N(3)
				}
				call := time.Since(base).Nanoseconds()
				var d ratelimit.Decision
				var err error
				switch in.op {
				case take:
					d, err = lim.AllowN(ctx, in.key, int(in.cost))
				case peek:
					d, err = lim.Peek(ctx, in.key)
				case reset:
					err = lim.Reset(ctx, in.key)
				case reserve:
					var r *ratelimit.Reservation[string]
					if r, err = lim.ReserveN(ctx, in.key, int(in.cost), time.Duration(in.wait)*time.Microsecond); err == nil {
						d = r.Decision()
						if r.OK() {
							d = admission(d) // booked: reported as allowed
						}
					}
				case refund:
					d, err = lim.Refund(ctx, in.key, int(in.cost))
				}
				ret := time.Since(base).Nanoseconds()
				if err != nil {
					t.Errorf("client %d: %+v: %v", c, in, err)
					return
				}
				histories[c] = append(histories[c], porcupine.Operation{
					ClientId: c, Input: in, Call: call, Output: output{d.Allowed(), d.Remaining()}, Return: ret,
				})
			}
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return slices.Concat(histories...)
}

// check checks history against alg's model at t0 and returns the result.
func check(t *testing.T, alg algorithm.Algorithm, t0 int64, history []porcupine.Operation) porcupine.CheckResult {
	t.Helper()
	res := porcupine.CheckOperationsTimeout(model(alg, t0), history, time.Minute)
	if res == porcupine.Unknown {
		t.Fatalf("porcupine gave up on a history of %d operations after a minute", len(history))
	}
	return res
}

// TestLinearizable records concurrent histories of every algorithm with
// the server's clock, on miniredis, a real Redis and a real cluster, and
// checks that each is linearizable.
func TestLinearizable(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		goredis := redistest.GoRedis(t, target)
		rueidis := redistest.Rueidis(t, target)
		for _, a := range algorithms {
			t.Run(a.name, func(t *testing.T) {
				alg, err := a.new()
				if err != nil {
					t.Fatal(err)
				}
				prefix := redistest.Prefix(t)
				// Two Limiters, one per client library, each shared by half
				// the clients, coalescing behind one call in flight: the
				// histories hold batches.
				var shared [2]*ratelimit.Limiter[string]
				for c := range shared {
					var st store.Store[string]
					if c == 0 {
						st, err = goredisstore.New(goredis, goredisstore.WithPrefix[string](prefix), goredisstore.WithCoalescing[string](1))
					} else {
						st, err = rueidisstore.New(rueidis, rueidisstore.WithPrefix[string](prefix), rueidisstore.WithCoalescing[string](1))
					}
					if err != nil {
						t.Fatal(err)
					}
					// The model books as far ahead as asked (algorithm.MaxDuration):
					// no bound on booking ahead (WithMaxBookAhead).
					if shared[c], err = ratelimit.New(alg, st, ratelimit.WithName("shared"), ratelimit.WithClock(clock.Server()), ratelimit.WithMaxBookAhead(-1)); err != nil {
						t.Fatal(err)
					}
				}
				var lims []*ratelimit.Limiter[string]
				for c := range clients {
					lims = append(lims, shared[c%2])
				}
				for round := range rounds {
					began := time.Now().UnixMicro()
					// miniredis refuses TIME in read-only scripts, which a
					// server-clock Peek runs.
					history := record(t, lims, target.Mini == nil, true, rand.Uint64())
					ended := time.Now().UnixMicro()
					if w := fixedWindow.Microseconds(); a.name == "fixedwindow" && began/w != ended/w {
						t.Skipf("the history spans a fixed-window boundary (%d µs to %d µs); run it again", began, ended)
					}
					admitted := 0
					for _, o := range history {
						if o.Input.(input).op == take && o.Output.(output).allowed {
							admitted++
						}
					}
					if res := check(t, alg, began, history); res != porcupine.Ok {
						t.Fatalf("round %d: the history of %d operations (%d admitted) is not linearizable", round, len(history), admitted)
					}
					t.Logf("round %d: %d operations by %d clients on %d keys, %d admitted: linearizable", round, len(history), clients, len(keys), admitted)
					for _, k := range keys { // the next round starts afresh
						if err := lims[0].Reset(t.Context(), k); err != nil {
							t.Fatal(err)
						}
					}
				}
			})
		}
	})
}

// racyStore is the classic broken limiter: it reads a key's state (GET),
// decides in Go, and writes the new state back (SET), with nothing to stop
// another client from doing the same in between.
type racyStore struct {
	c      redis.UniversalClient
	prefix string
	pause  time.Duration // between the read and the write
}

func (s *racyStore) Open(limits []store.Limit, _ clock.Clock) (store.Table[string], error) {
	return &racyTable{s: s, alg: limits[0].Algorithm}, nil
}

type racyTable struct {
	s   *racyStore
	alg algorithm.Algorithm
}

func (t *racyTable) key(k string) string { return t.s.prefix + "{" + k + "}" }

// get reads key's state, or a fresh one at now.
func (t *racyTable) get(ctx context.Context, key string, now int64) (algorithm.State, error) {
	var s algorithm.State
	v, err := t.s.c.Get(ctx, t.key(key)).Result()
	if err == redis.Nil {
		return t.alg.Init(s, now), nil
	}
	if err != nil {
		return s, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	f := strings.Split(v, ":")
	if len(f) != 3 {
		return s, fmt.Errorf("%w: state %q", store.ErrUnavailable, v)
	}
	n := [3]int64{}
	for i := range f {
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return s, fmt.Errorf("%w: state %q", store.ErrUnavailable, v)
		}
	}
	s.N0, s.N1, s.N2 = n[0], n[1], n[2]
	return s, nil
}

func (t *racyTable) Take(ctx context.Context, key string, now, cost int64, _ []algorithm.Result) (algorithm.Result, error) {
	s, err := t.get(ctx, key, now)
	if err != nil {
		return algorithm.Result{}, err
	}
	s, r := t.alg.Take(s, now, cost)
	time.Sleep(t.s.pause)
	v := fmt.Sprintf("%d:%d:%d", s.N0, s.N1, s.N2)
	if err := t.s.c.Set(ctx, t.key(key), v, time.Hour).Err(); err != nil {
		return algorithm.Result{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return r, nil
}

func (t *racyTable) Peek(ctx context.Context, key string, now int64, _ []algorithm.Result) (algorithm.Result, error) {
	s, err := t.get(ctx, key, now)
	if err != nil {
		return algorithm.Result{}, err
	}
	return t.alg.Peek(s, now, 1), nil
}

func (t *racyTable) Reset(ctx context.Context, key string) error {
	if err := t.s.c.Del(ctx, t.key(key)).Err(); err != nil {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return nil
}

// TestNonAtomicRejected records histories of racyStore, which loses
// updates when two clients interleave, and checks that the checker
// rejects them: the check above can fail. Interleavings are likely but
// not certain in one history, so it records up to five.
func TestNonAtomicRejected(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		for _, a := range algorithms {
			if a.name == "slidinglog" {
				continue // racyStore keeps three numbers, not a log
			}
			t.Run(a.name, func(t *testing.T) {
				alg, err := a.new()
				if err != nil {
					t.Fatal(err)
				}
				for attempt := 1; ; attempt++ {
					st := &racyStore{c: client, prefix: redistest.Prefix(t), pause: 200 * time.Microsecond}
					var lims []*ratelimit.Limiter[string]
					for range clients {
						// One name, one quota for every client's Limiter.
						lim, err := ratelimit.New(alg, st, ratelimit.WithName("shared"))
						if err != nil {
							t.Fatal(err)
						}
						lims = append(lims, lim)
					}
					began := time.Now().UnixMicro()
					history := record(t, lims, true, false, rand.Uint64())
					if check(t, alg, began, history) == porcupine.Illegal {
						t.Logf("attempt %d: %d operations, rejected as not linearizable", attempt, len(history))
						return
					}
					if attempt == 5 {
						t.Fatalf("five histories of a non-atomic limiter were all accepted as linearizable")
					}
				}
			})
		}
	})
}

// admission returns d, a booking's decision, as it admits the request at its
// instant (Reservation.Decision once due): allowed, RetryAfter 0, ResetAfter
// less the delay.
func admission(d ratelimit.Decision) ratelimit.Decision {
	f := d.Fields()
	f.Allowed, f.ResetAfter, f.RetryAfter = true, max(0, f.ResetAfter-f.RetryAfter), 0
	return f.Decision()
}
