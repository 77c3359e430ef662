package luascript_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// mirrorInherit runs hist through old's script and Go transition (as
// mirror does), then calls through new's script under the same state ID
// and rule, against Go: until an admission, every call converts the old
// state at its instant (old's Tag, new.Inherit), since nothing is written
// before; after it, new decides on its own state. The script's replies
// must be Go's, call for call.
//
// books, when given, are booked after hist (through old's booking script
// and Go's Book, whose replies must agree), each within its maxDelay, so
// that the state converted may hold units booked ahead: a debt.
func mirrorInherit(t *testing.T, client redis.UniversalClient, old, new algorithm.Algorithm, rule algorithm.Rule, key string, hist, calls []call, books ...bookCall) {
	t.Helper()
	inh, ok := new.(algorithm.Inheritor)
	if !ok {
		t.Skipf("%v has no Inherit (the Go half of commit 4)", new)
	}
	from, _ := algorithm.TagOf(old)
	var s algorithm.State
	mirror(t, client, old, key, hist, func(_ int, st algorithm.State) { s = st })
	for _, bk := range books {
		s = bookOnKey(t, client, old, key, s, bk)
	}
	ctx := t.Context()
	l := luascript.LimitOf(new, "m")
	l.Rule = rule
	script, params, err := luascript.For(l)
	if err != nil {
		t.Fatal(err)
	}
	keys := luascript.Keys(key, "m")
	converted := false
	for i, c := range calls {
		args := append([]any{strconv.FormatInt(c.now, 10), strconv.FormatInt(c.cost, 10), "600000"}, anys(params)...)
		cur := s
		if !converted {
			cur = inh.Inherit(from, s, c.now, rule)
		}
		var cmd *redis.Cmd
		var want algorithm.Result
		if c.cost == 0 {
			cmd = evalAs(ctx, client, script, l.Mode(), true, keys, args...)
			want = new.Peek(cur, c.now, 1)
		} else {
			cmd = evalAs(ctx, client, script, l.Mode(), false, keys, args...)
			var next algorithm.State
			next, want = new.Take(cur, c.now, c.cost)
			if want.Allowed() {
				s, converted = next, true
			}
		}
		reply, err := cmd.Int64Slice()
		if err != nil {
			t.Fatalf("%v after %v (%v), call %d (cost %d at %d): %v", new, old, rule, i, c.cost, c.now, err)
		}
		got := algorithm.Result{}
		if len(reply) == 3 {
			got = algorithm.Result{Remaining: reply[0], RetryAfter: reply[1], ResetAfter: reply[2]}
		}
		if len(reply) != 3 || got != want {
			t.Fatalf("%v after %v (%v), call %d (cost %d at %d): script replied %v, Go decides %+v",
				new, old, rule, i, c.cost, c.now, reply, want)
		}
	}
}

// bookCall is a booking of cost at now, within maxDelay µs.
type bookCall struct{ now, cost, maxDelay int64 }

// bookOnKey books bk on key (under the state ID "m") through alg's
// booking script and through Go, as mirrorBookings does, from s, the Go
// state equivalent to what key holds, and returns the Go state after it.
func bookOnKey(t *testing.T, client redis.UniversalClient, alg algorithm.Algorithm, key string, s algorithm.State, bk bookCall) algorithm.State {
	t.Helper()
	b := alg.(algorithm.Booker)
	l := luascript.LimitOf(alg, "m")
	script, params, err := luascript.ForOp(luascript.OpBook, l)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]any{strconv.FormatInt(bk.now, 10), strconv.FormatInt(bk.cost, 10), "600000"}, anys(params)...)
	args = append(args, strconv.FormatInt(bk.maxDelay, 10), testNonce)
	reply, err := evalAs(t.Context(), client, script, l.Mode(), false, luascript.Keys(key, "m")[:1], args...).StringSlice()
	if err != nil || len(reply) != 8 {
		t.Fatalf("%v: book %+v: %v %v", alg, bk, reply, err)
	}
	act, ok := algorithm.EarliestAll([]algorithm.Algorithm{b}, []algorithm.State{s}, bk.now, algorithm.BookingDeadline(bk.now, bk.maxDelay), bk.cost)
	var r algorithm.Result
	booked := int64(0)
	if ok {
		s, r = b.Book(s, bk.now, act, bk.cost)
		booked = 1
	} else {
		r = b.Peek(s, bk.now, bk.cost)
	}
	if want := fmt.Sprint([]int64{booked, act, r.Remaining, r.RetryAfter, r.ResetAfter}); fmt.Sprint(reply[:5]) != want {
		t.Fatalf("%v: book %+v: script replied %v, Go %v", alg, bk, reply[:5], want)
	}
	return s
}

