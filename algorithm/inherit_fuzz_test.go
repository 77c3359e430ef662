package algorithm_test

import (
	"math"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// scaled maps x onto [1, 2^bits], about evenly over the powers of two: its
// low 6 bits choose a power, the rest a number below it.
func scaled(x uint64, bits uint) int64 {
	p := min(uint(x&63), bits)
	return 1 + int64((x>>6)%(uint64(1)<<p))
}

// inheritConfigs returns FuzzInherit's writer, reader and checking configs
// of kind (one of FuzzAlgorithms' kinds), from raw numbers: the writer has
// limit n0 and duration d0, the reader n1 and d1, and the buckets' other
// parameters are fitted so that every config is valid. The checking
// config is the writer's Tag with the reader's rate or schedule, which
// is how the reader refills an old state (design §2.1, §2.2).
func inheritConfigs(kind uint8, n0, n1, d0, d1, k0, k1 uint64) (w, r, chk config) {
	maxN := uint(40)
	if kind == kindLog {
		maxN = 15
	}
	w = config{kind: kind, n: scaled(n0, maxN), tokens: scaled(k0, 40)}
	r = config{kind: kind, n: scaled(n1, maxN), tokens: scaled(k1, 40)}
	dw, dr := scaled(d0, 48), scaled(d1, 48)
	steps := func(n, k int64) int64 { return (n + k - 1) / k }
	switch kind {
	case kindBucket:
		// The fill times of the writer and of the reader's rate applied
		// to the larger capacity are dw and dr.
		w.rate = float64(w.n) * 1e6 / float64(dw)
		r.rate = float64(max(w.n, r.n)) * 1e6 / float64(dr)
		for _, c := range []*config{&w, &r} {
			for !c.valid() {
				c.rate = math.Nextafter(c.rate, math.Inf(1))
			}
		}
	case kindInterval:
		dw = max(1, min(dw, algorithm.MaxDuration/steps(w.n, w.tokens)))
		dr = max(1, min(dr, algorithm.MaxDuration/steps(max(w.n, r.n), r.tokens)))
	case kindGCRA:
		dw = max(1, min(dw, algorithm.MaxDuration/w.n))
		dr = max(1, min(dr, algorithm.MaxDuration/r.n))
	}
	w.dur, r.dur = time.Duration(dw)*time.Microsecond, time.Duration(dr)*time.Microsecond
	chk = w
	if kind == kindBucket || kind == kindInterval {
		chk.rate, chk.tokens, chk.dur = r.rate, r.tokens, r.dur
	}
	return w, r, chk
}

// FuzzInherit builds a writer and a reader of one kind with random
// parameters (limits up to 2^40, 2^15 for the log, durations 1µs to
// 2^48µs), drives the writer through a random history as FuzzAlgorithms
// does, converts its state at an instant up to 2^53µs either side of the
// history's last, as-is or proportionally (as-is only for the log), and
// checks the conversion with algorithm.CheckInherit; then it goes on
// deciding on the converted state with algorithm.CheckTake.
func FuzzInherit(f *testing.F) {
	const t0 = 1_700_000_000_000_000 // Unix µs
	take := func(move uint8, x int16, c uint8) op { return op{move: move, x: x, costBy: costValid, c: c} }
	hist := seed(
		take(moveMicros, 0, 0), take(moveMicros, 1, 3), take(movePeriods, 4, 0), op{costBy: costLarge, c: 1},
		take(moveAfter, -1, 0), take(moveEdge, 0x0100, 9), take(moveMicros, -300, 0), take(movePeriods, 40, 1),
	)
	// 2^6·m + p is m below 2^p: scaled(p|m<<6, …) = 1 + m%2^p.
	exact := func(v int64) uint64 {
		if v <= 1 {
			return 0
		}
		return 63 | uint64(v-1)<<6
	}
	minute, hour := exact(60_000_000), exact(3_600_000_000)
	top := ^uint64(0) // the largest each range allows
	for kind := uint8(0); kind < kinds; kind++ {
		for _, rule := range []bool{false, true} {
			if rule && kind == kindLog {
				continue
			}
			// The cases: 100 → 10, 10 → 100, a minute ↔ an hour.
			f.Add(kind, exact(100), exact(10), minute, minute, exact(1), exact(1), rule, int64(t0), int64(0), hist)
			f.Add(kind, exact(10), exact(100), minute, minute, exact(1), exact(1), rule, int64(t0), int64(1_000), hist)
			f.Add(kind, exact(100), exact(100), minute, hour, exact(10), exact(10), rule, int64(t0), int64(-20), hist)
			f.Add(kind, exact(100), exact(100), hour, minute, exact(10), exact(10), rule, int64(t0), int64(59_000_000), hist)
			// The extremes: 2^40 (2^15) and 1, 2^48µs and 1µs.
			f.Add(kind, top, uint64(0), top, uint64(0), uint64(0), top, rule, int64(-t0), int64(1)<<53, hist)
			f.Add(kind, uint64(0), top, uint64(0), top, top, uint64(0), rule, int64(t0), -int64(1)<<53, hist)
		}
	}

	f.Fuzz(func(t *testing.T, kind uint8, n0, n1, d0, d1, k0, k1 uint64, proportional bool, start, offset int64, ops []byte) {
		kind %= kinds
		wc, rc, cc := inheritConfigs(kind, n0, n1, d0, d1, k0, k1)
		writer, err := wc.build(t)
		if err != nil {
			t.Fatalf("writer %+v: %v", wc, err)
		}
		reader, err := rc.build(t)
		if err != nil {
			t.Fatalf("reader %+v: %v", rc, err)
		}
		from, err := cc.build(t)
		if err != nil {
			t.Fatalf("checking config %+v: %v", cc, err)
		}
		if got, want := from.(algorithm.Tagged).Tag(), writer.(algorithm.Tagged).Tag(); got != want {
			t.Fatalf("checking config %+v: tag %v, want the writer's %v", cc, got, want)
		}
		to := reader.(algorithm.Inheritor)
		rule := algorithm.AsIs
		if proportional && kind != kindLog {
			rule = algorithm.Proportional
		}

		start %= maxInstant
		now, latest := start, start
		s := writer.Init(algorithm.State{}, now)
		var calls []call
		var last algorithm.Result
		for i := 0; len(ops) >= 4 && i < 16; i++ {
			o := decode(ops)
			ops = ops[4:]
			period := wc.period()
			switch o.move {
			case moveMicros:
				now += int64(o.x)
			case movePeriods:
				now += period * int64(int8(o.x)) / 16
			case moveEdge:
				now += period*int64(int8(o.x>>8)) + int64(int8(o.x))
			case moveAfter:
				now += max(last.RetryAfter, last.ResetAfter) + int64(int8(o.x))
			}
			now = min(max(now, -maxInstant), maxInstant)
			cl := call{now: now}
			if !o.peek {
				if o.costBy == costLarge {
					cl.cost = wc.n
				} else {
					cl.cost = 1 + int64(o.c)%wc.n
				}
			}
			if s, last, err = cl.check(writer, s); err != nil {
				t.Fatalf("writer %+v after %v: %v", wc, calls, err)
			}
			calls = append(calls, cl)
			latest = max(latest, now)
		}

		// The conversion instant: near the last call, some periods
		// away, or anywhere within 2^53µs.
		switch uint64(offset) >> 62 {
		case 0:
			now += offset % (1 << 16)
		case 1:
			now += offset % 64 * max(wc.period(), rc.period()) / 8
		default:
			now += offset % maxInstant
		}
		now = min(max(now, -maxInstant), maxInstant)

		next, err := algorithm.CheckInherit(to, from.(algorithm.Tagged), s, latest, now, rule)
		if err != nil {
			t.Fatalf("writer %+v, reader %+v after %v: %v", wc, rc, calls, err)
		}
		// The converted state is the reader's own from now on.
		for i := 0; len(ops) >= 4 && i < 8; i++ {
			o := decode(ops)
			ops = ops[4:]
			now = min(now+rc.period()*int64(int8(o.x))/16, maxInstant)
			if next, _, err = algorithm.CheckTake(to, next, now, 1+int64(o.c)%rc.n); err != nil {
				t.Fatalf("writer %+v, reader %+v after %v, converted at %d: %v", wc, rc, calls, now, err)
			}
		}
	})
}
