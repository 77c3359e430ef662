package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"pgregory.net/rapid"
)

// sentinels are the errors whose identity two stores must agree on.
var sentinels = []error{
	ratelimit.ErrInvalidConfig,
	ratelimit.ErrInvalidCost,
	ratelimit.ErrCostExceedsLimit,
	ratelimit.ErrClockUnsupported,
	ratelimit.ErrStoreUnavailable,
}

// sameError reports whether a and b are both nil, or both non-nil and
// match the same sentinels. Their messages may differ.
func sameError(a, b error) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	for _, s := range sentinels {
		if errors.Is(a, s) != errors.Is(b, s) {
			return false
		}
	}
	return true
}

// twins are limiters for the same algorithm over the two stores compared,
// on fake clocks kept at the same time.
type twins struct {
	s      setup
	a, b   *ratelimit.Limiter[string]
	ca, cb *clock.Fake
	start  int64
	now    int64
	steps  int
	keys   []string
	seq    int
	// boundaries are instants decisions named, to jump to.
	boundaries []int64
}

func testDifferential(t *testing.T, k kind, sa, sb store.Store[string]) {
	seq := 0
	rapid.Check(t, func(rt *rapid.T) {
		seq++ // fresh keys for each sequence, shrinking runs included
		s := k.draw(rt)
		start := drawStart(rt)
		w := &twins{s: s, start: start, now: start, seq: seq}
		w.ca, w.cb = clock.NewFake(time.UnixMicro(start)), clock.NewFake(time.UnixMicro(start))
		var errA, errB error
		// A quota of each sequence's own.
		id := ratelimit.WithName(fmt.Sprint("differential-", seq))
		w.a, errA = ratelimit.New(s.alg, sa, ratelimit.WithClock(w.ca), id)
		w.b, errB = ratelimit.New(s.alg, sb, ratelimit.WithClock(w.cb), id)
		if errA != nil || errB != nil {
			rt.Fatalf("ratelimit.New(%v, store, fake clock): store a: %v; store b: %v", s.alg, errA, errB)
		}
		w.keys = []string{"a", "b", "c"}
		rt.Repeat(map[string]func(*rapid.T){
			"advance": w.capped(w.advance),
			"jump":    w.capped(w.jump),
			"allow":   w.capped(w.allow),
			"peek":    w.capped(w.peek),
			"reset":   w.capped(w.reset),
		})
	})
}

func (w *twins) capped(action func(*rapid.T)) func(*rapid.T) {
	return func(t *rapid.T) {
		if w.steps >= maxSteps {
			return
		}
		action(t)
		w.steps++
	}
}

func (w *twins) at() string { return fmt.Sprintf("+%dµs", w.now-w.start) }

// key draws one of the keys, returning its short name and the store key.
func (w *twins) key(t *rapid.T) (name, key string) {
	name = rapid.SampledFrom(w.keys).Draw(t, "key")
	return name, fmt.Sprintf("d%d:%s", w.seq, name)
}

func (w *twins) moveTo(t *rapid.T, to int64) {
	w.ca.Advance(micros(to - w.now))
	w.cb.Advance(micros(to - w.now))
	w.now = to
	t.Logf("%s: clock moved", w.at())
}

func (w *twins) advance(t *rapid.T) {
	w.moveTo(t, w.now+drawMove(t, w.s, "advance µs"))
}

// jump moves both clocks to an instant a decision named, or a
// microsecond before it.
func (w *twins) jump(t *rapid.T) {
	var to []int64
	for _, b := range w.boundaries {
		for _, at := range []int64{b - 1, b} {
			if at > w.now {
				to = append(to, at)
			}
		}
	}
	if len(to) == 0 {
		t.SkipNow()
	}
	slices.Sort(to)
	to = slices.Compact(to)
	w.moveTo(t, rapid.SampledFrom(to).Draw(t, "jump to"))
}

func (w *twins) compare(t *rapid.T, call string, da, db ratelimit.Decision, ea, eb error) {
	t.Logf("%s: %s = %s, error %v", w.at(), call, show(da), ea)
	if da != db || !sameError(ea, eb) {
		t.Fatalf("%s: %s: got %s, %v (store b), want %s, %v (store a)", w.at(), call, show(db), eb, show(da), ea)
	}
	if ea == nil {
		for _, d := range []time.Duration{da.RetryAfter(), da.ResetAfter()} {
			if d > 0 {
				w.boundaries = append(w.boundaries, w.now+d.Microseconds())
			}
		}
	}
}

func (w *twins) allow(t *rapid.T) {
	name, key := w.key(t)
	// Costs just outside [1, limit] are errors both must report alike.
	cost := rapid.IntRange(0, int(w.s.limit)+1).Draw(t, "cost")
	da, ea := w.a.AllowN(t.Context(), key, cost)
	db, eb := w.b.AllowN(t.Context(), key, cost)
	w.compare(t, fmt.Sprintf("AllowN(%s, %d)", name, cost), da, db, ea, eb)
}

func (w *twins) peek(t *rapid.T) {
	name, key := w.key(t)
	da, ea := w.a.Peek(t.Context(), key)
	db, eb := w.b.Peek(t.Context(), key)
	w.compare(t, fmt.Sprintf("Peek(%s)", name), da, db, ea, eb)
}

func (w *twins) reset(t *rapid.T) {
	name, key := w.key(t)
	ea := w.a.Reset(t.Context(), key)
	eb := w.b.Reset(t.Context(), key)
	t.Logf("%s: Reset(%s) = error %v", w.at(), name, ea)
	if !sameError(ea, eb) {
		t.Fatalf("%s: Reset(%s): got error %v (store b), want %v (store a)", w.at(), name, eb, ea)
	}
}
