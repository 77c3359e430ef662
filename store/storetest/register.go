package storetest

import (
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/algorithms"
	"pgregory.net/rapid"
)

// Algorithm is an algorithm the suite checks every store with besides
// those of package algorithms: a new algorithm's package, or a test of
// it, registers it (Register) so that every store's conformance run
// covers it, with no edit to the suite. Its reference model is its own
// transition (Take and Peek, as the memory store applies them): a store
// must decide for it exactly as it decides itself, which is what a Redis
// store's Lua body must mirror. Like the module's own, it must be Tagged,
// an Inheritor and a Booker, with a Lua body for the Redis stores.
type Algorithm struct {
	// Entry names it (its registered algorithm.Kind's Name) and builds
	// its configurations, as an entry of package algorithms does.
	Entry algorithms.Entry
	// Draw returns a random configuration, drawn with t: a limit of at
	// most 20 and windows, intervals or refill times of at most 3 s, as the
	// suite draws its own; and its period, the time scale in µs the suite
	// draws clock moves from.
	Draw func(t *rapid.T) (alg algorithm.Algorithm, period int64)
	// FreshIn is how many of Per's periods a key that used its limit
	// takes at most to be fresh again; 0 means 1.
	FreshIn time.Duration
}

// Register adds a to the algorithms Run and Differential check stores
// with. Call it from an init function of a test package, before the
// tests run; it panics when a's Entry cannot build a configuration.
func Register(a Algorithm) {
	sample, err := a.Entry.Sample(1)
	if err != nil {
		panic(fmt.Sprintf("storetest: Register %q: %v", a.Entry.Name, err))
	}
	freshIn := a.FreshIn
	if freshIn == 0 {
		freshIn = 1
	}
	draw := func(t *rapid.T) setup {
		alg, period := a.Draw(t)
		t.Logf("algorithm: %v", alg)
		return setup{alg: alg, limit: alg.Limit(), period: max(period, 1),
			newModel: func(now int64) model { return &transition{alg: alg, s: alg.Init(algorithm.State{}, now)} },
			bound:    func([]admission) error { return nil }, // the transition is the model
		}
	}
	kinds = append(kinds, kind{name: a.Entry.Name, withLimit: a.Entry.Sample, per: a.Entry.Per, draw: draw, freshIn: freshIn,
		proportional: algorithm.CheckRule(sample, algorithm.Proportional) == nil})
	registered[sample.Spec().Name] = a
}

// registered holds the registered algorithms by their Spec's name, for
// relimit.
var registered = map[string]Algorithm{}

// registeredSetup returns the setup of a registered algorithm named name
// (its Spec's) with the limit: its Sample of it, its own transition as
// its model, as Register's draw makes one.
func registeredSetup(name string, limit, period int64) (setup, bool, error) {
	a, ok := registered[name]
	if !ok {
		return setup{}, false, nil
	}
	alg, err := a.Entry.Sample(limit)
	if err != nil {
		return setup{}, true, err
	}
	return setup{alg: alg, limit: alg.Limit(), period: period,
		newModel: func(now int64) model { return &transition{alg: alg, s: alg.Init(algorithm.State{}, now)} },
		bound:    func([]admission) error { return nil },
	}, true, nil
}

// transition is a registered algorithm's model of one key: the state its
// own Take leaves.
type transition struct {
	alg algorithm.Algorithm
	s   algorithm.State
}

func (m *transition) check(now, cost int64, got ratelimit.Decision) error {
	var r algorithm.Result
	if cost == 0 {
		r = m.alg.Peek(m.s, now, 1)
	} else {
		m.s, r = m.alg.Take(algorithm.CloneState(m.s), now, cost)
	}
	want := decision(r.Allowed(), m.alg.Limit(), r.Remaining, r.RetryAfter, r.ResetAfter)
	if got != want {
		return fmt.Errorf("got %s, want %s (from the algorithm's own transition)", show(got), show(want))
	}
	return nil
}
