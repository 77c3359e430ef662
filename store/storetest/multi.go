package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"pgregory.net/rapid"
)

// runMulti runs the checks of store.Multi, for stores whose tables
// implement it.
func runMulti(t *testing.T, newStore func(t *testing.T) store.Store[string]) {
	t.Run("Model", func(t *testing.T) { testMultiModel(t, newStore(t)) })
	t.Run("Errors", func(t *testing.T) { testMultiErrors(t, newStore(t)) })
	t.Run("Concurrent", func(t *testing.T) { testMultiConcurrent(t, newStore(t)) })
	t.Run("Carries", func(t *testing.T) { testMultiCarries(t, newStore(t)) })
	t.Run("RefusedLater", func(t *testing.T) { testMultiRefusedLater(t, newStore(t)) })
	t.Run("ConvertedLater", func(t *testing.T) { testMultiConvertedLater(t, newStore(t)) })
}

// testMultiConvertedLater checks a TakeAll whose later request reads a
// state written under other parameters (its limit widened), for every
// algorithm before every other: both admit, and the earlier request is
// charged once, as a store that takes such a state apart (a Redis
// table's conversion, after its first try) must see to.
func testMultiConvertedLater(t *testing.T, st store.Store[string]) {
	clk := clock.NewFake(time.UnixMicro(epoch))
	now := epoch
	ctx := context.Background()
	for i, first := range kinds {
		for j, later := range kinds {
			room, alg := openKind(t, st, clk, first, 5, fmt.Sprintf("room%d", i))
			narrow, _ := openKind(t, st, clk, later, 5, fmt.Sprintf("widened%d", j))
			wide, _ := openKind(t, st, clk, later, 10, fmt.Sprintf("widened%d", j))
			key := fmt.Sprintf("multi-converted-later:%d:%d", i, j)
			s := alg.Init(algorithm.State{}, now)
			s, _ = alg.Take(s, now, 1)
			takeOne(t, first.name+" then "+later.name, key, now, room, narrow)
			reqs := []store.Request[string]{{Table: room, Key: key, Now: now, Cost: 2}, {Table: wide, Key: key, Now: now, Cost: 1}}
			ok, err := multiOf(t, room).TakeAll(ctx, reqs)
			s, want := alg.Take(s, now, 2)
			if err != nil || !ok || reqs[0].Result != want || !reqs[1].Result.Allowed() {
				t.Fatalf("%s then %s: TakeAll = %v, %v, %v; want both admitted, request 0 reporting %v", first.name, later.name, ok, err, showResults(reqs), want)
			}
			_, want = alg.Take(s, now, 2)
			if r, err := room.Take(ctx, key, now, 2, nil); err != nil || r != want {
				t.Errorf("%s then %s: Take 2 after the TakeAll = %v, %v; want %v (charged once)", first.name, later.name, r, err, want)
			}
		}
	}
}

// testMultiRefusedLater checks a TakeAll that a later request refuses,
// for every algorithm before every other: the earlier request, which has
// room, is charged nothing and reports its state as it stands (its Peek
// for its cost), and its room is all there afterwards. Both limits are
// states of one key, so that a store keeping a key's states together has
// them side by side; the earlier one already holds a state of now, the
// common case a store may decide by a shorter path.
func testMultiRefusedLater(t *testing.T, st store.Store[string]) {
	clk := clock.NewFake(time.UnixMicro(epoch))
	now := epoch
	ctx := context.Background()
	for i, first := range kinds {
		for j, later := range kinds {
			room, alg := openKind(t, st, clk, first, 5, fmt.Sprintf("room%d", i))
			full, _ := openKind(t, st, clk, later, 1, fmt.Sprintf("full%d", j))
			key := fmt.Sprintf("multi-refused-later:%d:%d", i, j)
			s := alg.Init(algorithm.State{}, now)
			s, _ = alg.Take(s, now, 1)
			takeOne(t, first.name+" then "+later.name, key, now, room, full)
			reqs := []store.Request[string]{{Table: room, Key: key, Now: now, Cost: 2}, {Table: full, Key: key, Now: now, Cost: 1}}
			ok, err := multiOf(t, room).TakeAll(ctx, reqs)
			if want := alg.Peek(s, now, 2); err != nil || ok || reqs[0].Result != want || reqs[1].Result.Allowed() {
				t.Fatalf("%s then %s: TakeAll = %v, %v, %v; want refused by request 1, request 0 reporting %v", first.name, later.name, ok, err, showResults(reqs), want)
			}
			_, want := alg.Take(s, now, 4)
			if r, err := room.Take(ctx, key, now, 4, nil); err != nil || r != want {
				t.Errorf("%s then %s: Take 4 after the refusal = %v, %v; want %v (nothing charged)", first.name, later.name, r, err, want)
			}
		}
	}
}

