package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"pgregory.net/rapid"
)

// testReconfigure runs random sequences of decisions on a few keys of st
// while the limit changes (Limiter.SetAlgorithm to another configuration
// of the same kind, under a kept state ID, with a random rule; or, for a
// limiter that resets on mismatch, to another kind), and checks every
// decision against a reference that carries each key's state by the
// algorithms' own Inherit (another kind's by algorithm.Carry), as the
// store contract says: a state written under another Tag is converted at
// the decision's instant, and only an admission writes it back.
//
// A key whose state its writer would report fresh may have been dropped
// by the store (a memory sweep, a Redis TTL), so for such a key a fresh
// state is accepted as well as the converted one; the reference goes on
// with the one the store's answer matches.
func testReconfigure(t *testing.T, k kind, st store.Store[string]) {
	seq := 0
	rapid.Check(t, func(rt *rapid.T) {
		seq++
		s := k.draw(rt)
		rule := algorithm.AsIs
		if k.proportional && rapid.Bool().Draw(rt, "proportional") {
			rule = algorithm.Proportional
		}
		start := drawStart(rt)
		clk := clock.NewFake(time.UnixMicro(start))
		// Sometimes the limiter starts foreign states afresh (which changes
		// nothing here: every state is of a kind it reads); it may switch
		// to another kind of algorithm mid-sequence, which carries what
		// each key had used.
		afresh := rapid.Bool().Draw(rt, "reset on mismatch")
		opts := []ratelimit.Option{ratelimit.WithClock(clk),
			ratelimit.WithName(fmt.Sprintf("rc%d", seq)), ratelimit.WithInheritance(rule)}
		if afresh {
			opts = append(opts, ratelimit.WithResetOnMismatch())
		}
		lim, err := ratelimit.New(s.alg, st, opts...)
		if err != nil {
			rt.Fatalf("ratelimit.New(%v): %v", s.alg, err)
		}
		r := &reconfig{k: k, s: s, rule: rule, lim: lim, clk: clk, start: start, now: start,
			keys: map[string]*carried{}, gens: map[string]int{}, seq: seq}
		actions := map[string]func(*rapid.T){
			"advance":     r.capped(r.advance),
			"allow":       r.capped(r.allow),
			"peek":        r.capped(r.peek),
			"reset":       r.capped(r.reset),
			"reconfigure": r.capped(r.reconfigure),
			"reserve":     r.capped(r.reserve),
			"cancel":      r.capped(r.cancel),
			"refund":      r.capped(r.refund),
		}
		actions["switch"] = r.capped(r.switchKind)
		rt.Repeat(actions)
	})
}

type reconfig struct {
	k     kind
	s     setup // the configuration in force
	rule  algorithm.Rule
	lim   *ratelimit.Limiter[string]
	clk   *clock.Fake
	start int64
	now   int64
	steps int
	seq   int
	keys  map[string]*carried // by short name
	// gens is each key's state's generation: it moves on when the state
	// goes (Reset, a cancel that gives back the booking that made it), so
	// that a state made after is another generation.
	gens  map[string]int
	books []pendingBooking // made by reserve, not yet cancelled
}

// pendingBooking is a booking the reference may cancel: the key's carried
// state before and after it (nil when the key had none).
type pendingBooking struct {
	name      string
	res       *ratelimit.Reservation[string]
	act, cost int64
	pre, post *carried
	gen       int // the generation of the state it charged
}

// carried is the reference's state of one key: the state as its writer
// left it, and the writer.
type carried struct {
	s      algorithm.State
	writer algorithm.Algorithm
}

func (r *reconfig) capped(action func(*rapid.T)) func(*rapid.T) {
	return func(t *rapid.T) {
		if r.steps >= maxSteps {
			return
		}
		action(t)
		r.steps++
	}
}

func (r *reconfig) at() string { return fmt.Sprintf("+%dµs", r.now-r.start) }

func (r *reconfig) key(t *rapid.T) (string, string) {
	name := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "key")
	return name, fmt.Sprintf("rc%d:%s", r.seq, name)
}

