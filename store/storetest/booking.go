package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"pgregory.net/rapid"
)

// testBooking runs random sequences of AllowN, Peek, ReserveN (with random
// maximum delays), Cancel, Refund and Settle of an earlier reservation,
// Refund by key, Reset and clock moves (forward, and back) on one key of a
// Limiter (limits 1) or a Policy of random algorithms, and checks every
// answer, field for field, against a model that applies the algorithms'
// own transitions (algorithm.Booker, algorithm.Undoer, algorithm.Settler)
// the way the store contract says a table does (store.Booker,
// store.Settler): the earliest instant every limit admits (EarliestAll),
// nothing given back into a state of another generation (made again after
// Reset), exact give-back while the state is the one a booking left, the
// algorithm's Undo otherwise, and what each Refund says it gave back. So
// every store gives the same results as the algorithms, hence as each
// other.
//
// Along the way it checks that booking then cancelling with nothing
// charged in between leaves every limit's state, as Peek reports it, as
// it was, that refunds never leave a key more Remaining than its limit,
// and, while the clock has not stepped back, that the admissions still
// counted never exceed what each limit allows over any span (its setup's
// bound): an admission counts at its instant (a booking's due instant)
// until its reservation is refunded, or cancelled before it is due; a
// refund by key of n counts as n given back at its instant.
func testBooking(t *testing.T, st store.Store[string], k *kind, maxLimits int) {
	seq := 0
	rapid.Check(t, func(rt *rapid.T) {
		seq++
		n := 1
		if k == nil {
			n = rapid.IntRange(2, maxLimits).Draw(rt, "limits")
		}
		setups := make([]setup, n)
		refusable := false
		limits := make([]ratelimit.Limit, n)
		for i := range setups {
			kk := k
			if kk == nil {
				kk = &kinds[rapid.IntRange(0, len(kinds)-1).Draw(rt, "kind")]
			}
			setups[i] = kk.draw(rt)
			refusable = refusable || kk.mayRefuseSettle
			limits[i] = ratelimit.Limit{Name: fmt.Sprintf("%s-%d", kk.name, i), Algorithm: setups[i].alg}
		}
		start := drawStart(rt)
		clk := clock.NewFake(time.UnixMicro(start))
		b := &bookingMachine{clk: clk, now: start, start: start, key: fmt.Sprintf("bk%d", seq), mayRefuseSettle: refusable}
		// The model books as far ahead as asked, as x/time/rate does: the
		// bound on booking ahead (WithMaxBookAhead) is the root package's
		// to test.
		unbounded := ratelimit.WithMaxBookAhead(-1)
		if n == 1 {
			lim, err := ratelimit.New(setups[0].alg, st, ratelimit.WithClock(clk), ratelimit.WithName(limits[0].Name), unbounded)
			if err != nil {
				rt.Fatalf("New: %v", err)
			}
			b.lim = lim
		} else {
			p, err := ratelimit.NewPolicy(st, limits, ratelimit.WithName("booking"), ratelimit.WithClock(clk), unbounded)
			if err != nil {
				rt.Fatalf("NewPolicy: %v", err)
			}
			b.pol = p
		}
		for _, s := range setups {
			bk, ok := s.alg.(algorithm.Booker)
			if !ok {
				rt.Skipf("%v does not book", s.alg)
			}
			b.algs = append(b.algs, bk)
			b.plain = append(b.plain, s.alg)
			b.period = max(b.period, s.period)
		}
		b.setups = setups
		b.delayed = make([]bool, n)
		b.states = make([]algorithm.State, n)
		b.exists = make([]bool, n)
		b.gens = make([]int, n)
		rt.Repeat(map[string]func(*rapid.T){
			"advance": b.capped(b.advance),
			"back":    b.capped(b.back),
			"allow":   b.capped(b.allow),
			"peek":    b.capped(b.peek),
			"reserve": b.capped(b.reserve),
			"cancel":  b.capped(b.cancel),
			"refund":  b.capped(b.refund),
			"undo":    b.capped(b.undo),
			"settle":  b.capped(b.settle),
			"reset":   b.capped(b.reset),
			"":        b.bounded,
		})
	})
}