// openKind opens on st a table of one limit of kind k, of the given
// limit and state ID, and returns it with its algorithm.
func openKind(t testing.TB, st store.Store[string], clk clock.Clock, k kind, limit int64, id string) (store.Table[string], algorithm.Algorithm) {
	t.Helper()
	alg, err := k.withLimit(limit)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := st.Open([]store.Limit{{Algorithm: alg, ID: id}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	return tb, alg
}

// takeOne charges 1 to key at now in each of tables, failing t (what
// says which case) unless each admits.
func takeOne(t testing.TB, what, key string, now int64, tables ...store.Table[string]) {
	t.Helper()
	for _, tb := range tables {
		if r, err := tb.Take(context.Background(), key, now, 1, nil); err != nil || !r.Allowed() {
			t.Fatalf("%s: Take 1: %v, %v", what, r, err)
		}
	}
}

// showResults formats the results of requests, for messages.
func showResults(reqs []store.Request[string]) string {
	var b strings.Builder
	for i, rq := range reqs {
		fmt.Fprintf(&b, "[%d: %v]", i, rq.Result)
	}
	return b.String()
}

// testMultiCarries checks that a TakeAll reads a state written under its
// limit's ID with other parameters as a Take does (by the AsIs rule): a
// window of 5 that used 2, widened to 10, has 7 left after one more,
// whether the other request admits or not.
func testMultiCarries(t *testing.T, st store.Store[string]) {
	clk := clock.NewFake(clock.Local().Now())
	now := clk.Now().UnixMicro()
	k := kinds[len(kinds)-1]
	open := func(limit int64, id string) store.Table[string] {
		alg, err := k.withLimit(limit)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := st.Open([]store.Limit{{Algorithm: alg, ID: id}}, clk)
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	narrow, wide, other := open(5, "v"), open(10, "v"), open(1, "w")
	ctx := context.Background()
	for _, key := range []string{"multi-carries:a", "multi-carries:b"} {
		if r, err := narrow.Take(ctx, key, now, 2, nil); err != nil || !r.Allowed() {
			t.Fatalf("Take 2 of 5: %v, %v", r, err)
		}
	}
	m := multiOf(t, wide)
	// Admitted: the widened window charges 1 more.
	reqs := []store.Request[string]{{Table: wide, Key: "multi-carries:a", Now: now, Cost: 1}, {Table: other, Key: "multi-carries:a", Now: now, Cost: 1}}
	if ok, err := m.TakeAll(ctx, reqs); err != nil || !ok || reqs[0].Result.Remaining != 7 {
		t.Errorf("TakeAll: got %v, %v, %v; want admitted with 7 remaining of the widened 10", ok, err, reqs[0].Result)
	}
	// Denied by the other request (its 1 is spent): nothing charged, and
	// the widened window reports what it would leave, 7.
	reqs = []store.Request[string]{{Table: wide, Key: "multi-carries:b", Now: now, Cost: 1}, {Table: other, Key: "multi-carries:a", Now: now, Cost: 1}}
	if ok, err := m.TakeAll(ctx, reqs); err != nil || ok || !reqs[0].Result.Allowed() || reqs[1].Result.Allowed() {
		t.Fatalf("TakeAll: got %v, %v, %v; want denied by request 1 alone", ok, err, reqs)
	}
	if r, err := wide.Peek(ctx, "multi-carries:b", now, nil); err != nil || r.Remaining != 8 {
		t.Errorf("after the denial: Peek = %v, %v; want 8 remaining (2 used, carried, nothing charged)", r, err)
	}
}

// multiOf returns tb as a store.Multi, or skips t.
func multiOf(t testing.TB, tb store.Table[string]) store.Multi[string] {
	m, ok := tb.(store.Multi[string])
	if !ok {
		t.Skipf("%T does not implement store.Multi", tb)
	}
	return m
}

// multiTable is a table of a TakeAll model: its limits, each with the
// Go transition that must decide as the store does.
type multiTable struct {
	tb     store.Table[string]
	limits []store.Limit
}

// testMultiModel runs random TakeAlls of one to four requests over three
// keys and three tables of random algorithms (one of them a Policy of two
// limits; two tables share a state ID, so that requests of both on one key
// name one state), and checks every result against the algorithms' own
// transitions applied all-or-none: when every limit of every request
// admits, each is charged (Take's result); otherwise none is, and each
// reports Peek for its cost. Requests naming one state fail with
// ErrSameState, charging nothing.
func testMultiModel(t *testing.T, st store.Store[string]) {
	seq := 0
	rapid.Check(t, func(rt *rapid.T) {
		seq++
		m := &multiModel{tables: multiTables(rt, st), states: map[string]algorithm.State{}, start: drawStart(rt)}
		m.multi = multiOf(t, m.tables[0].tb)
		m.keys = []string{fmt.Sprintf("mm%d:a", seq), fmt.Sprintf("mm%d:b", seq), fmt.Sprintf("mm%d:{c}", seq)}
		now := m.start
		for range maxSteps / 2 {
			now += rapid.Int64Range(0, 2_000_000).Draw(rt, "advance µs")
			m.step(rt, now)
		}
	})
}

// multiTables opens the model's three tables on st: limits of random
// kinds under the IDs m1; m2 and m3; and m1 again, of table 0's algorithm.
func multiTables(rt *rapid.T, st store.Store[string]) []multiTable {
	clk := clock.NewFake(clock.Local().Now())
	var tables []multiTable
	for ti, tids := range [][]string{{"m1"}, {"m2", "m3"}, {"m1"}} {
		var limits []store.Limit
		for _, id := range tids {
			k := kinds[rapid.IntRange(0, len(kinds)-1).Draw(rt, "kind")]
			alg, err := k.withLimit(rapid.Int64Range(1, 5).Draw(rt, "limit"))
			if err != nil {
				rt.Fatalf("%s: %v", k.name, err)
			}
			if ti == 2 {
				// The same state ID as table 0's, and its algorithm, so that
				// the state reads as its own.
				alg = tables[0].limits[0].Algorithm
			}
			limits = append(limits, store.Limit{Algorithm: alg, ID: id})
		}
		tb, err := st.Open(limits, clk)
		if err != nil {
			rt.Fatalf("Open: %v", err)
		}
		tables = append(tables, multiTable{tb: tb, limits: limits})
	}
	return tables
}

// multiModel is testMultiModel's store and its reference: every state
// by key and state ID, as the algorithms' transitions leave it.
type multiModel struct {
	tables []multiTable
	multi  store.Multi[string]
	keys   []string
	states map[string]algorithm.State
	start  int64
}

// stateOf returns the model's state of key under l at now.
func (m *multiModel) stateOf(key string, l store.Limit, now int64) algorithm.State {
	if s, ok := m.states[key+"\x00"+l.ID]; ok {
		return s
	}
	return l.Algorithm.Init(algorithm.State{}, now)
}

// step draws a TakeAll at now, makes it, and checks it against the model.
func (m *multiModel) step(rt *rapid.T, now int64) {
	reqs := make([]store.Request[string], rapid.IntRange(1, 4).Draw(rt, "requests"))
	named := map[string]bool{}
	same := false
	for i := range reqs {
		mt := m.tables[rapid.IntRange(0, len(m.tables)-1).Draw(rt, "table")]
		key := m.keys[rapid.IntRange(0, len(m.keys)-1).Draw(rt, "key")]
		least := mt.limits[0].Algorithm.Limit()
		for _, l := range mt.limits {
			least = min(least, l.Algorithm.Limit())
			same = same || named[key+"\x00"+l.ID]
			named[key+"\x00"+l.ID] = true
		}
		reqs[i] = store.Request[string]{Table: mt.tb, Key: key, Now: now, Cost: rapid.Int64Range(1, least).Draw(rt, "cost"),
			Out: make([]algorithm.Result, len(mt.limits))}
	}
	ok, err := m.multi.TakeAll(context.Background(), reqs)
	if same {
		if !errors.Is(err, store.ErrSameState) {
			rt.Fatalf("TakeAll of requests naming one state: got %v, %v; want ErrSameState", ok, err)
		}
		return
	}
	if err != nil {
		rt.Fatalf("TakeAll: %v", err)
	}
	// Every limit's Peek for its cost first; all admit, or none is charged.
	all := true
	for i := range reqs {
		for _, l := range tableOf(m.tables, reqs[i].Table).limits {
			all = all && l.Algorithm.Peek(m.stateOf(reqs[i].Key, l, now), now, reqs[i].Cost).Allowed()
		}
	}
	if ok != all {
		rt.Fatalf("TakeAll at +%dµs: got %v, want %v (requests %s)", now-m.start, ok, all, showReqs(reqs))
	}
	for i := range reqs {
		rq := &reqs[i]
		var want []algorithm.Result
		for _, l := range tableOf(m.tables, rq.Table).limits {
			s := m.stateOf(rq.Key, l, now)
			var r algorithm.Result
			if all {
				s, r = l.Algorithm.Take(s, now, rq.Cost)
				m.states[rq.Key+"\x00"+l.ID] = s
			} else {
				r = l.Algorithm.Peek(s, now, rq.Cost)
			}
			want = append(want, r)
		}
		if !slices.Equal(rq.Out, want) {
			rt.Fatalf("request %d (%s, cost %d) at +%dµs: got %v, want %v", i, rq.Key, rq.Cost, now-m.start, rq.Out, want)
		}
		if got, want := rq.Result, algorithm.Combine(want); got != want {
			rt.Fatalf("request %d: Result %v, want %v", i, got, want)
		}
	}
}

// tableOf returns the model's table of tb.
func tableOf(tables []multiTable, tb store.Table[string]) multiTable {
	for _, mt := range tables {
		if mt.tb == tb {
			return mt
		}
	}
	panic("storetest: a request of no table")
}

// showReqs formats requests for messages.
func showReqs(reqs []store.Request[string]) string {
	var b strings.Builder
	for i, rq := range reqs {
		fmt.Fprintf(&b, "[%d: %s cost %d]", i, rq.Key, rq.Cost)
	}
	return b.String()
}

// testMultiErrors checks TakeAll's refusals: a request of another
// store's table, a bad cost, a key too long, two requests of one state;
// each charges nothing, and one request's error says which.
func testMultiErrors(t *testing.T, st store.Store[string]) {
	clk := clock.NewFake(clock.Local().Now())
	now := clk.Now().UnixMicro()
	alg, err := kinds[0].withLimit(3)
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.Open([]store.Limit{{Algorithm: alg, ID: "e1"}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.Open([]store.Limit{{Algorithm: alg, ID: "e2"}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	other, err := memorystore.New[string]().Open([]store.Limit{{Algorithm: alg, ID: "e3"}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	m := multiOf(t, a)
	key := "multi-errors:" + t.Name()
	ok := store.Request[string]{Table: a, Key: key, Now: now, Cost: 1}
	for _, c := range []struct {
		name  string
		bad   store.Request[string]
		want  error
		index bool // the error names request 1
	}{
		{"ForeignTable", store.Request[string]{Table: other, Key: key, Now: now, Cost: 1}, store.ErrForeignTable, true},
		{"CostAboveLimit", store.Request[string]{Table: b, Key: key, Now: now, Cost: 4}, algorithm.ErrCostExceedsLimit, true},
		{"CostZero", store.Request[string]{Table: b, Key: key, Now: now, Cost: 0}, algorithm.ErrInvalidCost, true},
		{"KeyTooLong", store.Request[string]{Table: b, Key: strings.Repeat("k", store.DefaultMaxKeyBytes+1), Now: now, Cost: 1}, store.ErrKeyTooLong, true},
		{"SameState", store.Request[string]{Table: a, Key: key, Now: now, Cost: 1}, store.ErrSameState, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			reqs := []store.Request[string]{ok, c.bad}
			got, err := m.TakeAll(context.Background(), reqs)
			if got || !errors.Is(err, c.want) {
				t.Fatalf("TakeAll: got %v, %v; want false and %v", got, err, c.want)
			}
			var re *store.RequestError
			if c.index && (!errors.As(err, &re) || re.Index != 1) {
				t.Errorf("TakeAll: got %v; want a store.RequestError of request 1", err)
			}
			r, err := a.Peek(context.Background(), key, now, nil)
			if err != nil || r.Remaining != 3 {
				t.Errorf("after the refusal: Peek = %v, %v; want the key fresh (3 remaining)", r, err)
			}
		})
	}
}

// testMultiConcurrent has 8 goroutines take a cost of 1 on two keys, each
// under its own table, together: all-or-none holds when both keys end
// charged alike, and exactly their limit in all (no clock moves).
func testMultiConcurrent(t *testing.T, st store.Store[string]) {
	const limit, goroutines, each = 40, 8, 10
	clk := clock.NewFake(clock.Local().Now())
	now := clk.Now().UnixMicro()
	var tbs [2]store.Table[string]
	for i := range tbs {
		alg, err := kinds[len(kinds)-1].withLimit(limit - int64(i)*10)
		if err != nil {
			t.Fatal(err)
		}
		if tbs[i], err = st.Open([]store.Limit{{Algorithm: alg, ID: fmt.Sprintf("c%d", i)}}, clk); err != nil {
			t.Fatal(err)
		}
	}
	m := multiOf(t, tbs[0])
	keys := [2]string{"multi-concurrent:x", "multi-concurrent:y"}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				reqs := []store.Request[string]{
					{Table: tbs[0], Key: keys[0], Now: now, Cost: 1},
					{Table: tbs[1], Key: keys[1], Now: now, Cost: 1},
				}
				ok, err := m.TakeAll(context.Background(), reqs)
				if err != nil {
					errs <- err
					return
				}
				if ok {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("TakeAll: %v", err)
	}
	// The second key's limit, 30, is the smaller: exactly 30 admitted,
	// charged to both keys.
	if got := admitted.Load(); got != limit-10 {
		t.Errorf("admitted %d, want %d", got, limit-10)
	}
	for i, tb := range tbs {
		r, err := tb.Peek(context.Background(), keys[i], now, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := limit - int64(i)*10 - admitted.Load()
		if r.Remaining != want {
			t.Errorf("key %s: %d remaining, want %d (charged with the other key or not at all)", keys[i], r.Remaining, want)
		}
	}
}