func (r *reconfig) advance(t *rapid.T) {
	d := drawMove(t, r.s, "advance µs")
	r.clk.Advance(micros(d))
	r.now += d
	t.Logf("%s: clock moved", r.at())
}

func (r *reconfig) reconfigure(t *rapid.T) {
	next := r.k.draw(t)
	if err := r.lim.SetAlgorithm(next.alg); err != nil {
		t.Fatalf("SetAlgorithm(%v): %v", next.alg, err)
	}
	t.Logf("%s: limit changed to %v (%v)", r.at(), next.alg, r.rule)
	r.s = next
}

// switchKind puts an algorithm of another kind in place: every key's
// state is then another kind's, and reads as a fresh state charged with
// what it had used (algorithm.Carry) until an admission replaces it.
func (r *reconfig) switchKind(t *rapid.T) {
	var others []kind
	for _, k := range kinds {
		if k.name != r.k.name && (r.rule == algorithm.AsIs || k.proportional) {
			others = append(others, k)
		}
	}
	k := rapid.SampledFrom(others).Draw(t, "kind")
	next := k.draw(t)
	if err := r.lim.SetAlgorithm(next.alg); err != nil {
		t.Fatalf("SetAlgorithm(%v) starting foreign states afresh: %v", next.alg, err)
	}
	t.Logf("%s: algorithm switched to %v", r.at(), next.alg)
	r.k, r.s = k, next
}

// candidates returns the states the store may decide key's request on,
// in the terms of the algorithm in force: the carried one converted, and
// a fresh one when the writer would report the carried state fresh.
func (r *reconfig) candidates(t *rapid.T, c *carried) []algorithm.State {
	alg := r.s.alg
	fresh := alg.Init(algorithm.State{}, r.now)
	if c == nil {
		return []algorithm.State{fresh}
	}
	s := copyState(c.s)
	from, _ := algorithm.TagOf(c.writer)
	to, _ := algorithm.TagOf(alg)
	switch {
	case from.Kind != to.Kind: // another kind's: what it had used carries
		s = algorithm.Carry(alg, from, s, r.now)
	case from != to:
		inh, ok := alg.(algorithm.Inheritor)
		if !ok {
			t.Fatalf("%v reads states of %v but is no algorithm.Inheritor", alg, c.writer)
		}
		s = inh.Inherit(from, s, r.now, r.rule)
	}
	if c.writer.Peek(copyState(c.s), r.now, 1).ResetAfter == 0 {
		return []algorithm.State{s, fresh}
	}
	return []algorithm.State{s}
}

// copyState returns s with a Log of its own, so that a candidate's Take
// does not change the carried state.
func copyState(s algorithm.State) algorithm.State {
	if s.Log != nil {
		l := *s.Log
		l.Entries = append([]algorithm.Entry(nil), s.Log.Entries...)
		s.Log = &l
	}
	return s
}

// match returns the index of the result, among the candidates', that got
// shows, or fails.
func (r *reconfig) match(t *rapid.T, call string, cost int64, got ratelimit.Decision, err error, rs []algorithm.Result) int {
	t.Logf("%s: %s = %s, error %v", r.at(), call, show(got), err)
	if err != nil {
		t.Fatalf("%s: %s: %v", r.at(), call, err)
	}
	if err := sanity(got, r.s.limit, cost); err != nil {
		t.Fatalf("%s: %s: %v", r.at(), call, err)
	}
	var want []string
	for i, res := range rs {
		d := ratelimit.DecisionFields{Allowed: res.Allowed(), Limit: r.s.limit, Remaining: res.Remaining,
			RetryAfter: micros(res.RetryAfter), ResetAfter: micros(res.ResetAfter)}.Decision()
		if d == got {
			return i
		}
		want = append(want, show(d))
	}
	t.Fatalf("%s: %s: got %s, want one of %v (the state carried by %v, or fresh when its writer would say so)", r.at(), call, show(got), want, r.rule)
	return -1
}

