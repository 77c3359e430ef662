package algorithm_test

import (
	"errors"
	"math"
	"math/bits"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// The kinds of algorithm FuzzAlgorithms builds, by kind%kinds.
const (
	kindBucket   = 0 // tokenbucket.New{Capacity: n, Rate: rate}
	kindInterval = 1 // tokenbucket.NewInterval{Capacity: n, Tokens: tokens, Interval: dur}
	kindLog      = 2 // slidinglog.New{Limit: n, Window: dur}
	kindWindow   = 3 // fixedwindow.New{Limit: n, Window: dur}
	kindGCRA     = 4 // gcra.New{Burst: n, Every: dur}
	kindCounter  = 5 // slidingwindow.New{Limit: n, Window: dur}
	kinds        = 6
)

// maxInstant bounds the instants FuzzAlgorithms uses, ±2^53 µs (285 years
// either side of the epoch), so that no instant arithmetic overflows.
const maxInstant = int64(1) << 53

// An op is 4 bytes of FuzzAlgorithms' input:
//
//	flags: bit 0 peek (else take); bits 1–2 how the clock moves; bits 3–4
//	       how the cost is chosen
//	c:     the cost byte
//	x:     2 bytes, little endian: the clock move
type op struct {
	peek         bool
	move, costBy uint8
	c            uint8
	x            int16
}

func (o op) encode() []byte {
	flags := o.move&3<<1 | o.costBy&3<<3
	if o.peek {
		flags |= 1
	}
	return []byte{flags, o.c, byte(o.x), byte(uint16(o.x) >> 8)}
}

func decode(b []byte) op {
	return op{
		peek:   b[0]&1 == 1,
		move:   b[0] >> 1 & 3,
		costBy: b[0] >> 3 & 3,
		c:      b[1],
		x:      int16(uint16(b[2]) | uint16(b[3])<<8),
	}
}

// Clock moves.
const (
	moveMicros  = 0 // x µs
	movePeriods = 1 // x/16 periods, x an int8: fractions and multiples of a period
	moveEdge    = 2 // high byte of x periods, plus low byte of x µs: near period edges
	moveAfter   = 3 // the last RetryAfter (or ResetAfter) plus x µs, x an int8
)

// Cost choices.
const (
	costSmall = 0 // int8(c): often 0 or negative
	costLarge = 1 // limit+1-c: at, above or just below the limit
	costValid = 2 // 1 + c%limit (also 3)
)

func seed(ops ...op) []byte {
	var b []byte
	for _, o := range ops {
		b = append(b, o.encode()...)
	}
	return b
}

// config is FuzzAlgorithms' algorithm parameters.
type config struct {
	kind      uint8
	n, tokens int64
	dur       time.Duration
	rate      float64
}

// build returns the algorithm, or the constructor's error.
func (c config) build(t *testing.T) (algorithm.Algorithm, error) {
	switch c.kind {
	case kindBucket:
		b, err := tokenbucket.New(tokenbucket.Config{Capacity: c.n, Rate: c.rate})
		if err != nil || b == nil {
			if b != nil || err == nil {
				t.Fatalf("tokenbucket.New: got (%v, %v)", b, err)
			}
			return nil, err
		}
		return b, nil
	case kindInterval:
		b, err := tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: c.n, Tokens: c.tokens, Interval: c.dur})
		if err != nil || b == nil {
			if b != nil || err == nil {
				t.Fatalf("tokenbucket.NewInterval: got (%v, %v)", b, err)
			}
			return nil, err
		}
		return b, nil
	case kindLog:
		l, err := slidinglog.New(slidinglog.Config{Limit: c.n, Window: c.dur})
		if err != nil || l == nil {
			if l != nil || err == nil {
				t.Fatalf("slidinglog.New: got (%v, %v)", l, err)
			}
			return nil, err
		}
		return l, nil
	case kindGCRA:
		m, err := gcra.New(gcra.Config{Burst: c.n, Every: c.dur})
		if err != nil || m == nil {
			if m != nil || err == nil {
				t.Fatalf("gcra.New: got (%v, %v)", m, err)
			}
			return nil, err
		}
		return m, nil
	case kindCounter:
		w, err := slidingwindow.New(slidingwindow.Config{Limit: c.n, Window: c.dur})
		if err != nil || w == nil {
			if w != nil || err == nil {
				t.Fatalf("slidingwindow.New: got (%v, %v)", w, err)
			}
			return nil, err
		}
		return w, nil
	default:
		w, err := fixedwindow.New(fixedwindow.Config{Limit: c.n, Window: c.dur})
		if err != nil || w == nil {
			if w != nil || err == nil {
				t.Fatalf("fixedwindow.New: got (%v, %v)", w, err)
			}
			return nil, err
		}
		return w, nil
	}
}

