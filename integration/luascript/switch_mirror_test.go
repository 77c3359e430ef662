package luascript_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
)

// mirrorSwitch runs hist (and books, for an algorithm that books into its
// own state) through old's script and Go transition, then calls through
// the script of new, an algorithm of another kind, under the same state
// ID and resetting on mismatch, against Go: until an admission, every
// call reads the old state carried (algorithm.Carry at the call's
// instant), since nothing is written before; after it, new decides on its
// own state. With policy set, the script is a Policy of new and a second
// limit of new's configuration under another ID (no state yet: fresh),
// whose replies are checked too, and which is charged only when both
// admit. The script's replies must be Go's, call for call.
func mirrorSwitch(t *testing.T, client redis.UniversalClient, old, new algorithm.Algorithm, key string, hist, calls []call, policy bool, books ...bookCall) {
	t.Helper()
	from, _ := algorithm.TagOf(old)
	var s algorithm.State
	mirror(t, client, old, key, hist, func(_ int, st algorithm.State) { s = st })
	for _, bk := range books {
		s = bookOnKey(t, client, old, key, s, bk)
	}
	ctx := t.Context()
	l := luascript.LimitOf(new, "m")
	l.ResetOnMismatch = true
	limits := []luascript.Limit{l}
	ids := []string{"m"}
	if policy {
		l2 := luascript.LimitOf(new, "m2")
		l2.ResetOnMismatch = true
		limits, ids = append(limits, l2), append(ids, "m2")
	}
	script, params, err := luascript.For(limits...)
	if err != nil {
		t.Fatal(err)
	}
	keys := luascript.Keys(key, ids...)
	converted := false
	var s2 algorithm.State
	if policy {
		s2 = new.Init(algorithm.State{}, calls[0].now)
	}
	for i, c := range calls {
		args := append([]any{strconv.FormatInt(c.now, 10), strconv.FormatInt(c.cost, 10), "600000"}, anys(params)...)
		cur := s
		if !converted {
			cur = algorithm.Carry(new, from, s, c.now)
		}
		curs := []algorithm.State{cur}
		if policy {
			curs = append(curs, s2)
		}
		var cmd *redis.Cmd
		want := make([]algorithm.Result, len(curs))
		if c.cost == 0 {
			cmd = evalAs(ctx, client, script, luascript.Modes(limits...), true, keys, args...)
			for j, st := range curs {
				want[j] = new.Peek(st, c.now, 1)
			}
		} else {
			cmd = evalAs(ctx, client, script, luascript.Modes(limits...), false, keys, args...)
			all := true
			for j, st := range curs {
				want[j] = new.Peek(st, c.now, c.cost)
				all = all && want[j].Allowed()
			}
			if all {
				next, r := new.Take(cur, c.now, c.cost)
				s, converted, want[0] = next, true, r
				if policy {
					s2, want[1] = new.Take(s2, c.now, c.cost)
				}
			}
		}
		reply, err := cmd.Int64Slice()
		if err != nil {
			t.Fatalf("%v after %v, call %d (cost %d at %d): %v", new, old, i, c.cost, c.now, err)
		}
		var got []algorithm.Result
		for j := 0; j+2 < len(reply); j += 3 {
			got = append(got, algorithm.Result{Remaining: reply[j], RetryAfter: reply[j+1], ResetAfter: reply[j+2]})
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%v after %v (policy %v), call %d (cost %d at %d, used %d): script replied %v, Go decides %+v",
				new, old, policy, i, c.cost, c.now, algorithm.Used(from, s, c.now), reply, want)
		}
	}
}

// TestSwitchMirror switches keys with random histories (and, for the
// algorithms that book into their own state, bookings ahead: debts and
// counts booked into later windows) from every kind to every other, with
// limits from 1 to 2^40 and durations from 1 µs to 2^48 µs, through a
// limit resetting on mismatch, alone or in a Policy: Lua's used.lua and
// each body's carried start decide as Go's algorithm.Carry does, call for
// call, on every target.
func TestSwitchMirror(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		client := redistest.GoRedis(t, target)
		for oldName, mkOld := range inheritMakers {
			for newName, mkNew := range inheritMakers {
				if oldName == newName {
					continue
				}
				t.Run(oldName+"→"+newName, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(40, uint64(len(oldName)*31+len(newName))))
					for runs := 1; runs <= 12; runs++ {
						old, _, _, span := drawChange(rng, mkOld)
						new, _, _, _ := drawChange(rng, mkNew)
						now := int64(1_763_700_000_000_000) + rng.Int64N(1_000_000_000)
						var hist, calls []call
						for range 1 + rng.IntN(6) {
							now += rng.Int64N(span/4 + 1)
							hist = append(hist, call{now, 1 + rng.Int64N(old.Limit())})
						}
						var books []bookCall
						if oldName != "slidinglog" && rng.IntN(3) == 0 {
							for range 1 + rng.IntN(2) {
								now += rng.Int64N(span/8 + 1)
								books = append(books, bookCall{now, 1 + rng.Int64N(old.Limit()), min(rng.Int64N(4*span+1), algorithm.MaxDuration)})
							}
						}
						for range 1 + rng.IntN(8) {
							if rng.IntN(2) == 0 {
								now += rng.Int64N(span/2 + 1)
							}
							calls = append(calls, call{now, rng.Int64N(min(new.Limit(), 4) + 1)})
						}
						key := redistest.Prefix(t) + fmt.Sprintf("{switch%d}", runs)
						mirrorSwitch(t, client, old, new, key, hist, calls, runs%2 == 0, books...)
					}
				})
			}
		}
	})
}