func (r *reconfig) allow(t *rapid.T) {
	name, key := r.key(t)
	cost := rapid.Int64Range(1, r.s.limit).Draw(t, "cost")
	got, err := r.lim.AllowN(t.Context(), key, int(cost))
	cands := r.candidates(t, r.keys[name])
	next := make([]algorithm.State, len(cands))
	rs := make([]algorithm.Result, len(cands))
	for i, c := range cands {
		next[i], rs[i] = r.s.alg.Take(c, r.now, cost)
	}
	i := r.match(t, fmt.Sprintf("AllowN(%s, %d)", name, cost), cost, got, err, rs)
	if rs[i].Allowed() {
		r.keys[name] = &carried{s: next[i], writer: r.s.alg}
	}
}

// reserve books a request within a random delay. The store converts the
// key's state first, as for a decision, and a booking then stays counted
// under every later limit: the reference books on the state it carries,
// and converts the booked state at the next call as any other.
func (r *reconfig) reserve(t *rapid.T) {
	name, key := r.key(t)
	cost := rapid.Int64Range(1, r.s.limit).Draw(t, "cost")
	maxDelay := rapid.OneOf(rapid.Int64Range(0, 4*r.s.period), rapid.Int64Range(0, 2*r.s.period*r.s.limit)).Draw(t, "max delay µs")
	res, err := r.lim.ReserveN(t.Context(), key, int(cost), micros(maxDelay))
	if err != nil {
		t.Fatalf("%s: ReserveN(%s, %d, %dµs): %v", r.at(), name, cost, maxDelay, err)
	}
	b, ok := r.s.alg.(algorithm.Booker)
	if !ok {
		t.Fatalf("%v books through the limiter but is no algorithm.Booker", r.s.alg)
	}
	cands := r.candidates(t, r.keys[name])
	until := algorithm.BookingDeadline(r.now, holdsNow([]algorithm.Algorithm{r.s.alg}, maxDelay))
	next := make([]algorithm.State, len(cands))
	booked := make([]bool, len(cands))
	rs := make([]algorithm.Result, len(cands))
	for i, c := range cands {
		var act int64
		act, booked[i] = algorithm.EarliestAll([]algorithm.Algorithm{b}, []algorithm.State{c}, r.now, until, cost)
		if booked[i] {
			next[i], rs[i] = b.Book(c, r.now, act, cost)
		} else {
			rs[i] = b.Peek(c, r.now, cost)
			rs[i].RetryAfter = max(rs[i].RetryAfter, act-r.now)
		}
	}
	i := r.match(t, fmt.Sprintf("ReserveN(%s, %d, %dµs)", name, cost, maxDelay), cost, res.Decision(), err, rs)
	if res.OK() != booked[i] {
		t.Fatalf("%s: ReserveN(%s, %d, %dµs): OK %v, the reference %v", r.at(), name, cost, maxDelay, res.OK(), booked[i])
	}
	if booked[i] {
		var pre *carried
		if c := r.keys[name]; c != nil && (len(cands) == 1 || i == 0) { // not read as fresh
			pre = &carried{s: copyState(c.s), writer: c.writer}
		}
		r.keys[name] = &carried{s: next[i], writer: r.s.alg}
		r.books = append(r.books, pendingBooking{name: name, res: res, act: r.now + res.Delay().Microseconds(), cost: cost,
			pre: pre, post: &carried{s: copyState(next[i]), writer: r.s.alg}, gen: r.gens[name]})
	}
}