// bookingMachine is one sequence of testBooking: the limiter (lim) or
// policy (pol) under test, and the model: each limit's state (nil Log and
// zero numbers before the key's first charge: exists), and the
// reservations made, with what the model booked for them.
type bookingMachine struct {
	// mayRefuseSettle: a limit's kind may refuse to settle (kind).
	mayRefuseSettle bool
	lim             *ratelimit.Limiter[string]
	pol             *ratelimit.Policy[string]
	clk             *clock.Fake
	now             int64
	start           int64
	key             string
	algs            []algorithm.Booker
	plain           []algorithm.Algorithm
	period          int64
	states          []algorithm.State
	exists          []bool // whether the store holds a state for each limit
	// gens is each limit's state's generation: a new one for each state
	// born (a charge where there was none, after Reset), from born.
	gens   []int
	born   int
	booked []booked
	steps  int
	setups []setup
	// counted is every admission made, and every refund by key (a negative
	// cost at its instant), for the bounds; wentBack stops checking them
	// once the clock has stepped back (a store then counts an admission
	// in the window it had reached, not the one of its instant).
	counted  []*counted
	wentBack bool
	// delayed is set for a limit that is a token bucket or GCRA once a
	// booking was made for a later instant than that limit alone would
	// have booked it (another limit of the Policy asked for it): its
	// state then reads the booking as charged from the instant it would
	// have admitted it, and a refund after that instant (by key, or
	// through a Reservation) may give back what the booking holds from
	// then until it is due, which the bounds would count. Known, and
	// documented (docs/design/refund-by-handle.md §8): their bounds are
	// not checked from then on.
	delayed []bool
}

// counted is an admission (or a refund by key, cost < 0) at an instant,
// gone once its reservation gave it back.
type counted struct {
	at, cost int64
	gone     bool
}

// booked is a reservation and the model's record of it.
type booked struct {
	res       *ratelimit.Reservation[string]
	adm       *counted
	act, cost int64 // cost: as last settled
	pre, post []algorithm.State
	exact     []bool
	made      []bool // the booking made the limit's state: given back exactly, there is none again
	gen       []int  // the generation of each limit's state it charged; -1: none any more
	// byKey is set when a refund by key came once the booking was due:
	// that refund may have given its charge back, so the sequence does
	// not refund it again through its Reservation (a caller refunds a
	// request one way or the other; the store cannot tell).
	byKey bool
}

func (b *bookingMachine) capped(action func(*rapid.T)) func(*rapid.T) {
	return func(t *rapid.T) {
		if b.steps < maxSteps {
			action(t)
			b.steps++
		}
	}
}

func (b *bookingMachine) limitOf() int64 {
	l := b.algs[0].Limit()
	for _, a := range b.algs {
		l = min(l, a.Limit())
	}
	return l
}

func (b *bookingMachine) advance(t *rapid.T) {
	d := rapid.OneOf(rapid.Int64Range(0, 3), rapid.Int64Range(0, b.period), rapid.Int64Range(0, 3*b.period)).Draw(t, "advance µs")
	b.clk.Advance(micros(d))
	b.now += d
}

// back steps the clock back a little, as a clock of another server may be.
func (b *bookingMachine) back(t *rapid.T) {
	d := rapid.Int64Range(1, max(1, b.period/4)).Draw(t, "back µs")
	b.clk.Advance(-micros(d))
	b.now -= d
	b.wentBack = true
}

