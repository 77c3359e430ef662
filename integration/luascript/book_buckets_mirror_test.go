package luascript_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// bucketValue returns the field value the script writes for s, a Go state
// of alg (one of the token buckets or GCRA), after the limit's header.
func bucketValue(alg algorithm.Algorithm, s algorithm.State) string {
	switch alg.(type) {
	case *tokenbucket.Bucket:
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], uint64(s.N0))
		binary.LittleEndian.PutUint64(b[8:], math.Float64bits(float64(s.N1)))
		return string(b[:])
	case *tokenbucket.IntervalBucket:
		return fmt.Sprintf("%d %d", s.N0, s.N1)
	default:
		return strconv.FormatInt(s.N0, 10)
	}
}

// TestBucketsBookMirror replays random histories of takes, bookings,
// refunds and cancellations on the token buckets and GCRA through their
// scripts (luascript.For and ForOp) and through the Go transitions, as
// the memory store runs them, and fails at the first reply or stored
// value that differs: the --@book, --@refund and --@unused parts mirror
// Book, Refund and Unused bit for bit.
func TestBucketsBookMirror(t *testing.T) {
	must := func(a algorithm.Booker, err error) algorithm.Booker {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	algs := []algorithm.Booker{
		must(tokenbucket.New(tokenbucket.Config{Capacity: 3, Rate: 2})),
		must(tokenbucket.New(tokenbucket.Config{Capacity: 10, Rate: 3.3})),
		must(tokenbucket.New(tokenbucket.Config{Capacity: 1000, Rate: 1e9 / 3600})),
		must(tokenbucket.New(tokenbucket.Config{Capacity: 7, Rate: 0.01})),
		must(tokenbucket.New(tokenbucket.Config{Capacity: algorithm.MaxLimit, Rate: 1e9})),
		must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 10, Tokens: 1, Interval: time.Second})),
		must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 10, Tokens: 4, Interval: 333 * time.Microsecond})),
		must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 3, Tokens: 5, Interval: time.Millisecond})),
		must(gcra.New(gcra.Config{Burst: 3, Every: 500 * time.Millisecond})),
		must(gcra.New(gcra.Config{Burst: 1000, Every: 7 * time.Microsecond})),
	}
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		ctx := t.Context()
		steps := 150
		if target.Mini != nil {
			steps = 80 // gopher-lua is slow
		}
		for ai, alg := range algs {
			limit := luascript.LimitOf(alg, "b")
			_, params, err := luascript.For(limit)
			if err != nil {
				t.Fatal(err)
			}
			decide, _, _ := luascript.For(limit)
			bookS, _, err := luascript.ForOp(luascript.OpBook, limit)
			if err != nil {
				t.Fatal(err)
			}
			refundS, _, _ := luascript.ForOp(luascript.OpRefund, limit)
			cancelS, _, _ := luascript.ForOp(luascript.OpCancel, limit)
			base := redistest.Prefix(t) + fmt.Sprintf("{b%d}", ai)
			keys := luascript.Keys(base, "b")
			hdr := limit.Header()
			eval := func(s *luascript.Script, now, cost int64, extra ...string) *redis.Cmd {
				args := append([]any{strconv.FormatInt(now, 10), strconv.FormatInt(cost, 10), "600000"}, anys(params)...)
				return client.Eval(ctx, s.Source, keys, append(args, anys(extra)...)...)
			}

			rng := rand.New(rand.NewPCG(uint64(ai), 26))
			period := max(alg.(algorithm.Quoter).Quota().Window.Microseconds()/alg.Limit(), 1)
			now := int64(1_763_700_000_000_000)
			var s algorithm.State
			present := false // the Go state is written: the field holds it
			type booked struct {
				act, cost int64
				pre, post string
				gen       string
			}
			var books []booked
			var log []string
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("%v: after\n  %v\n%s", alg, log, fmt.Sprintf(format, args...))
			}
			value := func() string {
				if !present {
					return ""
				}
				return hdr + bucketValue(alg, s)
			}
			for range steps {
				switch rng.IntN(5) {
				case 0:
				case 1:
					now += rng.Int64N(3)
				case 2:
					now += rng.Int64N(2 * period)
				case 3:
					now += rng.Int64N(alg.Limit()*period + 1)
				default:
					now -= rng.Int64N(period) // the clock steps back
				}
				if !present {
					s = alg.Init(algorithm.State{}, now)
				}
				cost := 1 + rng.Int64N(min(alg.Limit(), 4))
				switch op := rng.IntN(10); {
				case op < 3:
					log = append(log, fmt.Sprintf("take %d at %d", cost, now))
					reply, err := eval(decide, now, cost).Int64Slice()
					var want algorithm.Result
					s, want = alg.Take(s, now, cost)
					present = present || want.Allowed()
					if err != nil || len(reply) != 3 || (algorithm.Result{Remaining: reply[0], RetryAfter: reply[1], ResetAfter: reply[2]}) != want {
						fail("take: script %v (%v), Go %+v", reply, err, want)
					}
				case op < 7:
					maxDelay := rng.Int64N(3 * alg.Limit() * period)
					log = append(log, fmt.Sprintf("book %d at %d within %d", cost, now, maxDelay))
					reply, err := eval(bookS, now, cost, strconv.FormatInt(maxDelay, 10), testNonce).StringSlice()
					if err != nil || len(reply) != 8 && len(reply) != 5 { // 5: not booked, no values
						fail("book: script %q (%v)", reply, err)
					}
					act := algorithm.Earliest(alg, s, now, cost)
					pre := value()
					var want algorithm.Result
					ok := act <= now+maxDelay
					if ok {
						s, want = alg.Book(s, now, act, cost)
						present = true
						books = append(books, booked{act, cost, reply[5], reply[6], reply[7]})
					} else {
						want = alg.Peek(s, now, cost)
					}
					got := fmt.Sprint(reply[:5])
					if w := fmt.Sprint([]string{map[bool]string{true: "1", false: "0"}[ok], strconv.FormatInt(act, 10),
						strconv.FormatInt(want.Remaining, 10), strconv.FormatInt(want.RetryAfter, 10), strconv.FormatInt(want.ResetAfter, 10)}); got != w {
						fail("book: script %v, Go %v", got, w)
					}
					if ok && (noGen(reply[5]) != pre || noGen(reply[6]) != value() || reply[7] != testGen) {
						fail("book: script's values before and after %q, %q; Go's %q, %q", reply[5], reply[6], pre, value())
					}
				case op < 8:
					n := 1 + rng.Int64N(2*alg.Limit())
					log = append(log, fmt.Sprintf("refund %d at %d", n, now))
					reply, err := eval(refundS, now, n).Int64Slice()
					var want algorithm.Result
					next, want := alg.Refund(s, now, n)
					if next != s {
						present = true
					}
					s = next
					if err != nil || len(reply) != 3 || (algorithm.Result{Remaining: reply[0], RetryAfter: reply[1], ResetAfter: reply[2]}) != want {
						fail("refund: script %v (%v), Go %+v", reply, err, want)
					}
				default:
					if len(books) == 0 {
						continue
					}
					b := books[rng.IntN(len(books))]
					log = append(log, fmt.Sprintf("cancel %d due at %d at %d", b.cost, b.act, now))
					reply, err := eval(cancelS, now, b.cost, strconv.FormatInt(b.act, 10), b.pre, b.post, b.gen).Int64Slice()
					// As the stores cancel: the state before comes back
					// while the booking's is still there, else Unused is
					// refunded; nothing once the booking is due.
					var give int64
					switch {
					case b.act <= now:
					case b.post != "" && value() == noGen(b.post):
						// What Go's exact Undo gives back of it, the state
						// before put back.
						_, give, _ = alg.(algorithm.Undoer).Undo(s, now, b.act, b.cost, b.cost, true)
						present = b.pre != ""
						if present {
							s = parse(t, alg, noGen(b.pre)[len(hdr):])
						}
					default:
						// What Go's Undo gives back (before act, its Unused, to
						// the capacity).
						var next algorithm.State
						if next, give, _ = alg.(algorithm.Undoer).Undo(s, now, b.act, b.cost, b.cost, false); give > 0 {
							s, present = next, true
						}
					}
					if err != nil || len(reply) != 1 || reply[0] != give {
						fail("cancel: script gave %v (%v), Go %d", reply, err, give)
					}
				}
				got, err := client.HGet(ctx, keys[0], "b").Result()
				if err == redis.Nil {
					got, err = "", nil
				}
				if err != nil || noGen(got) != value() {
					fail("stored %q (%v), Go's state %+v is %q", got, err, s, value())
				}
			}
			client.Del(ctx, keys...)
		}
	})
}

// parse is bucketValue's inverse.
func parse(t *testing.T, alg algorithm.Algorithm, v string) algorithm.State {
	t.Helper()
	switch alg.(type) {
	case *tokenbucket.Bucket:
		return algorithm.State{N0: int64(binary.LittleEndian.Uint64([]byte(v[:8]))),
			N1: int64(math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[8:]))))}
	case *tokenbucket.IntervalBucket:
		var s algorithm.State
		if _, err := fmt.Sscanf(v, "%d %d", &s.N0, &s.N1); err != nil {
			t.Fatal(err)
		}
		return s
	default:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return algorithm.State{N0: n}
	}
}