// cancel gives a pending booking back, under the limit that booked it
// (a Reservation keeps it, whatever limit is in force by then). Before its
// instant, a key whose state is still the one the booking left gets the
// one before back (as it was kept, under its writer; none if it had none),
// as stores undo a booking exactly; any other state is converted to the
// booking limit's terms, which gives back what the booking's units left
// unused (algorithm.Undoer's Undo, before its instant Unused) and writes
// it only when that gives something back.
func (r *reconfig) cancel(t *rapid.T) {
	if len(r.books) == 0 {
		t.Skip("nothing booked")
	}
	j := rapid.IntRange(0, len(r.books)-1).Draw(t, "booking")
	bk := r.books[j]
	next, exact, dropped := afterCancel(r.keys[bk.name], bk.pre, bk.post, r.now, bk.act, bk.cost, bk.gen == r.gens[bk.name])
	if dropped {
		t.Skip("the state may have been dropped") // not modelled: either way gives nothing back
	}
	r.books = append(r.books[:j], r.books[j+1:]...)
	if err := bk.res.Cancel(t.Context()); err != nil {
		t.Fatalf("%s: Cancel of %d booked on %s for +%dµs: %v", r.at(), bk.cost, bk.name, bk.act-r.start, err)
	}
	t.Logf("%s: cancelled %d booked on %s for +%dµs (exactly: %v)", r.at(), bk.cost, bk.name, bk.act-r.start, exact)
	if next == nil {
		r.forget(bk.name)
	} else {
		r.keys[bk.name] = next
	}
}

// afterCancel returns what a cancel at now leaves of a limit's carried
// state c (nil: none), for a booking of cost at act that left post under
// the limit that booked it (post.writer), and found pre before it (nil:
// none); mine says c is of the generation the booking charged (not made
// again after Reset): another generation gets nothing back. Before act,
// where c is still what the booking left, pre comes back exactly (as
// stores undo a booking); a state the booking limit's Tag wrote gives
// back what the booking's units left unused (algorithm.Undoer's Undo,
// before its instant Unused), written only when that gives something
// back; a state written under other parameters or by another kind gives
// nothing back (it would be written back in the booking's terms, which
// cut what it holds beyond them). From act on, the booking is used and c stays. exact reports the
// exact undo; dropped, a state its writer would report fresh, which the
// store may have dropped (not modelled: either way gives nothing back).
func afterCancel(c, pre, post *carried, now, act, cost int64, mine bool) (next *carried, exact, dropped bool) {
	if act <= now || c == nil || !mine {
		return c, false, false
	}
	booker := post.writer
	if sameTag(booker, c.writer) && algorithm.ExactUndo(booker) && (pre == nil || sameKind(pre.writer, booker)) &&
		c.s.N0 == post.s.N0 && c.s.N1 == post.s.N1 && c.s.N2 == post.s.N2 {
		if pre == nil {
			return nil, true, false
		}
		return &carried{s: copyState(pre.s), writer: pre.writer}, true, false
	}
	if c.writer.Peek(copyState(c.s), now, 1).ResetAfter == 0 {
		return c, false, true
	}
	if !sameTag(c.writer, booker) {
		// Written under other parameters, or by another kind: given back
		// in the booking's terms and written so, it would lose what it
		// holds beyond them; nothing is given back.
		return c, false, false
	}
	s := copyState(c.s)
	if refunded, given, _ := booker.(algorithm.Undoer).Undo(copyState(s), now, act, cost, cost, false); given > 0 && !sameState(refunded, s) {
		return &carried{s: refunded, writer: booker}, false, false // written only when something comes back
	}
	return c, false, false
}

// refund gives units back through the limit in force, on a state it
// wrote (its own Tag), and writes it only when that gave something back,
// as the scripts do; a state with nothing to give back stays as its
// writer left it, and so does one written under other parameters or by
// another kind (read converted: nothing is given back, since written back
// in the limit's terms it would lose what it holds beyond them).
func (r *reconfig) refund(t *rapid.T) {
	name, key := r.key(t)
	n := rapid.Int64Range(1, r.s.limit+2).Draw(t, "refund")
	got, err := r.lim.Refund(t.Context(), key, int(n))
	cands := r.candidates(t, r.keys[name])
	b, ok := r.s.alg.(algorithm.Booker)
	if !ok {
		t.Fatalf("%v refunds through the limiter but is no algorithm.Booker", r.s.alg)
	}
	next := make([]algorithm.State, len(cands))
	rs := make([]algorithm.Result, len(cands))
	other := false
	if c := r.keys[name]; c != nil {
		from, _ := algorithm.TagOf(c.writer)
		to, _ := algorithm.TagOf(r.s.alg)
		other = from != to // written under other parameters: nothing is given back
	}
	for i, c := range cands {
		if other {
			next[i], rs[i] = c, r.s.alg.Peek(copyState(c), r.now, 1)
			continue
		}
		next[i], rs[i] = b.Refund(copyState(c), r.now, n)
	}
	i := r.match(t, fmt.Sprintf("Refund(%s, %d)", name, n), 0, got, err, rs) // reported as a Peek
	c := cands[i]
	if !sameState(next[i], c) {
		r.keys[name] = &carried{s: next[i], writer: r.s.alg}
	}
}