// bounded checks every limit's bound (its setup's) on the admissions
// still counted, in order of instant, over every span that ends at one.
func (b *bookingMachine) bounded(t *rapid.T) {
	if b.wentBack {
		return
	}
	var hist []admission
	for _, c := range b.counted {
		if !c.gone {
			hist = append(hist, admission{c.at, c.cost})
		}
	}
	// By instant, and at one instant the refunds by key last: a span
	// ends after every event of its last instant, and one that starts
	// part-way into an instant then leaves out admissions, not refunds.
	slices.SortStableFunc(hist, func(x, y admission) int {
		if c := cmp.Compare(x.at, y.at); c != 0 {
			return c
		}
		return cmp.Compare(y.cost, x.cost)
	})
	for i, s := range b.setups {
		if b.delayed[i] {
			continue
		}
		for end := range hist {
			if end+1 < len(hist) && hist[end+1].at == hist[end].at {
				continue
			}
			span := hist[:end+1]
			if roundsToMicros(s.alg) {
				// A booking of the continuous bucket may read a µs early
				// (its float refill rounds to the µs either way; see
				// algorithm.Booker): a µs more per admission in the span.
				span = slices.Clone(span)
				for k := range span {
					span[k].at += int64(k)
				}
			}
			if err := s.bound(span); err != nil {
				t.Fatalf("limit %d (%v), admissions still counted %v (relative to the start): %v", i, s.alg, b.relative(hist[:end+1]), err)
			}
		}
	}
}

// relative returns hist with instants relative to the sequence's start.
func (b *bookingMachine) relative(hist []admission) []admission {
	out := make([]admission, len(hist))
	for i, a := range hist {
		out[i] = admission{a.at - b.start, a.cost}
	}
	return out
}

// init gives the key a state under every limit that has none, as a store
// does when it charges, and reports which it made.
func (b *bookingMachine) init() []bool {
	made := make([]bool, len(b.algs))
	for i, a := range b.algs {
		if !b.exists[i] {
			b.states[i] = a.Init(algorithm.State{}, b.now)
			b.exists[i], made[i] = true, true
			b.born++
			b.gens[i] = b.born
		}
	}
	return made
}

// results returns each limit's result by f, and the combination.
func (b *bookingMachine) results(f func(i int, a algorithm.Booker) algorithm.Result) (algorithm.Result, []algorithm.Result) {
	rs := make([]algorithm.Result, len(b.algs))
	for i, a := range b.algs {
		rs[i] = f(i, a)
	}
	return algorithm.Combine(rs), rs
}

// same fails unless got (the limiter's decision and its limits') is want.
func (b *bookingMachine) same(t *rapid.T, what string, got ratelimit.Decision, want algorithm.Result, each []algorithm.Result) {
	check := func(d ratelimit.Decision, r algorithm.Result, which string) {
		if d.Remaining() != r.Remaining || d.RetryAfter() != micros(r.RetryAfter) || d.ResetAfter() != micros(r.ResetAfter) {
			t.Fatalf("%s at +%dµs: %s %v, the algorithms' model %+v", what, b.now-b.start, which, d, r)
		}
	}
	check(got, want, "decision")
	if b.pol != nil {
		for i, d := range got.Limits() {
			check(d, each[i], fmt.Sprintf("limit %d", i))
		}
	}
}

func (b *bookingMachine) allow(t *rapid.T) {
	cost := rapid.Int64Range(1, b.limitOf()).Draw(t, "cost")
	var got ratelimit.Decision
	var err error
	if b.lim != nil {
		var d ratelimit.Decision
		d, err = b.lim.AllowN(context.Background(), b.key, int(cost))
		got = d
	} else {
		got, err = b.pol.AllowN(context.Background(), b.key, int(cost))
	}
	if err != nil {
		t.Fatalf("AllowN(%d): %v", cost, err)
	}
	saved, had, gens := append([]algorithm.State(nil), b.states...), append([]bool(nil), b.exists...), slices.Clone(b.gens)
	b.init()
	all := true
	for i, a := range b.algs {
		all = all && a.Peek(b.states[i], b.now, cost).Allowed()
	}
	if !all {
		defer func() { copy(b.states, saved); copy(b.exists, had); copy(b.gens, gens) }() // a denial writes nothing
	}
	want, each := b.results(func(i int, a algorithm.Booker) algorithm.Result {
		if !all {
			return a.Peek(b.states[i], b.now, cost)
		}
		var r algorithm.Result
		b.states[i], r = a.Take(b.states[i], b.now, cost)
		return r
	})
	b.same(t, fmt.Sprintf("AllowN(%d)", cost), got, want, each)
	if all {
		b.counted = append(b.counted, &counted{at: b.now, cost: cost})
	}
}

