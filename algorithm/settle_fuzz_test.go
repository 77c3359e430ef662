package algorithm_test

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// FuzzSettle checks issue 52's property on every algorithm: settling an
// admission never leaves the key better off than charging its actual cost
// from the start would have. It runs a history of admissions (Take, Book
// at the earliest instant) with the clock moving forward, one of which is
// the admission to settle; then settles it to another cost, as a store
// does (Settler.Owe for more, Undoer.Undo of the difference for less,
// exact when nothing was charged since the admission), and checks the
// state against the same history replayed with that admission of the
// settled cost from the start, every admission charged whether it fits or
// not (Owe, as a forced charge): at a few later instants and costs, the
// settled state admits nothing the replay does not, and reports no more
// Remaining. Every step keeps its contract (CheckOwe, CheckUndo). An op is
// 4 bytes: what (bit 0: take or book; bit 1: the admission to settle),
// the cost byte and a forward clock move in µs (uint16, scaled by the
// period when bit 3 is set); settle is the cost settled to, as a fraction
// of 256 of twice the limit.
func FuzzSettle(f *testing.F) {
	const t0 = 1_700_000_000_000_000
	hist := []byte{
		0, 2, 0, 0, 1, 1, 3, 0, 2, 3, 0, 0, 0, 1, 1, 0, 1, 2, 0, 0, 8, 1, 9, 0, 0, 1, 0, 0,
	}
	for _, c := range []config{
		{kind: kindBucket, n: 10, rate: 2},
		{kind: kindBucket, n: 1000, rate: 1000.0 / 60},
		{kind: kindInterval, n: 10, tokens: 4, dur: time.Second},
		{kind: kindLog, n: 5, dur: time.Second},
		{kind: kindWindow, n: 3, dur: time.Second},
		{kind: kindGCRA, n: 3, dur: 500 * time.Millisecond},
		{kind: kindCounter, n: 5, dur: time.Second},
		{kind: kindCounter, n: 100, dur: 7 * time.Microsecond},
	} {
		for _, settle := range []uint8{0, 40, 200, 255} {
			f.Add(c.kind, c.n, c.tokens, int64(c.dur), c.rate, hist, settle, uint16(3))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, n, tokens, dur int64, rate float64, ops []byte, settle uint8, wait uint16) {
		c := config{kind: kind % kinds, n: n, tokens: tokens, dur: time.Duration(dur), rate: rate}
		if !c.valid() {
			return
		}
		alg, err := c.build(t)
		if err != nil {
			t.Fatal(err)
		}
		st, ok := alg.(algorithm.Settler)
		if !ok {
			t.Fatalf("%v is not an algorithm.Settler", alg)
		}
		limit, period := alg.Limit(), max(c.period(), 1)
		type step struct {
			now, act, cost int64
			mine           bool
		}
		var steps []step
		now := int64(t0)
		s := alg.Init(algorithm.State{}, now)
		mine := -1 // the index of the admission to settle
		touched := false
		for len(ops) >= 4 && len(steps) < 32 {
			what, cost := ops[0], 1+int64(ops[1])%limit
			move := int64(uint16(ops[2]) | uint16(ops[3])<<8)
			ops = ops[4:]
			if what&8 != 0 {
				move = move * period / 16
			}
			now += min(move, algorithm.MaxDuration/64)
			act := now
			if what&1 != 0 {
				var ok bool
				act, ok = algorithm.EarliestAll([]algorithm.Algorithm{alg}, []algorithm.State{s}, now, now+4*period, cost)
				if !ok {
					continue
				}
				s, _ = st.Book(s, now, act, cost)
			} else {
				var r algorithm.Result
				if s, r = st.Take(s, now, cost); !r.Allowed() {
					continue
				}
			}
			if mine >= 0 {
				touched = true
			}
			if what&2 != 0 && mine < 0 {
				mine = len(steps)
			}
			steps = append(steps, step{now: now, act: act, cost: cost})
		}
		if mine < 0 {
			return
		}
		steps[mine].mine = true
		booked := steps[mine]
		now += int64(wait) * period / 16
		target := int64(settle) * 2 * limit / 256
		var settled algorithm.State
		var r algorithm.Result
		switch {
		case target > booked.cost:
			settled, r, err = algorithm.CheckOwe(st, s, now, booked.act, target-booked.cost, []int64{now, now + period})
		case target < booked.cost:
			settled, _, r, err = algorithm.CheckUndo(st, s, now, booked.act, booked.cost, booked.cost-target, !touched, []int64{now, now + period})
		default:
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = r
		// The history replayed with the settled cost from the start,
		// every admission forced.
		ref := alg.Init(algorithm.State{}, t0)
		for _, sp := range steps {
			cost := sp.cost
			if sp.mine {
				cost = target
			}
			if cost == 0 {
				continue
			}
			if sp.act > sp.now {
				ref, _ = st.Book(ref, sp.now, sp.act, cost)
			} else {
				ref, _ = st.Owe(ref, sp.now, sp.act, cost)
			}
		}
		slack := int64(0)
		switch c.kind {
		case kindBucket:
			slack = 1 // the float refill may cross a whole token a µs either way (see CheckBook)
		case kindInterval:
			// A take from a full interval bucket restarts its interval, so
			// a history charged less may refill on a later schedule: up to
			// an interval behind.
			slack = c.dur.Microseconds()
		}
		for _, at := range []int64{now, now + 1, now + period/2, now + period, now + 2*period, now + c.fill()} {
			for _, k := range []int64{1, max(1, limit/2), limit} {
				got, want := alg.Peek(settled, at, k), alg.Peek(ref, at+slack, k)
				if got.Allowed() && !want.Allowed() || got.Remaining > want.Remaining {
					t.Fatalf("settled %d booked at %d for %d to %d at %d (exact %v): at %d a cost of %d reads %+v, better than with %d charged from the start, %+v",
						booked.cost, booked.now, booked.act, target, now, !touched, at, k, got, target, want)
				}
			}
		}
	})
}