// valid reports whether the documented rules accept c.
func (c config) valid() bool {
	us := c.dur.Microseconds()
	durOK := us >= 1 && us <= algorithm.MaxDuration
	switch c.kind {
	case kindBucket:
		return c.n >= 1 && c.n <= algorithm.MaxLimit && c.rate > 0 && !math.IsInf(c.rate, 0) &&
			float64(c.n)*1e6/c.rate <= float64(algorithm.MaxDuration)
	case kindInterval:
		if c.n < 1 || c.n > algorithm.MaxLimit || c.tokens < 1 || c.tokens > algorithm.MaxLimit || !durOK {
			return false
		}
		steps := (c.n + c.tokens - 1) / c.tokens
		hi, lo := bits.Mul64(uint64(steps), uint64(us))
		return hi == 0 && lo <= uint64(algorithm.MaxDuration)
	case kindLog:
		return c.n >= 1 && c.n <= slidinglog.MaxLimit && durOK
	case kindGCRA:
		if c.n < 1 || c.n > algorithm.MaxLimit || !durOK {
			return false
		}
		hi, lo := bits.Mul64(uint64(c.n), uint64(us))
		return hi == 0 && lo <= uint64(algorithm.MaxDuration)
	default:
		return c.n >= 1 && c.n <= algorithm.MaxLimit && durOK
	}
}

// fill returns the longest ResetAfter of a valid config with a clock that
// never steps back: the time to refill an empty bucket, or the window.
func (c config) fill() int64 {
	switch c.kind {
	case kindBucket:
		return int64(math.Ceil(float64(c.n) * 1e6 / c.rate))
	case kindInterval:
		return (c.n + c.tokens - 1) / c.tokens * c.dur.Microseconds()
	case kindGCRA:
		return c.n * c.dur.Microseconds()
	case kindCounter:
		// The previous window's count weighs something until it is two
		// windows old.
		return 2 * c.dur.Microseconds()
	default:
		return c.dur.Microseconds()
	}
}

// window returns what a valid config's Window method reports: the fill
// time, but the window length for the sliding-window counter.
func (c config) window() int64 {
	if c.kind == kindCounter {
		return c.dur.Microseconds()
	}
	return c.fill()
}

// period returns a natural time unit of a valid config: the time one token
// takes, the interval or the window.
func (c config) period() int64 {
	if c.kind == kindBucket {
		return min(max(int64(math.Ceil(1e6/c.rate)), 1), algorithm.MaxDuration)
	}
	return c.dur.Microseconds()
}