func (b *bookingMachine) peek(t *rapid.T) {
	_, each := b.results(func(i int, a algorithm.Booker) algorithm.Result {
		if !b.exists[i] {
			return algorithm.Fresh(a.Limit())
		}
		return a.Peek(b.states[i], b.now, 1)
	})
	b.peekIs(t, "Peek", each)
}

// peekIs asks the store to Peek and fails unless each limit reports want.
func (b *bookingMachine) peekIs(t *rapid.T, what string, want []algorithm.Result) {
	var got ratelimit.Decision
	var err error
	if b.lim != nil {
		var d ratelimit.Decision
		d, err = b.lim.Peek(context.Background(), b.key)
		got = d
	} else {
		got, err = b.pol.Peek(context.Background(), b.key)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	b.same(t, what, got, algorithm.Combine(want), want)
}

func (b *bookingMachine) reserve(t *rapid.T) {
	cost := rapid.Int64Range(1, b.limitOf()).Draw(t, "cost")
	maxDelay := rapid.OneOf(rapid.Just(int64(-1)), rapid.Just(int64(0)), rapid.Int64Range(0, 4*b.period)).Draw(t, "max delay µs")
	md := time.Duration(-1)
	if maxDelay >= 0 {
		md = micros(maxDelay)
	}
	var res *ratelimit.Reservation[string]
	var err error
	if b.lim != nil {
		res, err = b.lim.ReserveN(context.Background(), b.key, int(cost), md)
	} else {
		res, err = b.pol.ReserveN(context.Background(), b.key, int(cost), md)
	}
	if err != nil {
		t.Fatalf("ReserveN(%d, %v): %v", cost, md, err)
	}
	saved, had, gens := append([]algorithm.State(nil), b.states...), append([]bool(nil), b.exists...), slices.Clone(b.gens)
	made := b.init()
	until := algorithm.BookingDeadline(b.now, holdsNow(b.plain, maxDelay))
	act, ok := algorithm.EarliestAll(b.plain, b.states, b.now, until, cost)
	if !ok {
		// Nothing written: the limits that had no state still have none
		// (their fresh states are read as of now, which is what b.states
		// holds until the next call).
		defer func() { copy(b.states, saved); copy(b.exists, had); copy(b.gens, gens) }()
	}
	what := fmt.Sprintf("ReserveN(%d, max %dµs)", cost, maxDelay)
	if res.OK() != ok {
		t.Fatalf("%s at +%dµs: OK %v, the model %v (act +%dµs)", what, b.now-b.start, res.OK(), ok, act-b.start)
	}
	if !ok {
		want, each := b.results(func(i int, a algorithm.Booker) algorithm.Result { return a.Peek(b.states[i], b.now, cost) })
		want.RetryAfter = max(want.RetryAfter, act-b.now)
		b.same(t, what, res.Decision(), want, each)
		return
	}
	for i, s := range b.setups {
		if readsBookingsEarly(s.alg) && act > algorithm.Earliest(s.alg, b.states[i], b.now, cost) {
			b.delayed[i] = true
		}
	}
	bk := booked{res: res, act: act, cost: cost, made: made, adm: &counted{at: act, cost: cost}, gen: slices.Clone(b.gens)}
	b.counted = append(b.counted, bk.adm)
	// Peeks before, to compare after a cancel with nothing in between.
	want, each := b.results(func(i int, a algorithm.Booker) algorithm.Result {
		bk.pre = append(bk.pre, algorithm.CloneState(b.states[i]))
		bk.exact = append(bk.exact, algorithm.ExactUndo(a))
		var r algorithm.Result
		b.states[i], r = a.Book(b.states[i], b.now, act, cost)
		bk.post = append(bk.post, algorithm.CloneState(b.states[i]))
		return r
	})
	b.same(t, what, res.Decision(), want, each)
	if got := res.Delay(); got != micros(act-b.now) {
		t.Fatalf("%s: Delay %v, want %v", what, got, micros(act-b.now))
	}
	b.booked = append(b.booked, bk)
}

func (b *bookingMachine) cancel(t *rapid.T) {
	if len(b.booked) == 0 {
		t.Skip("nothing booked")
	}
	i := rapid.IntRange(0, len(b.booked)-1).Draw(t, "reservation")
	bk := b.booked[i]
	b.booked = append(b.booked[:i], b.booked[i+1:]...)
	// With nothing charged since, the states before must come back.
	untouched := bk.cost > 0
	for j := range b.algs {
		untouched = untouched && b.exact(bk, j)
	}
	var before []algorithm.Result
	for j, a := range b.algs {
		before = append(before, a.Peek(bk.pre[j], b.now, 1))
	}
	if err := bk.res.Cancel(context.Background()); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if bk.act > b.now {
		if bk.cost > 0 {
			for j := range b.algs {
				b.giveBack(bk, j)
			}
		}
		bk.adm.gone = true // not used: it no longer counts
	}
	if untouched && bk.act > b.now {
		// Nothing charged since: the store must report each limit as it
		// was before the booking.
		b.peekIs(t, "Peek after the cancel of an untouched booking", before)
	}
	// Cancel twice: nothing more.
	if err := bk.res.Cancel(context.Background()); err != nil {
		t.Fatalf("second Cancel: %v", err)
	}
}

// mine reports whether limit j's state is of the generation booking bk
// charged.
func (b *bookingMachine) mine(bk booked, j int) bool {
	return b.exists[j] && bk.gen[j] == b.gens[j]
}

// exact reports whether limit j's state is still the one booking bk (or
// its last Settle) left: its generation and numbers.
func (b *bookingMachine) exact(bk booked, j int) bool {
	s, post := b.states[j], bk.post[j]
	return b.mine(bk, j) && bk.exact[j] && s.N0 == post.N0 && s.N1 == post.N1 && s.N2 == post.N2
}

// giveBack gives booking bk back to limit j at now as a store does, and
// returns what it gave back: nothing into a state of another generation;
// exactly the state before it while the state is the one it left (what
// the algorithm's exact undo says it gives back); the algorithm's Undo
// otherwise, written only when it gives something back.
func (b *bookingMachine) giveBack(bk booked, j int) int64 {
	if !b.mine(bk, j) {
		return 0
	}
	u := b.algs[j].(algorithm.Undoer)
	if b.exact(bk, j) {
		_, given, _ := u.Undo(algorithm.CloneState(b.states[j]), b.now, bk.act, bk.cost, bk.cost, true)
		b.states[j] = bk.pre[j]
		if bk.made[j] {
			b.exists[j] = false // no state, as before the booking
		}
		return given
	}
	s := b.states[j]
	next, given, _ := u.Undo(s, b.now, bk.act, bk.cost, bk.cost, false)
	if given > 0 && !sameState(next, s) {
		b.states[j] = next
	}
	return given
}

func (b *bookingMachine) refund(t *rapid.T) {
	n := rapid.Int64Range(1, b.limitOf()+2).Draw(t, "refund")
	var got ratelimit.Decision
	var err error
	if b.lim != nil {
		var d ratelimit.Decision
		d, err = b.lim.Refund(context.Background(), b.key, int(n))
		got = d
	} else {
		got, err = b.pol.Refund(context.Background(), b.key, int(n))
	}
	if err != nil {
		t.Fatalf("Refund(%d): %v", n, err)
	}
	want, each := b.results(func(i int, a algorithm.Booker) algorithm.Result {
		if !b.exists[i] {
			return algorithm.Fresh(a.Limit())
		}
		var r algorithm.Result
		b.states[i], r = a.Refund(b.states[i], b.now, n)
		return r
	})
	b.same(t, fmt.Sprintf("Refund(%d)", n), got, want, each)
	if got.Remaining() > b.limitOf() && b.pol == nil {
		t.Fatalf("Refund left %d, above the limit %d", got.Remaining(), b.limitOf())
	}
	b.counted = append(b.counted, &counted{at: b.now, cost: -n})
	for i := range b.booked {
		if b.booked[i].act <= b.now {
			b.booked[i].byKey = true
		}
	}
}

// undo refunds an earlier reservation through its handle
// (Reservation.Refund): before it is due a cancel, after it the
// algorithms' Undo, or exactly the states before it while the key's are
// still the ones it left; nothing into a state of another generation. It
// must say what it gave back: the least any limit gave back. The
// admission no longer counts. A second Refund, and a Cancel after it,
// give nothing.
func (b *bookingMachine) undo(t *rapid.T) {
	if len(b.booked) == 0 {
		t.Skip("nothing booked")
	}
	i := rapid.IntRange(0, len(b.booked)-1).Draw(t, "reservation")
	bk := b.booked[i]
	if bk.byKey {
		t.Skip("refunded by key already")
	}
	b.booked = append(b.booked[:i], b.booked[i+1:]...)
	got, err := bk.res.Refund(context.Background())
	if err != nil {
		t.Fatalf("Refund of a reservation: %v", err)
	}
	want := bk.cost
	if bk.cost > 0 {
		for j := range b.algs {
			want = min(want, b.giveBack(bk, j))
		}
	}
	if got != want {
		t.Fatalf("Refund at +%dµs of %d booked for +%dµs gave back %d, the model %d", b.now-b.start, bk.cost, bk.act-b.start, got, want)
	}
	bk.adm.gone = true
	if again, err := bk.res.Refund(context.Background()); err != nil || again != 0 {
		t.Fatalf("second Refund of a reservation: %d, %v; want 0", again, err)
	}
	if err := bk.res.Cancel(context.Background()); err != nil {
		t.Fatalf("Cancel after Refund: %v", err)
	}
	b.peek(t)
}

// settle makes an earlier reservation's cost a random n
// (Reservation.Settle): below its cost every limit gives back the
// difference as a refund through the handle does (a partial undo, exact
// while the state is the one it left; n = 0 is that refund), above it every
// limit owes the difference (algorithm.Settler.Owe) in its state as it is
// now, one made if it has none. An undo after a Settle gives back exactly
// only while the state is the one the Settle left, and only if the Settle
// found the one the booking left. For the bounds, the admission counts as
// the least it was settled to: what was charged above its booked cost
// only makes the key stricter.
func (b *bookingMachine) settle(t *rapid.T) {
	if len(b.booked) == 0 {
		t.Skip("nothing booked")
	}
	i := rapid.IntRange(0, len(b.booked)-1).Draw(t, "reservation")
	bk := &b.booked[i]
	if bk.byKey {
		t.Skip("refunded by key already")
	}
	n := rapid.Int64Range(0, 2*b.limitOf()+1).Draw(t, "settle to")
	if err := bk.res.Settle(context.Background(), int(n)); settleUnsupported(err) && b.mayRefuseSettle {
		// A store that may refuse a limit's kind (one registered without
		// an --@owe part, on Redis) says so, and changes nothing: the
		// reservation stays as it was.
		b.peek(t)
		return
	} else if err != nil {
		t.Fatalf("Settle(%d) of %d booked for +%dµs: %v", n, bk.cost, bk.act-b.start, err)
	}
	defer b.peek(t)
	switch c := bk.cost; {
	case n == c:
		return
	case n == 0:
		for j := range b.algs {
			b.giveBack(*bk, j)
		}
	case n > c:
		b.init()
		for j, a := range b.algs {
			if !b.exact(*bk, j) {
				bk.exact[j] = false
			}
			if !b.mine(*bk, j) {
				bk.gen[j] = -1 // charged to a state it did not book: nothing of it comes back
			}
			b.states[j], _ = a.(algorithm.Settler).Owe(b.states[j], b.now, bk.act, n-c)
			bk.post[j] = algorithm.CloneState(b.states[j])
		}
	default:
		for j, a := range b.algs {
			if !b.mine(*bk, j) {
				bk.exact[j] = false
				continue
			}
			exact := b.exact(*bk, j)
			bk.exact[j] = exact
			s := b.states[j]
			next, given, _ := a.(algorithm.Undoer).Undo(s, b.now, bk.act, c, c-n, exact)
			if given > 0 && !sameState(next, s) {
				b.states[j] = next
				bk.post[j] = algorithm.CloneState(next)
			}
		}
	}
	bk.cost = n
	bk.adm.cost = min(bk.adm.cost, n)
}

// reset forgets the key: every limit's state goes, and the next charge
// makes one of a new generation, into which no earlier reservation gives
// anything back. The admissions before it no longer count.
func (b *bookingMachine) reset(t *rapid.T) {
	var err error
	if b.lim != nil {
		err = b.lim.Reset(context.Background(), b.key)
	} else {
		err = b.pol.Reset(context.Background(), b.key)
	}
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	for j := range b.algs {
		b.exists[j] = false
		b.delayed[j] = false
	}
	for _, c := range b.counted {
		c.gone = true
	}
	b.peek(t)
}

// testBookingErrors checks the booking operations' errors: bad costs, a
// reservation of another limiter, a refund of less than 1.
func testBookingErrors(t *testing.T, st store.Store[string]) {
	ctx := context.Background()
	k := kinds[0]
	alg, err := k.withLimit(5)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.UnixMicro(epoch))
	lim, err := ratelimit.New(alg, st, ratelimit.WithClock(clk), ratelimit.WithName("errs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, -1, 6, math.MaxInt32} {
		if r, err := lim.ReserveN(ctx, "k", n, time.Second); err == nil || r != nil {
			t.Errorf("ReserveN(%d) = %v, %v; want an error", n, r, err)
		} else if !errors.Is(err, ratelimit.ErrInvalidCost) && !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
			t.Errorf("ReserveN(%d): %v, want ErrInvalidCost or ErrCostExceedsLimit", n, err)
		}
	}
	if _, err := lim.Refund(ctx, "k", 0); !errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Errorf("Refund(0): %v, want ErrInvalidCost", err)
	}
	// Nothing was charged by the refused calls.
	if d, err := lim.Peek(ctx, "k"); err != nil || d.Remaining() != 5 {
		t.Errorf("Peek after refused calls: %v, %v; want 5 left", d, err)
	}
}

