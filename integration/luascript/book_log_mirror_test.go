package luascript_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
)

// bookLimit is one limit of a booking mirror: its algorithm, state ID and
// Go state.
type bookLimit struct {
	alg algorithm.Booker
	id  string
	s   algorithm.State
}

// bookMirror runs the decision script and the booking scripts
// (luascript.ForOp) of limits on one key, and their Go transitions, and
// fails at the first reply that differs.
type bookMirror struct {
	t      *testing.T
	client redis.UniversalClient
	limits []*bookLimit
	keys   []string
	params []any
	take   *luascript.Script
	ops    map[luascript.Op]*luascript.Script
	clocks bool // whether sets saw a clock member
}

func newBookMirror(t *testing.T, client redis.UniversalClient, base string, limits ...*bookLimit) *bookMirror {
	t.Helper()
	m := &bookMirror{t: t, client: client, limits: limits, ops: map[luascript.Op]*luascript.Script{}}
	var ls []luascript.Limit
	var ids []string
	for _, l := range limits {
		ls = append(ls, luascript.LimitOf(l.alg, l.id))
		ids = append(ids, l.id)
		l.s = l.alg.Init(algorithm.State{}, 0)
	}
	var params []string
	var err error
	if m.take, params, err = luascript.For(ls...); err != nil {
		t.Fatal(err)
	}
	m.params = anys(params)
	for _, op := range []luascript.Op{luascript.OpBook, luascript.OpRefund, luascript.OpCancel, luascript.OpUndo} {
		if m.ops[op], _, err = luascript.ForOp(op, ls...); err != nil {
			t.Fatal(err)
		}
	}
	m.keys = luascript.Keys(base, ids...)
	return m
}

// eval runs s with now, cost, a TTL margin of 10 minutes (the instants
// are not the server's), the limits' arguments and extra.
func (m *bookMirror) eval(s *luascript.Script, now, cost int64, extra ...any) *redis.Cmd {
	args := append([]any{strconv.FormatInt(now, 10), strconv.FormatInt(cost, 10), "600000"}, m.params...)
	return m.client.Eval(m.t.Context(), s.Source, m.keys, append(args, extra...)...)
}

func (m *bookMirror) algs() ([]algorithm.Algorithm, []algorithm.State) {
	var algs []algorithm.Algorithm
	var states []algorithm.State
	for _, l := range m.limits {
		algs = append(algs, l.alg)
		states = append(states, l.s)
	}
	return algs, states
}

func ints(rs []algorithm.Result) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Remaining, r.RetryAfter, r.ResetAfter)
	}
	return out
}

// takeOrPeek decides cost at now (a peek for cost 0) with the decision
// script and in Go.
func (m *bookMirror) takeOrPeek(now, cost int64) (got, want []int64) {
	got, err := m.eval(m.take, now, cost).Int64Slice()
	if err != nil {
		m.t.Fatal(err)
	}
	peek := cost == 0
	if peek {
		cost = 1
	}
	all := true
	var rs []algorithm.Result
	for _, l := range m.limits {
		r := l.alg.Peek(l.s, now, cost)
		all = all && r.Allowed()
		rs = append(rs, r)
	}
	if all && !peek {
		for i, l := range m.limits {
			l.s, rs[i] = l.alg.Take(l.s, now, cost)
		}
	}
	return got, ints(rs)
}

// book books cost at now, at most maxDelay ahead, and returns the instant
// booked at (when booked).
func (m *bookMirror) book(now, cost, maxDelay int64) (got, want []string, act int64, ok bool) {
	got, err := m.eval(m.ops[luascript.OpBook], now, cost, strconv.FormatInt(maxDelay, 10), testNonce).StringSlice()
	if err != nil {
		m.t.Fatal(err)
	}
	algs, states := m.algs()
	act, ok = algorithm.EarliestAll(algs, states, now, algorithm.BookingDeadline(now, maxDelay), cost)
	var rs []algorithm.Result
	for _, l := range m.limits {
		if !ok {
			rs = append(rs, l.alg.Peek(l.s, now, cost))
			continue
		}
		var r algorithm.Result
		l.s, r = l.alg.Book(l.s, now, act, cost)
		rs = append(rs, r)
	}
	want = []string{"0", strconv.FormatInt(act, 10)}
	if ok {
		want[0] = "1"
	}
	for _, x := range ints(rs) {
		want = append(want, strconv.FormatInt(x, 10))
	}
	for range m.limits {
		want = append(want, "", "") // a log's values: none, it cancels by Unused (and none when not booked)
		if ok {
			want = append(want, testGen) // the generation it gave the log
		} else {
			want = append(want, "")
		}
	}
	return got, want, act, ok
}