// admits returns the most cost the config may admit in total to a state
// created at start and called at instants from earliest to latest (latest
// includes start), and whether it knows: a sliding log that forgot entries
// and then saw its clock step back may admit them again.
func (c config) admits(start, earliest, latest int64, monotone bool) (float64, bool) {
	n := float64(c.n)
	switch c.kind {
	case kindBucket:
		// The bucket starts full and refills only while its clock moves
		// forward; 1e-9 covers rounding.
		return (n + c.rate*float64(latest-start)/1e6) * (1 + 1e-9), true
	case kindInterval:
		// It starts full and gains Tokens per whole Interval its last
		// refill instant advances, which is at most latest.
		return n + float64(c.tokens)*float64((latest-start)/c.dur.Microseconds()), true
	case kindLog:
		// Limit in each window of length Window that tiles earliest..latest.
		return n * float64((latest-earliest)/c.dur.Microseconds()+1), monotone
	case kindGCRA:
		// Its arrival time is at least the earliest instant plus one
		// interval per unit admitted, and never more than Burst intervals
		// past the instant of a decision.
		return n + float64((latest-earliest)/c.dur.Microseconds()), true
	default:
		// Limit in each fixed window from earliest's to latest's (for the
		// fixed window and the sliding-window counter, which admits at
		// most Limit per aligned window too); a clock that steps back
		// counts in the later window.
		w := c.dur.Microseconds()
		return n * float64(algorithm.FloorDiv(latest, w)-algorithm.FloorDiv(earliest, w)+1), true
	}
}

// call is one Take (cost ≥ 1) or Peek (cost 0) made on a state.
type call struct{ now, cost int64 }

func (c call) on(alg algorithm.Algorithm, s algorithm.State) (algorithm.State, algorithm.Result) {
	if c.cost == 0 {
		return s, alg.Peek(s, c.now, 1)
	}
	return alg.Take(s, c.now, c.cost)
}

// check is on, checking a Take against its contract (algorithm.CheckTake).
func (c call) check(alg algorithm.Algorithm, s algorithm.State) (algorithm.State, algorithm.Result, error) {
	if c.cost == 0 {
		return s, alg.Peek(s, c.now, 1), nil
	}
	return algorithm.CheckTake(alg, s, c.now, c.cost)
}