// testFailedBookingWritesNothing books on a key of a Policy whose bucket
// has no state (a cancelled booking made it, then gave it back) and whose
// log refuses the delay asked for: nothing is booked, and the bucket must
// still have no state, as a Redis script that writes nothing leaves it.
// The clock steps back between the calls (another server's), which is
// where a state made at an earlier call's instant and one made at the
// next call's differ: the last booking's waits must be those of a bucket
// that is fresh at its own instant.
func testFailedBookingWritesNothing(t *testing.T, st store.Store[string]) {
	ctx := context.Background()
	bucket, log, clk := bucketAndLog(t)
	p, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Name: "bucket", Algorithm: bucket}, {Name: "log", Algorithm: log}},
		ratelimit.WithName("fb"), ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.ReserveN(ctx, "fb", 1, -1)
	if err != nil || !first.OK() {
		t.Fatalf("first ReserveN: %v, %v", first, err)
	}
	clk.Advance(-2 * time.Microsecond)
	if err := first.Cancel(ctx); err != nil { // the bucket's state goes; the log's stays
		t.Fatalf("Cancel: %v", err)
	}
	if r, err := p.ReserveN(ctx, "fb", 1, 0); err != nil || r.OK() {
		t.Fatalf("ReserveN with no delay while the log is full: %v, %v; want it refused", r, err)
	}
	clk.Advance(-time.Microsecond)
	now := epoch - 3
	last, err := p.ReserveN(ctx, "fb", 1, -1)
	if err != nil || !last.OK() {
		t.Fatalf("last ReserveN: %v, %v", last, err)
	}
	act := now + last.Delay().Microseconds()
	_, want := bucket.Book(bucket.Init(algorithm.State{}, now), now, act, 1)
	limits := last.Decision()
	if got := limits.Limits()[0]; got.ResetAfter() != micros(want.ResetAfter) || got.RetryAfter() != micros(want.RetryAfter) {
		t.Fatalf("the bucket's booking at %dµs: %v, want %+v (a bucket fresh at its instant)", now-epoch, got, want)
	}
}