func (m *bookMirror) refund(now, n int64) (got, want []int64) {
	got, err := m.eval(m.ops[luascript.OpRefund], now, n).Int64Slice()
	if err != nil {
		m.t.Fatal(err)
	}
	var rs []algorithm.Result
	for _, l := range m.limits {
		var r algorithm.Result
		l.s, r = l.alg.Refund(l.s, now, n)
		rs = append(rs, r)
	}
	return got, ints(rs)
}

func (m *bookMirror) cancel(now, act, cost int64) (got, want []int64) {
	extra := []any{strconv.FormatInt(act, 10)}
	for range m.limits {
		extra = append(extra, "", "", testGen)
	}
	got, err := m.eval(m.ops[luascript.OpCancel], now, cost, extra...).Int64Slice()
	if err != nil {
		m.t.Fatal(err)
	}
	for _, l := range m.limits {
		give := int64(0)
		if act > now {
			if give = l.alg.Unused(l.s, now, act, cost); give > 0 {
				l.s, _, _ = l.alg.(algorithm.Undoer).Undo(l.s, now, act, cost, cost, false)
			}
		}
		want = append(want, give)
	}
	return got, want
}

// undo gives a booking back as a Reservation's Refund does (OpUndo),
// before or after it is due, and replies what each limit gave: Unused
// before act; after it the cost while the booking is the newest entry, in
// the window at the log's instant (Go: Log.Undo).
func (m *bookMirror) undo(now, act, cost int64) (got, want []int64) {
	extra := []any{strconv.FormatInt(act, 10)}
	for range m.limits {
		extra = append(extra, "", "", testGen)
	}
	got, err := m.eval(m.ops[luascript.OpUndo], now, cost, extra...).Int64Slice()
	if err != nil {
		m.t.Fatal(err)
	}
	for _, l := range m.limits {
		give := int64(0)
		// What Go's Undo says it gave back, an admission taken from the
		// middle of the log included.
		l.s, give, _ = l.alg.(algorithm.Undoer).Undo(l.s, now, act, cost, cost, false)
		want = append(want, give)
	}
	return got, want
}

// sets compares each limit's sorted set with its Go state: the members
// after the base are the Go log's entries, and the clock member is there
// exactly when the clock is not the newest member's instant.
func (m *bookMirror) sets() error {
	m.clocks = false
	for i, l := range m.limits {
		zs, err := m.client.ZRangeWithScores(m.t.Context(), m.keys[1+i], 0, -1).Result()
		if err != nil {
			return err
		}
		var entries []algorithm.Entry
		clock := ""
		for _, z := range zs {
			member := z.Member.(string)
			switch {
			case strings.HasPrefix(member, "#M"):
				clock = member[2:]
				m.clocks = true
			case strings.HasPrefix(member, "#"):
			default:
				c, err := strconv.ParseInt(member, 10, 64)
				if err != nil {
					return fmt.Errorf("limit %d: member %q", i+1, member)
				}
				entries = append(entries, algorithm.Entry{At: int64(z.Score), Cost: c})
			}
		}
		var goes []algorithm.Entry
		if l.s.Log != nil {
			goes = l.s.Log.Entries[l.s.Log.Head:]
		}
		if l.s.N2 == 0 {
			if len(entries) != 0 || clock != "" {
				return fmt.Errorf("limit %d: Go's log is fresh, the set holds %v (clock %q)", i+1, entries, clock)
			}
			continue
		}
		if len(entries) < len(goes) || !slices.Equal(entries[len(entries)-len(goes):], goes) {
			return fmt.Errorf("limit %d: the set's entries %v do not end with Go's %v", i+1, entries, goes)
		}
		newest := entries[len(entries)-1].At
		want := ""
		if l.s.N1 != newest {
			want = strconv.FormatInt(l.s.N1, 10)
		}
		if clock != want {
			return fmt.Errorf("limit %d: clock member %q, want %q (Go's clock %d, newest entry %d)", i+1, clock, want, l.s.N1, newest)
		}
	}
	return nil
}