// TestInheritBookedMirror is TestInheritMirror on keys that hold bookings
// when the limit changes (units booked up to 2^48µs ahead, the debt of
// the buckets and GCRA, the count booked into later windows): the script
// carries them as Go's Inherit does, call for call, on every target.
func TestInheritBookedMirror(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		for name, mk := range inheritMakers {
			if name == "slidinglog" {
				continue // its bookings are members of its set, kept as they are
			}
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(26, uint64(len(name))))
				for runs := 1; runs <= 100; runs++ {
					old, new, rule, span := drawChange(rng, mk)
					now := int64(1_763_700_000_000_000) + rng.Int64N(1_000_000_000)
					hist := []call{{now, old.Limit()}} // used to the full: what follows is booked ahead
					var books []bookCall
					for range 1 + rng.IntN(3) {
						now += rng.Int64N(span/8 + 1)
						maxDelay := min(rng.Int64N(4*span+1), algorithm.MaxDuration) // as the limiter passes it
						if rng.IntN(4) == 0 {
							maxDelay = algorithm.MaxDuration
						}
						books = append(books, bookCall{now, 1 + rng.Int64N(old.Limit()), maxDelay})
					}
					var calls []call
					for range 1 + rng.IntN(8) {
						now += rng.Int64N(span/2 + 1)
						calls = append(calls, call{now, rng.Int64N(min(new.Limit(), 4) + 1)})
					}
					key := redistest.Prefix(t) + fmt.Sprintf("{booked%d}", runs)
					mirrorInherit(t, client, old, new, rule, key, hist, calls, books...)
				}
			})
		}
	})
}

// The limits and durations (µs) the inheritance mirrors draw from: the
// extremes and the common cases.
var (
	inheritLimits    = []int64{1, 3, 10, 100, 1000, 1 << 20, algorithm.MaxLimit}
	inheritDurations = []int64{1, 7, 1000, 1_000_000, 60_000_000, 3_600_000_000, algorithm.MaxDuration}
)

// drawChange draws a limit change of mk's kind: the writer and the reader
// (configurations New accepts), a rule, and a span of µs to move by.
func drawChange(rng *rand.Rand, mk func(limit, d int64) (algorithm.Algorithm, error)) (old, new algorithm.Algorithm, rule algorithm.Rule, span int64) {
	draw := func() (algorithm.Algorithm, error) {
		return mk(inheritLimits[rng.IntN(len(inheritLimits))], inheritDurations[rng.IntN(len(inheritDurations))])
	}
	for {
		var err error
		if old, err = draw(); err != nil {
			continue // a configuration New refuses
		}
		if new, err = draw(); err != nil {
			continue
		}
		return old, new, algorithm.Rule(rng.IntN(2)), inheritDurations[rng.IntN(len(inheritDurations))]
	}
}

// inheritMakers make an algorithm of each kind from a limit and a
// duration in µs (a window, an interval, a fill time).
var inheritMakers = map[string]func(limit, d int64) (algorithm.Algorithm, error){
	"tokenbucket": func(limit, d int64) (algorithm.Algorithm, error) {
		return tokenbucket.New(tokenbucket.Config{Capacity: limit, Rate: float64(limit) * 1e6 / float64(d)})
	},
	"tokenbucket-interval": func(limit, d int64) (algorithm.Algorithm, error) {
		return tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: limit, Tokens: max(limit/7, 1), Interval: time.Duration(d) * time.Microsecond})
	},
	"gcra": func(limit, d int64) (algorithm.Algorithm, error) {
		return gcra.New(gcra.Config{Burst: limit, Every: time.Duration(max(d/limit, 1)) * time.Microsecond})
	},
	"fixedwindow": func(limit, d int64) (algorithm.Algorithm, error) {
		return fixedwindow.New(fixedwindow.Config{Limit: limit, Window: time.Duration(d) * time.Microsecond})
	},
	"slidingwindow": func(limit, d int64) (algorithm.Algorithm, error) {
		return slidingwindow.New(slidingwindow.Config{Limit: limit, Window: time.Duration(d) * time.Microsecond})
	},
	"slidinglog": func(limit, d int64) (algorithm.Algorithm, error) {
		return slidinglog.New(slidinglog.Config{Limit: min(limit, slidinglog.MaxLimit), Window: time.Duration(d) * time.Microsecond})
	},
}

// TestInheritMirror changes the limit of keys with random histories, on
// every algorithm and both rules (as-is only for the log): limits from 1
// to 2^40 (2^15 for the log), windows and intervals from 1 µs to 2^48 µs;
// the script's conversion in Lua decides as the Go Inherit methods do,
// call for call, on every target.
func TestInheritMirror(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		for name, mk := range inheritMakers {
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(24, uint64(len(name))))
				for runs := 1; runs <= 40; runs++ {
					old, new, rule, span := drawChange(rng, mk)
					if name == "slidinglog" {
						rule = algorithm.AsIs
					}
					now := int64(1_763_700_000_000_000) + rng.Int64N(1_000_000_000)
					var hist, calls []call
					for range 1 + rng.IntN(6) {
						now += rng.Int64N(span/4 + 1)
						hist = append(hist, call{now, 1 + rng.Int64N(min(old.Limit(), 4))})
					}
					for range 1 + rng.IntN(8) {
						now += rng.Int64N(span/2 + 1)
						calls = append(calls, call{now, rng.Int64N(min(new.Limit(), 4) + 1)})
					}
					key := redistest.Prefix(t) + fmt.Sprintf("{inherit%d}", runs)
					mirrorInherit(t, client, old, new, rule, key, hist, calls)
				}
			})
		}
	})
}