// testRefusedTakeWritesNothing has a Policy refuse a request because of a
// limit whose key is full (a log, filled by a Limiter of its own under the
// same state ID), while its other limit (a bucket) has no state: the
// bucket must still have none afterwards, so that a Limiter of the bucket
// alone, deciding after the clock stepped back, finds a key fresh at its
// own instant (a Redis script that refuses writes nothing).
func testRefusedTakeWritesNothing(t *testing.T, st store.Store[string]) {
	ctx := context.Background()
	bucket, log, clk := bucketAndLog(t)
	p, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Name: "log", Algorithm: log}, {Name: "bucket", Algorithm: bucket}},
		ratelimit.WithName("rt"), ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	logOnly, err := ratelimit.New(log, st, ratelimit.WithClock(clk), ratelimit.WithName("rt/log"))
	if err != nil {
		t.Fatal(err)
	}
	bucketOnly, err := ratelimit.New(bucket, st, ratelimit.WithClock(clk), ratelimit.WithName("rt/bucket"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := logOnly.Allow(ctx, "rt"); err != nil || !d.Allowed() {
		t.Fatalf("the log's Allow: %v, %v", d, err)
	}
	clk.Advance(-time.Microsecond)
	if d, err := p.Allow(ctx, "rt"); err != nil || d.Allowed() {
		t.Fatalf("the Policy's Allow while the log is full: %v, %v; want it refused", d, err)
	}
	clk.Advance(-time.Microsecond)
	d, err := bucketOnly.Allow(ctx, "rt")
	if err != nil || !d.Allowed() || d.ResetAfter() != time.Second {
		t.Fatalf("the bucket's Allow after the Policy's refusal: %v, %v; want it admitted with a reset after 1s (fresh at its instant)", d, err)
	}
}

// bucketAndLog returns a bucket of 1 per second, a log of 1 per µs, and a
// fake clock at epoch: a Policy of them has a limit that refuses for a µs
// and one whose state tells when it was made.
func bucketAndLog(t *testing.T) (algorithm.Booker, algorithm.Algorithm, *clock.Fake) {
	t.Helper()
	bucket, err := bucketPer(1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	booker, ok := bucket.(algorithm.Booker)
	if !ok {
		t.Fatalf("%v books nothing", bucket)
	}
	log, err := logPer(1, time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	return booker, log, clock.NewFake(time.UnixMicro(epoch))
}