// FuzzAlgorithms builds each algorithm from random parameters, checks that
// the constructor accepts exactly the documented configs, and drives a valid
// one with random instants (forward, back, onto period edges and onto the
// instants results announce) and random costs. After every call it checks
// the Result's invariants, and against copies of the state (replayed from
// the calls so far, since algorithms are deterministic) that Take agrees
// with Peek, that RetryAfter and ResetAfter are exact to the microsecond,
// and that state changes only on admission; and that the cost admitted so
// far stays within what the config allows over the instants seen.
func FuzzAlgorithms(f *testing.F) {
	const t0 = 1_700_000_000_000_000 // Unix µs
	take := func(move uint8, x int16, c uint8) op { return op{move: move, x: x, costBy: costValid, c: c} }
	peek := func(move uint8, x int16) op { return op{peek: true, move: move, x: x} }
	busy := seed(
		take(moveMicros, 0, 0), take(moveMicros, 0, 1), take(moveMicros, 0, 0), take(moveMicros, 0, 0),
		take(moveAfter, -1, 0), take(moveAfter, 0, 0), peek(movePeriods, 24),
		op{costBy: costSmall, c: 0}, op{costBy: costSmall, c: 0xff}, op{costBy: costLarge, c: 0}, op{costBy: costLarge, c: 1},
		take(moveEdge, 0x01ff, 2), take(moveEdge, -0x0100, 0), peek(moveMicros, -5), take(moveMicros, -300, 0),
		take(movePeriods, 100, 0), peek(moveAfter, 0),
	)
	for _, c := range []config{
		{kind: kindBucket, n: 3, rate: 2},
		{kind: kindBucket, n: 1, rate: 3},
		{kind: kindBucket, n: 10, rate: 1e6},
		{kind: kindBucket, n: 1000, rate: 1e9},
		{kind: kindBucket, n: algorithm.MaxLimit, rate: 3906.25},
		{kind: kindBucket, n: 1, rate: 1e6 / (1 << 48)},
		{kind: kindBucket, n: 5, rate: math.MaxFloat64},
		{kind: kindBucket, n: 1, rate: math.NaN()},
		{kind: kindBucket, n: 0, rate: 1},
		{kind: kindInterval, n: 10, tokens: 1, dur: time.Second},
		{kind: kindInterval, n: 10, tokens: 4, dur: time.Second},
		{kind: kindInterval, n: 3, tokens: 5, dur: time.Millisecond},
		{kind: kindInterval, n: 1, tokens: 1, dur: time.Microsecond},
		{kind: kindInterval, n: 4, tokens: 1, dur: time.Duration(algorithm.MaxDuration/4) * time.Microsecond},
		{kind: kindInterval, n: 10, tokens: 0, dur: time.Second},
		{kind: kindInterval, n: 10, tokens: 1, dur: 999},
		{kind: kindLog, n: 5, dur: time.Second},
		{kind: kindLog, n: 1, dur: time.Microsecond},
		{kind: kindLog, n: slidinglog.MaxLimit, dur: time.Hour},
		{kind: kindLog, n: slidinglog.MaxLimit + 1, dur: time.Hour},
		{kind: kindWindow, n: 3, dur: time.Second},
		{kind: kindWindow, n: 2, dur: 10 * time.Microsecond},
		{kind: kindWindow, n: algorithm.MaxLimit, dur: time.Duration(algorithm.MaxDuration) * time.Microsecond},
		{kind: kindWindow, n: 1, dur: -time.Second},
		{kind: kindGCRA, n: 3, dur: 500 * time.Millisecond},
		{kind: kindGCRA, n: 1, dur: time.Microsecond},
		{kind: kindGCRA, n: 1000, dur: 7 * time.Microsecond},
		{kind: kindGCRA, n: algorithm.MaxLimit, dur: 256 * time.Microsecond},
		{kind: kindGCRA, n: algorithm.MaxLimit, dur: 257 * time.Microsecond},
		{kind: kindGCRA, n: 0, dur: time.Second},
		{kind: kindCounter, n: 5, dur: time.Second},
		{kind: kindCounter, n: 1, dur: time.Microsecond},
		{kind: kindCounter, n: 100, dur: 7 * time.Microsecond},
		{kind: kindCounter, n: algorithm.MaxLimit, dur: time.Duration(algorithm.MaxDuration) * time.Microsecond},
		{kind: kindCounter, n: algorithm.MaxLimit + 1, dur: time.Second},
	} {
		f.Add(c.kind, c.n, c.tokens, int64(c.dur), c.rate, int64(t0), busy)
		f.Add(c.kind, c.n, c.tokens, int64(c.dur), c.rate, int64(-15), busy)
	}

	f.Fuzz(func(t *testing.T, kind uint8, n, tokens, dur int64, rate float64, start int64, ops []byte) {
		c := config{kind: kind % kinds, n: n, tokens: tokens, dur: time.Duration(dur), rate: rate}
		alg, err := c.build(t)
		if valid := c.valid(); valid != (err == nil) {
			t.Fatalf("%+v: got error %v, want valid=%v", c, err, valid)
		}
		if err != nil {
			if !errors.Is(err, algorithm.ErrInvalidConfig) {
				t.Fatalf("%+v: got error %v, want ErrInvalidConfig", c, err)
			}
			return
		}
		limit := alg.Limit()
		if limit != c.n {
			t.Fatalf("%+v: Limit() = %d, want %d", c, limit, c.n)
		}
		fill, period := c.fill(), c.period()
		if c.window() > algorithm.MaxDuration+1 {
			t.Fatalf("%+v: fills in %dµs, above MaxDuration", c, c.window())
		}
		if w, ok := alg.(interface{ Window() time.Duration }); ok && w.Window() != time.Duration(c.window())*time.Microsecond {
			t.Fatalf("%+v: Window() = %v, want %dµs", c, w.Window(), c.window())
		}

		if start < -maxInstant || start > maxInstant {
			start %= maxInstant
		}
		var calls []call
		// replay returns a state of its own that went through calls.
		replay := func() *state {
			s := &state{alg: alg, State: alg.Init(algorithm.State{}, start)}
			for _, c := range calls {
				s.State, _ = c.on(alg, s.State)
			}
			return s
		}
		// The state checked starts from an old one that means nothing but
		// its Log's memory, and a Narrow algorithm is handed states whose
		// N2 and Log it must ignore.
		junk := func() *algorithm.Log {
			return &algorithm.Log{Entries: []algorithm.Entry{{At: start, Cost: n}, {At: start + dur, Cost: tokens}}, Head: 1}
		}
		_, narrow := alg.(algorithm.Narrow)
		s := &state{alg: alg}
		if s.State, err = algorithm.CheckInit(alg, algorithm.State{N0: tokens, N1: dur, N2: n, Log: junk()}, start); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		now, latest := start, start
		earliest, monotone := now, true // over the calls made
		var admitted int64              // the sum of admitted costs
		var last algorithm.Result
		for i := 0; len(ops) >= 4 && i < 48; i++ {
			o := decode(ops)
			ops = ops[4:]

			switch o.move {
			case moveMicros:
				now += int64(o.x)
			case movePeriods:
				now += period * int64(int8(o.x)) / 16
			case moveEdge:
				now += period*int64(int8(o.x>>8)) + int64(int8(o.x))
			case moveAfter:
				if last.RetryAfter > 0 {
					now += last.RetryAfter
				} else {
					now += last.ResetAfter
				}
				now += int64(int8(o.x))
			}
			now = min(max(now, -maxInstant), maxInstant)

			cl := call{now: now}
			if !o.peek {
				switch o.costBy {
				case costSmall:
					cl.cost = int64(int8(o.c))
				case costLarge:
					cl.cost = limit + 1 - int64(o.c)
				default:
					cl.cost = 1 + int64(o.c)%limit
				}
				err := algorithm.CheckCost(cl.cost, limit)
				switch {
				case cl.cost < 1 && !errors.Is(err, algorithm.ErrInvalidCost),
					cl.cost > limit && !errors.Is(err, algorithm.ErrCostExceedsLimit),
					cl.cost >= 1 && cl.cost <= limit && err != nil:
					t.Fatalf("CheckCost(%d, %d): got %v", cl.cost, limit, err)
				}
				if err != nil {
					continue
				}
			}

			before := replay().Peek(now)
			if cl.cost > 0 {
				if got, want := replay().PeekN(now, cl.cost), replay().Take(now, cl.cost); !got.Allowed() && got != want || got.Allowed() && (!want.Allowed() || got.Remaining != before.Remaining || got.ResetAfter != before.ResetAfter) {
					t.Fatalf("%+v: after %v: Peek(%d, cost %d): got %+v; Take gives %+v, Peek(cost 1) %+v", c, calls, now, cl.cost, got, want, before)
				}
			}
			if narrow {
				s.N2, s.Log = int64(i)+1, junk()
			}
			var r algorithm.Result
			if s.State, r, err = cl.check(alg, s.State); err != nil {
				t.Fatalf("%+v: after %v: %v", c, calls, err)
			}
			if len(calls) == 0 {
				earliest = now
			}
			monotone = monotone && (len(calls) == 0 || now >= calls[len(calls)-1].now)
			calls = append(calls, cl)
			earliest, latest = min(earliest, now), max(latest, now)
			last = r
			check(t, c, calls, r, before, fill, latest)
			if cl.cost > 0 && r.Allowed() {
				admitted += cl.cost
				if bound, ok := c.admits(start, earliest, latest, monotone); ok && float64(admitted) > bound {
					t.Fatalf("%+v: after %v: admitted %d, want at most %v", c, calls, admitted, bound)
				}
			}

			// RetryAfter is exact: the same request is admitted then, and
			// not a microsecond earlier. A denial changes nothing.
			if !r.Allowed() {
				if got := replay().Peek(now); got != before {
					t.Fatalf("%+v: after %v: Peek(%d): got %+v, want %+v as before the denial",
						c, calls, now, got, before)
				}
				cost := max(cl.cost, 1)
				if got := replay().Take(now+r.RetryAfter-1, cost); got.Allowed() {
					t.Fatalf("%+v: after %v: Take(%d, %d) a µs before RetryAfter: got %+v, want denied",
						c, calls, now+r.RetryAfter-1, cost, got)
				}
				if got := replay().Take(now+r.RetryAfter, cost); !got.Allowed() {
					t.Fatalf("%+v: after %v: Take(%d, %d) at RetryAfter: got %+v, want allowed",
						c, calls, now+r.RetryAfter, cost, got)
				}
			}
			// ResetAfter is exact: the state is fresh then, and a
			// microsecond earlier it is 1µs from fresh.
			if got, want := replay().Peek(now+r.ResetAfter), algorithm.Fresh(limit); got != want {
				t.Fatalf("%+v: after %v: Peek(%d) at ResetAfter: got %+v, want %+v",
					c, calls, now+r.ResetAfter, got, want)
			}
			if r.ResetAfter > 0 {
				if got := replay().Peek(now + r.ResetAfter - 1); got.ResetAfter != 1 {
					t.Fatalf("%+v: after %v: Peek(%d) a µs before ResetAfter: got %+v, want ResetAfter 1",
						c, calls, now+r.ResetAfter-1, got)
				}
			}
		}
	})
}