// TestBookMirror replays random histories of Take, Peek, Book, Refund and
// Cancel with a clock that goes forward, idles and steps back, through
// the scripts and through Go, on one sliding log and on two (one script),
// and compares every reply and the sorted sets after every step.
func TestSlidingLogBookMirror(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		steps := 600
		if target.Mini != nil {
			steps = 300
		}
		type spec struct{ limit, window int64 }
		for i, specs := range [][]spec{
			{{3, 10}},
			{{5, 1000}},
			{{40, 7}},
			{{4, 10}, {10, 60}},
		} {
			t.Run(fmt.Sprint(specs), func(t *testing.T) {
				var limits []*bookLimit
				var minLimit, maxWindow int64 = 1 << 40, 0
				for j, sp := range specs {
					alg, err := slidinglog.New(slidinglog.Config{Limit: sp.limit, Window: time.Duration(sp.window) * time.Microsecond})
					if err != nil {
						t.Fatal(err)
					}
					limits = append(limits, &bookLimit{alg: alg, id: fmt.Sprintf("l%d", j)})
					minLimit, maxWindow = min(minLimit, sp.limit), max(maxWindow, sp.window)
				}
				m := newBookMirror(t, client, fmt.Sprintf("%s{book%d}", redistest.Prefix(t), i), limits...)
				rng := rand.New(rand.NewPCG(26, uint64(i)))
				now := int64(1_763_700_000_000_000)
				type booking struct{ act, cost int64 }
				var books []booking
				var trace []string
				var clocks, gave, back int // steps with a clock member, cancels that gave back, clocks that stepped back
				for step := range steps {
					switch rng.IntN(12) {
					case 0:
						now -= 1 + rng.Int64N(2*maxWindow)
						back++
					case 1:
						now += rng.Int64N(3*maxWindow + 1)
					case 2, 3, 4:
						now += rng.Int64N(maxWindow/3 + 2)
					}
					cost := 1 + rng.Int64N(minLimit)
					if rng.IntN(3) > 0 {
						cost = 1 + rng.Int64N(min(minLimit, 2))
					}
					var what string
					var got, want any
					switch op := rng.IntN(10); {
					case op < 3:
						if rng.IntN(4) == 0 {
							cost = 0
						}
						what = fmt.Sprintf("take %d at %d", cost, now)
						got, want = m.takeOrPeek(now, cost)
					case op < 6:
						maxDelay := rng.Int64N(2*maxWindow + 1)
						if rng.IntN(4) == 0 {
							maxDelay = algorithm.MaxDuration // no limit, as the Redis table passes it
						}
						g, w, act, ok := m.book(now, cost, maxDelay)
						what = fmt.Sprintf("book %d at %d within %d", cost, now, maxDelay)
						got, want = g, w
						if ok {
							books = append(books, booking{act, cost})
						}
					case op < 8:
						n := 1 + rng.Int64N(minLimit+1)
						what = fmt.Sprintf("refund %d at %d", n, now)
						got, want = m.refund(now, n)
					default:
						if len(books) == 0 {
							continue
						}
						b := books[len(books)-1]
						if rng.IntN(2) == 0 {
							b = books[rng.IntN(len(books))]
						}
						what = fmt.Sprintf("cancel %d booked for %d at %d", b.cost, b.act, now)
						g, w := m.cancel(now, b.act, b.cost)
						if rng.IntN(2) == 0 {
							what = fmt.Sprintf("undo %d booked for %d at %d", b.cost, b.act, now)
							g, w = m.undo(now, b.act, b.cost)
						}
						got, want = g, w
						if slices.Max(w) > 0 {
							gave++
						}
					}
					trace = append(trace, fmt.Sprintf("%s: %v", what, want))
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("step %d, %s: script replied %v, Go %v\nafter:\n  %s", step, what, got, want, strings.Join(trace[max(0, len(trace)-15):], "\n  "))
					}
					if err := m.sets(); err != nil {
						t.Fatalf("step %d, %s: %v\nafter:\n  %s", step, what, err, strings.Join(trace[max(0, len(trace)-15):], "\n  "))
					}
					if m.clocks {
						clocks++
					}
				}
				t.Logf("%d steps: %d with a clock member, %d cancels gave back, %d steps back", steps, clocks, gave, back)
				if clocks == 0 || gave == 0 || back == 0 {
					t.Errorf("the history missed a case: %d steps with a clock member, %d cancels that gave back, %d steps back", clocks, gave, back)
				}
			})
		}
	})
}
