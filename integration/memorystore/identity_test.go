package memorystore_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestOneStatePerID drives one key's limit under one state ID through
// every kind of handle a store gives: a table opened once, a table opened
// anew for each request (as a Limiter built per request is), and a table
// of two limits (a Policy) whose second limit has the ID. Each decision
// is checked against the algorithm applied to one state of its own: all
// the handles must read and write the same state, as on Redis.
func TestOneStatePerID(t *testing.T) {
	other := allAlgorithms(t)["fixedwindow"]
	for name, alg := range allAlgorithms(t) { // each admits 5 per second
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				s := memorystore.New[int](memorystore.WithShards(1))
				limit := store.Limit{Algorithm: alg, ID: "shared"}
				cached, err := s.Open([]store.Limit{limit}, nil)
				if err != nil {
					t.Fatal(err)
				}
				// A Policy whose second limit is the shared one; its first
				// limit may refuse a request the shared one would admit.
				pol, err := s.Open([]store.Limit{{Algorithm: other, ID: "other"}, limit}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ref := alg.Init(algorithm.State{}, t0)
				now := t0
				handles := map[string]func(t *rapid.T) store.Table[int]{
					"cached": func(*rapid.T) store.Table[int] { return cached },
					"per request": func(t *rapid.T) store.Table[int] {
						tab, err := s.Open([]store.Limit{limit}, nil)
						if err != nil {
							t.Fatal(err)
						}
						return tab
					},
				}
				t.Repeat(map[string]func(*rapid.T){
					"forward": func(t *rapid.T) {
						now += rapid.Int64Range(0, 400_000).Draw(t, "forward µs")
					},
					"take": func(t *rapid.T) {
						h := rapid.SampledFrom([]string{"cached", "per request"}).Draw(t, "handle")
						cost := rapid.Int64Range(1, 2).Draw(t, "cost")
						var want algorithm.Result
						ref, want = alg.Take(ref, now, cost)
						got, err := handles[h](t).Take(ctx, 1, now, cost, nil)
						if err != nil || got != want {
							t.Fatalf("%s: Take(cost %d) at t0%+dµs = %+v, %v; want %+v", h, cost, now-t0, got, err, want)
						}
					},
					"policy take": func(t *rapid.T) {
						out := make([]algorithm.Result, 2)
						if _, err := pol.Take(ctx, 1, now, 1, out); err != nil {
							t.Fatal(err)
						}
						var want algorithm.Result
						if out[0].Allowed() && out[1].Allowed() {
							ref, want = alg.Take(ref, now, 1)
						} else { // refused: nothing charged, each limit reports its state
							want = alg.Peek(ref, now, 1)
						}
						if out[1] != want {
							t.Fatalf("policy: the shared limit's result at t0%+dµs = %+v, want %+v", now-t0, out[1], want)
						}
					},
					"peek": func(t *rapid.T) {
						got, err := handles["per request"](t).Peek(ctx, 1, now, nil)
						if want := alg.Peek(ref, now, 1); err != nil || got != want {
							t.Fatalf("Peek at t0%+dµs = %+v, %v; want %+v", now-t0, got, err, want)
						}
					},
				})
			})
		})
	}
}

// TestReconfiguredUnderOneID drives one key under one state ID with two
// configurations of the same algorithm (a limit changed on live keys, or
// two processes mid-deploy), against a model of the rule: a state written
// by the other configuration is converted by the reader's Inherit before
// it decides, and only an admission writes it back, under the reader's
// configuration.
func TestReconfiguredUnderOneID(t *testing.T) {
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	wider := map[string]algorithm.Algorithm{ // 10 per 2 seconds
		"tokenbucket": must(tokenbucket.New(tokenbucket.Config{Capacity: 10, Rate: 5})),
		"tokenbucket-interval": must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{
			Capacity: 10, Tokens: 10, Interval: 2 * time.Second,
		})),
		"slidinglog":  must(slidinglog.New(slidinglog.Config{Limit: 10, Window: 2 * time.Second})),
		"fixedwindow": must(fixedwindow.New(fixedwindow.Config{Limit: 10, Window: 2 * time.Second})),
	}
	for name, alg := range allAlgorithms(t) { // each admits 5 per second
		algs := [2]algorithm.Algorithm{alg, wider[name]}
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				rule := algorithm.Rule(rapid.IntRange(0, 1).Draw(t, "rule"))
				if name == "slidinglog" {
					rule = algorithm.AsIs // it has no proportional rule
				}
				s := memorystore.New[int](memorystore.WithShards(1))
				var tabs [2]store.Table[int]
				for i, a := range algs {
					tab, err := s.Open([]store.Limit{{Algorithm: a, ID: "api", Inherit: rule}}, nil)
					if err != nil {
						t.Fatal(err)
					}
					tabs[i] = tab
				}
				// The model: the state, and which configuration wrote it.
				ref, writer := algs[0].Init(algorithm.State{}, t0), 0
				now := t0
				read := func(i int) algorithm.State {
					st := ref
					if st.Log != nil {
						st.Log = &algorithm.Log{Entries: append([]algorithm.Entry(nil), st.Log.Entries[st.Log.Head:]...)}
					}
					if i == writer {
						return st
					}
					from := algs[writer].(algorithm.Tagged).Tag()
					return algs[i].(algorithm.Inheritor).Inherit(from, st, now, rule)
				}
				t.Repeat(map[string]func(*rapid.T){
					"forward": func(t *rapid.T) {
						now += rapid.Int64Range(0, 400_000).Draw(t, "forward µs")
					},
					"take": func(t *rapid.T) {
						i := rapid.IntRange(0, 1).Draw(t, "config")
						cost := rapid.Int64Range(1, 3).Draw(t, "cost")
						st := read(i)
						want := algs[i].Peek(st, now, cost)
						if want.Allowed() {
							ref, want = algs[i].Take(st, now, cost)
							writer = i
						}
						got, err := tabs[i].Take(ctx, 1, now, cost, nil)
						if err != nil || got != want {
							t.Fatalf("config %d: Take(cost %d) at t0%+dµs = %+v, %v; want %+v", i, cost, now-t0, got, err, want)
						}
					},
					"peek": func(t *rapid.T) {
						i := rapid.IntRange(0, 1).Draw(t, "config")
						want := algs[i].Peek(read(i), now, 1)
						if got, err := tabs[i].Peek(ctx, 1, now, nil); err != nil || got != want {
							t.Fatalf("config %d: Peek at t0%+dµs = %+v, %v; want %+v", i, now-t0, got, err, want)
						}
					},
				})
			})
		})
	}
}
