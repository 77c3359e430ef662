package algorithm_test

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// FuzzBook runs sequences of Take, Book (at the earliest instant, within a
// maximum delay), Refund and the cancel of an earlier booking (Unused,
// then Refund) on every algorithm, with the clock moving either way, and
// checks each step against its contract: CheckTake, CheckBook (at the
// instant algorithm.Earliest finds, compared with a Take there at a few
// later instants), CheckRefund, CheckUnused. An op is 4 bytes: what (low 2
// bits: take, book, refund, cancel; bit 2: a booking may wait at most a
// period), the cost byte, and a clock move in µs (int16, little endian;
// scaled by the period when bit 3 is set).
func FuzzBook(f *testing.F) {
	const t0 = 1_700_000_000_000_000
	busy := []byte{
		0, 1, 0, 0, 1, 2, 0, 0, 1, 0, 0, 0, 5, 1, 1, 0, 3, 0, 0, 0,
		2, 1, 10, 0, 1, 3, 0, 0, 8, 0, 2, 0, 1, 0, 0xf0, 0xff, 3, 1, 0, 0,
		2, 9, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 11, 0, 1, 0,
	}
	for _, c := range []config{
		{kind: kindBucket, n: 3, rate: 2},
		{kind: kindBucket, n: 1000, rate: 1e9},
		{kind: kindBucket, n: algorithm.MaxLimit, rate: 3906.25},
		{kind: kindInterval, n: 10, tokens: 4, dur: time.Second},
		{kind: kindInterval, n: 1, tokens: 1, dur: time.Microsecond},
		{kind: kindLog, n: 5, dur: time.Second},
		{kind: kindLog, n: 1, dur: time.Microsecond},
		{kind: kindWindow, n: 3, dur: time.Second},
		{kind: kindWindow, n: algorithm.MaxLimit, dur: time.Duration(algorithm.MaxDuration/4) * time.Microsecond},
		{kind: kindGCRA, n: 3, dur: 500 * time.Millisecond},
		{kind: kindGCRA, n: algorithm.MaxLimit, dur: 256 * time.Microsecond},
		{kind: kindCounter, n: 5, dur: time.Second},
		{kind: kindCounter, n: 100, dur: 7 * time.Microsecond},
	} {
		f.Add(c.kind, c.n, c.tokens, int64(c.dur), c.rate, busy)
	}
	f.Fuzz(func(t *testing.T, kind uint8, n, tokens, dur int64, rate float64, ops []byte) {
		c := config{kind: kind % kinds, n: n, tokens: tokens, dur: time.Duration(dur), rate: rate}
		if !c.valid() {
			return
		}
		alg, err := c.build(t)
		if err != nil {
			t.Fatal(err)
		}
		b, ok := alg.(algorithm.Booker)
		if !ok {
			t.Fatalf("%v is not an algorithm.Booker", alg)
		}
		limit, period := alg.Limit(), max(c.period(), 1)
		now := int64(t0)
		s, err := algorithm.CheckInit(alg, algorithm.State{}, now)
		if err != nil {
			t.Fatal(err)
		}
		type booking struct{ act, cost int64 }
		var booked []booking
		for len(ops) >= 4 && len(booked) < 64 {
			what, cb := ops[0], int64(ops[1])
			move := int64(int16(uint16(ops[2]) | uint16(ops[3])<<8))
			ops = ops[4:]
			if what&8 != 0 {
				move = move * period / 16
			}
			if now+move < t0-algorithm.MaxDuration/2 || now+move > t0+algorithm.MaxDuration/2 {
				move = 0
			}
			now += move
			cost := 1 + cb%limit
			switch what & 3 {
			case 0:
				if s, _, err = algorithm.CheckTake(alg, s, now, cost); err != nil {
					t.Fatal(err)
				}
			case 1:
				maxDelay := algorithm.MaxDuration
				if what&4 != 0 {
					maxDelay = period
				}
				act, ok := algorithm.EarliestAll([]algorithm.Algorithm{alg}, []algorithm.State{s}, now, algorithm.BookingDeadline(now, maxDelay), cost)
				if !ok {
					continue
				}
				later := []int64{now, (now + act) / 2, act, act + 1, act + period/2, act + period, act + 3*period}
				if s, _, err = algorithm.CheckBook(b, s, now, act, cost, later); err != nil {
					t.Fatal(err)
				}
				booked = append(booked, booking{act, cost})
			case 2:
				if s, _, err = algorithm.CheckRefund(b, s, now, cost, []int64{now, now + 1, now + period, now + 3*period}); err != nil {
					t.Fatal(err)
				}
			case 3:
				if len(booked) == 0 {
					continue
				}
				i := int(cb) % len(booked)
				bk := booked[i]
				booked = append(booked[:i], booked[i+1:]...)
				give, err := algorithm.CheckUnused(b, s, now, bk.act, bk.cost)
				if err != nil {
					t.Fatal(err)
				}
				if give > 0 {
					if s, _, err = algorithm.CheckRefund(b, s, now, give, []int64{now, now + period}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})
}
