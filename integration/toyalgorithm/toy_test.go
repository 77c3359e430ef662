// Package toyalgorithm_test is the dry run of "a new algorithm is one
// package" (issue 51): a seventh algorithm, defined in this test package
// alone, registers its Kind (its letter, its Lua body with its --@used
// part, its Go Used) and its conformance entry, and then runs on the
// memory store and on both Redis stores, and passes the conformance kit
// (storetest.RunAlgorithm), switches to and from the module's six kinds
// included, with no edit anywhere else.
//
// The toy is the fixed window's transition under a Kind of its own: the
// run checks the plumbing (the registry, the composer, the conversion
// scripts, the kit), not new arithmetic.
package toyalgorithm_test

import (
	_ "embed"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/algorithms"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/store/storetest"
)

// name and letter are the toy's Kind.
const (
	name          = "toywindow"
	letter   byte = 'Z'
	maxExact      = 1 << 53
)

// body is the toy's transition in Lua, which the Redis stores run.
//
//go:embed toywindow.lua
var body string

// TestToyBodyIsTheFixedWindows checks that the toy's Lua body is the
// fixed window's but for its opening comment, as it says: a copy that
// drifted (it lacked the refund part's gave once the fixed window's had
// it, and the Redis stores then said a refund gave back more than it did)
// is a toy of another algorithm than its Go side.
func TestToyBodyIsTheFixedWindows(t *testing.T) {
	fw, ok := algorithm.KindOf(fixedwindow.Kind)
	if !ok {
		t.Fatal("fixedwindow is not registered")
	}
	afterOpening := func(src string) string {
		lines := strings.SplitAfter(src, "\n")
		for len(lines) > 0 && strings.HasPrefix(lines[0], "--") {
			lines = lines[1:]
		}
		return strings.Join(lines, "")
	}
	if afterOpening(body) != afterOpening(fw.Body) {
		t.Error("toywindow.lua is not fixedwindow.lua after its opening comment: copy fixedwindow.lua and keep the toy's opening")
	}
}

// toyWindow is a fixed window whose states say they are the toy's: its
// Tag and Spec are its own, and it reads only its own states as its kind.
type toyWindow struct{ *fixedwindow.Window }

var (
	_ algorithm.Inheritor = toyWindow{}
	_ algorithm.Undoer    = toyWindow{}
)

func (w toyWindow) Tag() algorithm.Tag {
	t := w.Window.Tag()
	t.Kind = letter
	return t
}

func (w toyWindow) Spec() algorithm.Spec {
	s := w.Window.Spec()
	s.Name = name
	return s
}

func (w toyWindow) String() string { return "toy" + w.Window.String() }

func (w toyWindow) Describe() string { return "a toy " + w.Window.Describe() }

// Inherit reads a toy state written under other parameters as the fixed
// window reads its own.
func (w toyWindow) Inherit(from algorithm.Tag, s algorithm.State, now int64, rule algorithm.Rule) algorithm.State {
	if from.Kind == letter {
		from.Kind = fixedwindow.Kind
	}
	return w.Window.Inherit(from, s, now, rule)
}

// used is what a toy state had used at now: the fill pointer of the
// window of now, as the window reads it.
func used(from algorithm.Tag, s algorithm.State, now int64) int64 {
	p0, p1 := from.P0, from.P1
	if p0 > algorithm.MaxLimit || s.N1 < 0 || s.N1 > 2*p0 || s.N0 < -maxExact || s.N0 > maxExact {
		return algorithm.MaxLimit
	}
	index := algorithm.FloorDiv(now, p1)
	switch {
	case s.N1 == 0, s.N0 > index+algorithm.MaxDuration/p1:
		return 0
	case s.N0 >= index:
		return s.N1
	case s.N0 == index-1:
		return max(s.N1-p0, 0)
	}
	return 0
}

func toy(w *fixedwindow.Window, err error) (algorithm.Algorithm, error) {
	if err != nil {
		return nil, err
	}
	return toyWindow{w}, nil
}

func init() {
	algorithm.Register(algorithm.Kind{Name: name, Letter: letter, Params: 2, Body: body, Used: used,
		Describe: func(t algorithm.Tag) string { return fmt.Sprintf("a toy window of %d per %dµs", t.P0, t.P1) }})
	storetest.Register(storetest.Algorithm{
		Entry: algorithms.Entry{
			Name: name,
			Per: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
				return toy(fixedwindow.Per(n, period))
			},
			Spread: func(n int64, period time.Duration) (algorithm.Algorithm, error) {
				return toy(fixedwindow.New(fixedwindow.Config{Limit: n, Window: period}))
			},
			Sample: func(limit int64) (algorithm.Algorithm, error) {
				return toy(fixedwindow.New(fixedwindow.Config{Limit: limit, Window: time.Second}))
			},
		},
		Draw: func(t *rapid.T) (algorithm.Algorithm, int64) {
			limit := rapid.Int64Range(1, 20).Draw(t, "limit")
			window := rapid.OneOf(rapid.Int64Range(1, 10), rapid.Int64Range(1, 3_000_000)).Draw(t, "window µs")
			alg, err := toy(fixedwindow.New(fixedwindow.Config{Limit: limit, Window: time.Duration(window) * time.Microsecond}))
			if err != nil {
				t.Fatalf("a drawn config was rejected: %v", err)
			}
			return alg, window
		},
	})
}

// TestToyInMemory runs the kit for the toy on the memory store.
func TestToyInMemory(t *testing.T) {
	storetest.RunAlgorithm(t, name, func(t *testing.T) store.Store[string] { return memorystore.New[string]() })
}

// TestToyOnRedis runs the kit for the toy through both Redis clients, on
// miniredis, a real server and a real cluster (the last two when
// configured).
func TestToyOnRedis(t *testing.T) {
	redistest.Each(t, func(t *testing.T, target redistest.Target) {
		if target.Mini == nil {
			target.TTLMargin = 10 * time.Minute // the kit's clocks are fake; Redis's TTLs are not
		}
		t.Run("goredis", func(t *testing.T) {
			storetest.RunAlgorithm(t, name, func(t *testing.T) store.Store[string] {
				st, err := goredisstore.New(redistest.GoRedis(t, target), goredisstore.WithPrefix[string](redistest.Prefix(t)),
					goredisstore.WithTTLMargin[string](target.TTLMargin))
				if err != nil {
					t.Fatal(err)
				}
				return st
			})
		})
		t.Run("rueidis", func(t *testing.T) {
			// As integration/rueidisstore's suite (MiniredisStandIn): the
			// toy's scripts on miniredis are the ones go-redis runs there,
			// and a real Redis, when configured, checks this client.
			if target.Mini != nil && os.Getenv(redistest.EnvAddr) != "" {
				t.Skipf("a real Redis is configured (%s): the toy on miniredis runs through go-redis", redistest.EnvAddr)
			}
			storetest.RunAlgorithm(t, name, func(t *testing.T) store.Store[string] {
				st, err := rueidisstore.New(redistest.Rueidis(t, target), rueidisstore.WithPrefix[string](redistest.Prefix(t)),
					rueidisstore.WithTTLMargin[string](target.TTLMargin))
				if err != nil {
					t.Fatal(err)
				}
				return st
			})
		})
	})
}