// sameTag reports whether a and b write states under one Tag: a store
// tells writers apart by their Tag alone (the header), so two limits of
// one configuration are one writer.
func sameTag(a, b algorithm.Algorithm) bool {
	ta, okA := algorithm.TagOf(a)
	tb, okB := algorithm.TagOf(b)
	return okA && okB && ta == tb
}

// sameKind reports whether a and b are algorithms of one Kind: a booking
// on another kind's state (read carried) is not undone exactly.
func sameKind(a, b algorithm.Algorithm) bool {
	ta, okA := algorithm.TagOf(a)
	tb, okB := algorithm.TagOf(b)
	return okA && okB && ta.Kind == tb.Kind
}

// sameState reports whether a Refund returned its state as it was given
// (nothing to give back), which a store then leaves unwritten.
func sameState(a, b algorithm.State) bool {
	return a.N0 == b.N0 && a.N1 == b.N1 && a.N2 == b.N2 && sameLog(a.Log, b.Log)
}

// sameLog reports whether two logs hold the same entries from their heads.
func sameLog(a, b *algorithm.Log) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := a.Entries[a.Head:], b.Entries[b.Head:]
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

func (r *reconfig) peek(t *rapid.T) {
	name, key := r.key(t)
	got, err := r.lim.Peek(t.Context(), key)
	cands := r.candidates(t, r.keys[name])
	rs := make([]algorithm.Result, len(cands))
	for i, c := range cands {
		rs[i] = r.s.alg.Peek(c, r.now, 1)
	}
	r.match(t, fmt.Sprintf("Peek(%s)", name), 0, got, err, rs)
}

func (r *reconfig) reset(t *rapid.T) {
	name, key := r.key(t)
	if err := r.lim.Reset(t.Context(), key); err != nil {
		t.Fatalf("Reset(%s): %v", name, err)
	}
	r.forget(name)
	t.Logf("%s: Reset(%s)", r.at(), name)
}

// forget drops the key's state: the next one is another generation.
func (r *reconfig) forget(name string) {
	delete(r.keys, name)
	r.gens[name]++
}

// testMismatch puts every other kind's algorithm on a key's state under
// one name: each decision reads the key as a fresh state of its own
// charged with what the other kind's state had used (algorithm.Carry: 2
// of 5 used, so 5 of 7 remain), with or without WithResetOnMismatch
// (which only starts afresh a state no algorithm of this module can
// read), and leaves the state as it was until an admission replaces it.
func testMismatch(t *testing.T, st store.Store[string]) {
	for _, a := range kinds {
		for _, b := range kinds {
			if a.name == b.name {
				continue
			}
			testMismatchPair(t, st, a, b)
		}
	}
}