// state is a state with its algorithm, for the fuzz test's replays.
type state struct {
	algorithm.State
	alg algorithm.Algorithm
}

// Peek peeks for a cost of 1.
func (s *state) Peek(now int64) algorithm.Result { return s.alg.Peek(s.State, now, 1) }

// PeekN peeks for cost.
func (s *state) PeekN(now, cost int64) algorithm.Result { return s.alg.Peek(s.State, now, cost) }

// Take takes cost.
func (s *state) Take(now, cost int64) algorithm.Result {
	var r algorithm.Result
	s.State, r = s.alg.Take(s.State, now, cost)
	return r
}

// check checks the invariants of r, the result of the last of calls, given
// before, a peek at the same instant just before that call, fill, the
// longest ResetAfter the config allows, and latest, the latest instant seen.
func check(t *testing.T, c config, calls []call, r, before algorithm.Result, fill, latest int64) {
	t.Helper()
	cl := calls[len(calls)-1]
	fail := func(format string, args ...any) {
		t.Helper()
		args = append([]any{c, calls, r}, args...)
		t.Fatalf("%+v: after %v: got %+v: "+format, args...)
	}
	limit := c.n
	if r.Remaining < 0 || r.Remaining > limit {
		fail("want 0 ≤ Remaining ≤ %d", limit)
	}
	if r.RetryAfter < 0 || r.ResetAfter < 0 {
		fail("want RetryAfter ≥ 0 and ResetAfter ≥ 0")
	}
	if r.RetryAfter > r.ResetAfter {
		fail("want RetryAfter ≤ ResetAfter")
	}
	if (r.ResetAfter == 0) != (r.Remaining == limit) {
		fail("want ResetAfter 0 exactly when Remaining is the limit")
	}
	// A clock that stepped back waits for the latest instant first; the
	// continuous bucket may round its fill time up by a microsecond.
	if bound := fill + 1 + max(latest-cl.now, 0); r.ResetAfter > bound {
		fail("want ResetAfter ≤ %d", bound)
	}

	if cl.cost == 0 {
		if r != before {
			fail("want what the same peek on a replayed state gives, %+v", before)
		}
		if r.Allowed() != (r.Remaining >= 1) {
			fail("want a peek allowed exactly when Remaining ≥ 1")
		}
		return
	}
	if r.Allowed() != (cl.cost <= before.Remaining) {
		fail("want allowed exactly when cost %d ≤ Remaining before it (%+v)", cl.cost, before)
	}
	if r.Allowed() && r.Remaining != before.Remaining-cl.cost {
		fail("want Remaining %d - %d", before.Remaining, cl.cost)
	}
	if !r.Allowed() && (r.Remaining != before.Remaining || r.ResetAfter != before.ResetAfter) {
		fail("want a denial to report the state as a peek does (%+v)", before)
	}
	if cl.cost == 1 && (r.Allowed() != before.Allowed() || r.RetryAfter != before.RetryAfter) {
		fail("want a cost of 1 decided as a peek (%+v)", before)
	}
}