// testMismatchPair is testMismatch for a's state read by b, under one name.
func testMismatchPair(t *testing.T, st store.Store[string], a, b kind) {
	ctx := t.Context()
	name := a.name + "→" + b.name
	t.Run(name, func(t *testing.T) {
		algA, errA := a.withLimit(5)
		algB, errB := b.withLimit(7)
		if err := errors.Join(errA, errB); err != nil {
			t.Fatal(err)
		}
		clk := clock.NewFake(time.UnixMicro(epoch))
		id := "mm:" + a.name + ":" + b.name
		key := "mismatch:" + a.name + ":" + b.name
		first, err := ratelimit.New(algA, st, ratelimit.WithClock(clk), ratelimit.WithName(id))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := first.AllowN(ctx, key, 2); err != nil {
			t.Fatal(err)
		}
		before, err := first.Peek(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, opts := range [][]ratelimit.Option{nil, {ratelimit.WithResetOnMismatch()}} {
			second, err := ratelimit.New(algB, st, append(opts, ratelimit.WithClock(clk), ratelimit.WithName(id))...)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := second.Peek(ctx, key); err != nil || !d.Allowed() || d.Remaining() != 5 {
				t.Errorf("Peek carrying the 2 used into a limit of 7 (options %d): %s, %v; want 5 left", len(opts), show(d), err)
			}
			if d, err := second.AllowN(ctx, key, 6); err != nil || d.Allowed() {
				t.Errorf("AllowN(6) carrying the 2 used into a limit of 7 (options %d): %s, %v; want it denied", len(opts), show(d), err)
			}
		}
		if after, err := first.Peek(ctx, key); err != nil || after != before {
			t.Errorf("the state after denials by another kind: %s, %v; want it unchanged, %s", show(after), err, show(before))
		}
		second, err := ratelimit.New(algB, st, ratelimit.WithClock(clk), ratelimit.WithName(id))
		if err != nil {
			t.Fatal(err)
		}
		d, err := second.AllowN(ctx, key, 3)
		if err != nil || !d.Allowed() || d.Remaining() != 2 {
			t.Errorf("AllowN(3) carrying the 2 used into a limit of 7: %s, %v; want admitted, 2 left", show(d), err)
		}
		// The state is now the second algorithm's: the first one reads it
		// carried in turn, 5 used of its 5.
		if d, err := first.Peek(ctx, key); err != nil || d.Remaining() != 0 {
			t.Errorf("the first algorithm after the state was replaced: %s, %v; want the 5 used carried, none left", show(d), err)
		}
	})
}

// testLogRefundThenWiderWindow widens a sliding log's window (1 per µs to
// 2 per 2 µs) after two admissions a µs apart, and refunds under the
// wider window: the older admission, which the narrower window had
// already forgotten, stays forgotten, through a booking and the decision
// after it. (The script kept that admission as the log's base inside the
// new window, counted it again, and denied the last Allow.) The refund
// gives nothing back, since the narrower window wrote the key's state
// (issue 48: a give-back is written in the terms of the state it gives
// back to); the booking then converts the state.
func testLogRefundThenWiderWindow(t *testing.T, st store.Store[string]) {
	ctx := context.Background()
	narrow, err := logPer(1, time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	wide, err := logOf(2, 2*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.UnixMicro(epoch))
	lim, err := ratelimit.New(narrow, st, ratelimit.WithClock(clk), ratelimit.WithName("lw"))
	if err != nil {
		t.Fatal(err)
	}
	step := func(what string, d ratelimit.Decision, err error, allowed bool, remaining int64) {
		t.Helper()
		if err != nil || d.Allowed() != allowed || d.Remaining() != remaining {
			t.Fatalf("%s: %v, %v; want allowed=%v with %d remaining", what, d, err, allowed, remaining)
		}
	}
	d, err := lim.Allow(ctx, "lw")
	step("Allow at 0", d, err, true, 0)
	clk.Advance(time.Microsecond)
	d, err = lim.Allow(ctx, "lw")
	step("Allow at 1µs", d, err, true, 0)
	if err := lim.SetAlgorithm(wide); err != nil {
		t.Fatal(err)
	}
	d, err = lim.Refund(ctx, "lw", 1)
	step("Refund of 1 under 2 per 2µs (the admission at 0 is forgotten; the state is the narrower window's: nothing comes back)", d, err, true, 1)
	r, err := lim.ReserveN(ctx, "lw", 1, 0)
	if err != nil || !r.OK() {
		t.Fatalf("ReserveN: %v, %v", r, err)
	}
	step("ReserveN of 1", r.Decision(), nil, true, 0)
	d, err = lim.Refund(ctx, "lw", 1)
	step("Refund of 1 on the wider window's own state", d, err, true, 1)
	d, err = lim.Allow(ctx, "lw")
	step("Allow after it", d, err, true, 0)
}

// testLogRefundUnderNarrowerWindow admits at 0 and at 1 µs on a log of
// 2 per 2 µs, narrows it to 1 per µs and refunds 1 by key there, then
// widens it back. The refund gives nothing back: the key's state is the
// wider window's, and a give-back is written in the terms of the state it
// gives back to (issue 48). Widened back, the log reads its own state,
// both admissions counting, and a refund there gives one back. (Before,
// the refund was written in the narrower window's terms, and once kept
// the wider window's header, so that the wider window read its own old
// admission as live.)
func testLogRefundUnderNarrowerWindow(t *testing.T, st store.Store[string]) {
	ctx := context.Background()
	wide, err := logPer(2, 2*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	narrow, err := logPer(1, time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.UnixMicro(epoch))
	lim, err := ratelimit.New(wide, st, ratelimit.WithClock(clk), ratelimit.WithName("ln"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(ctx, "ln"); err != nil || !d.Allowed() {
		t.Fatalf("Allow at 0: %v, %v", d, err)
	}
	clk.Advance(time.Microsecond)
	if d, err := lim.Allow(ctx, "ln"); err != nil || !d.Allowed() {
		t.Fatalf("Allow at 1µs: %v, %v", d, err)
	}
	if err := lim.SetAlgorithm(narrow); err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Refund(ctx, "ln", 1); err != nil || d.Remaining() != 0 {
		t.Fatalf("Refund of 1 under 1 per µs: %v, %v; want nothing given back, 0 remaining", d, err)
	}
	if err := lim.SetAlgorithm(wide); err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(ctx, "ln"); err != nil || d.Allowed() {
		t.Fatalf("Allow under 2 per 2µs again: %v, %v; want it denied (both admissions count)", d, err)
	}
	if d, err := lim.Refund(ctx, "ln", 1); err != nil || d.Remaining() != 1 {
		t.Fatalf("Refund of 1 under 2 per 2µs: %v, %v; want 1 remaining", d, err)
	}
	if d, err := lim.Allow(ctx, "ln"); err != nil || !d.Allowed() || d.Remaining() != 0 {
		t.Fatalf("Allow after the refund under 2 per 2µs: %v, %v; want it admitted with 0 remaining", d, err)
	}
}

// testLogRefundKeepsKnownAdmission admits 1 on a log of 3 per 2 µs and
// books 3 for 2 µs later, narrows the log to 1 per µs a µs on and refunds
// the booking there through its Reservation, then widens it to 20 per
// 2 µs: the admission at 0 still counts, 19 remaining. (It refunded 1 by
// key under the narrow window, where the script's refund moved the
// admission at 0 to the clock less the narrow window, and every later
// reader took it for forgotten: found by CI on a Redis Cluster, by the
// reconfigure machine. A refund by key no longer gives back a booking
// not yet due, and a Reservation gives back through the table that
// booked it, under the limit it was booked under.)
func testLogRefundKeepsKnownAdmission(t *testing.T, st store.Store[string]) {
	ctx := context.Background()
	mk := func(limit int64, w time.Duration) algorithm.Algorithm {
		l, err := logOf(limit, w)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	clk := clock.NewFake(time.UnixMicro(epoch))
	lim, err := ratelimit.New(mk(3, 2*time.Microsecond), st, ratelimit.WithClock(clk), ratelimit.WithName("lk"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(ctx, "lk"); err != nil || !d.Allowed() {
		t.Fatalf("Allow at 0: %v, %v", d, err)
	}
	booked, err := lim.ReserveN(ctx, "lk", 3, 2*time.Microsecond)
	if err != nil || !booked.OK() || booked.Delay() != 2*time.Microsecond {
		t.Fatalf("ReserveN of 3 within 2µs: %v, %v; want it booked for 2µs", booked, err)
	}
	if err := lim.SetAlgorithm(mk(1, time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Microsecond)
	if _, err := booked.Refund(ctx); err != nil {
		t.Fatalf("Refund of the booking under 1 per µs at 1µs: %v", err)
	}
	if err := lim.SetAlgorithm(mk(20, 2*time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Peek(ctx, "lk"); err != nil || d.Remaining() != 19 {
		t.Fatalf("Peek under 20 per 2µs at 1µs: %v, %v; want 19 remaining (the admission at 0)", d, err)
	}
}

// testCancelKeepsAnotherKindsState books on a bucket that resets on
// mismatch, switches the limiter to a sliding log under the same state ID
// (which carries the bucket's 3 used units, the booked one included, and
// whose admission replaces the bucket's state), and cancels the booking:
// the log's state is another kind's, which gives nothing back, so nothing
// is written, and the log's count stays. (The memory store wrote a fresh
// bucket over it.)
func testCancelKeepsAnotherKindsState(t *testing.T, st store.Store[string]) {
	ctx := context.Background()
	bucket, err := bucketPer(2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	log, err := logPer(5, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.UnixMicro(epoch))
	lim, err := ratelimit.New(bucket, st, ratelimit.WithClock(clk), ratelimit.WithName("ck"), ratelimit.WithResetOnMismatch())
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim.AllowN(ctx, "ck", 2); err != nil || !d.Allowed() {
		t.Fatalf("AllowN(2): %v, %v", d, err)
	}
	r, err := lim.ReserveN(ctx, "ck", 1, time.Second)
	if err != nil || !r.OK() {
		t.Fatalf("ReserveN: %v, %v", r, err)
	}
	if err := lim.SetAlgorithm(log); err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(ctx, "ck"); err != nil || d.Remaining() != 1 {
		t.Fatalf("the log's Allow: %v, %v; want 1 of 5 remaining (the bucket's 2 and 1 booked carried)", d, err)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if d, err := lim.Peek(ctx, "ck"); err != nil || d.Remaining() != 1 {
		t.Fatalf("the log's Peek after the bucket's cancel: %v, %v; want its count kept (1 of 5 remaining)", d, err)
	}
}

// testLogRefundsAcrossWidenings refunds on a sliding log under a window
// wider than its writer's, twice: each gives nothing back (a give-back is
// written in the terms of the state it gives back to, issue 48), and what
// the narrower window forgot (an admission before its window) stays
// forgotten under both. (Before, the refunds were written in the wider
// windows' terms: the script kept that admission as the log's base at the
// first window's cut, which the second window's cut lies before, counted
// it again and gave back one unit too few.)
func testLogRefundsAcrossWidenings(t *testing.T, st store.Store[string]) {
	ctx := context.Background()
	mk := func(limit int64, window time.Duration) algorithm.Algorithm {
		l, err := logOf(limit, window)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	clk := clock.NewFake(time.UnixMicro(epoch))
	lim, err := ratelimit.New(mk(1, time.Microsecond), st, ratelimit.WithClock(clk), ratelimit.WithName("lr"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(ctx, "lr"); err != nil || !d.Allowed() {
		t.Fatalf("Allow at 0: %v, %v", d, err)
	}
	clk.Advance(time.Microsecond)
	if err := lim.SetAlgorithm(mk(3, time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	if r, err := lim.ReserveN(ctx, "lr", 3, 0); err != nil || !r.OK() {
		t.Fatalf("ReserveN(3) at 1µs: %v, %v", r, err)
	}
	clk.Advance(time.Microsecond)
	if err := lim.SetAlgorithm(mk(1, 2*time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Refund(ctx, "lr", 1); err != nil || d.Remaining() != 0 || d.RetryAfter() != time.Microsecond {
		t.Fatalf("Refund(1) under 1 per 2µs: %v, %v; want nothing given back (the 3 at 1µs count until 3µs), none remaining", d, err)
	}
	if err := lim.SetAlgorithm(mk(1, 3*time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Refund(ctx, "lr", 2); err != nil || d.Remaining() != 0 || d.RetryAfter() != 2*time.Microsecond {
		t.Fatalf("Refund(2) under 1 per 3µs: %v, %v; want nothing given back (the 3 at 1µs count until 4µs; the admission at 0 stays forgotten)", d, err)
	}
}
