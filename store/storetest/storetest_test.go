package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/store/storetest"
)

// brokenStore is the memory store with its tables wrapped to break the
// contract in one way.
type brokenStore struct {
	store.Store[string]
	wrap func(store.Table[string]) store.Table[string]
}

func (s brokenStore) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.Store.Open(limits, clk)
	if err != nil {
		return nil, err
	}
	return s.wrap(t), nil
}

func broken(wrap func(store.Table[string]) store.Table[string]) func(*testing.T) store.Store[string] {
	return func(*testing.T) store.Store[string] {
		return &brokenStore{memorystore.New[string](), wrap} // a pointer: a brokenStore is not comparable
	}
}

// lossyKeys names state by the key up to its first NUL byte, as a store
// passing keys through C strings would.
type lossyKeys struct{ store.Table[string] }

func cut(key string) string { k, _, _ := strings.Cut(key, "\x00"); return k }

func (t lossyKeys) Take(ctx context.Context, key string, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	return t.Table.Take(ctx, cut(key), now, cost, out)
}
func (t lossyKeys) Peek(ctx context.Context, key string, now int64, out []algorithm.Result) (algorithm.Result, error) {
	return t.Table.Peek(ctx, cut(key), now, out)
}
func (t lossyKeys) Reset(ctx context.Context, key string) error { return t.Table.Reset(ctx, cut(key)) }

// peekTakes answers Peek by taking a unit.
type peekTakes struct{ store.Table[string] }

func (t peekTakes) Peek(ctx context.Context, key string, now int64, out []algorithm.Result) (algorithm.Result, error) {
	return t.Table.Take(ctx, key, now, 1, out)
}

// drifting adds a microsecond to every fifth ResetAfter it reports.
type drifting struct {
	store.Table[string]
	n *int
}

func (t drifting) Take(ctx context.Context, key string, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	r, err := t.Table.Take(ctx, key, now, cost, out)
	if *t.n++; *t.n%5 == 0 && r.ResetAfter > 0 {
		r.ResetAfter++
	}
	return r, err
}

// TestBrokenStore runs the suite on broken stores. It runs only as a
// subprocess of TestSuiteCatchesBrokenStores, which expects it to fail.
func TestBrokenStore(t *testing.T) {
	if os.Getenv("STORETEST_BROKEN") == "" {
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
	t.Run("lossyKeys", func(t *testing.T) {
		storetest.Run(t, broken(func(t store.Table[string]) store.Table[string] { return lossyKeys{t} }))
	})
	t.Run("peekTakes", func(t *testing.T) {
		storetest.Run(t, broken(func(t store.Table[string]) store.Table[string] { return peekTakes{t} }))
	})
	t.Run("drifting", func(t *testing.T) {
		n := 0
		storetest.Differential(t,
			func(*testing.T) store.Store[string] { return memorystore.New[string]() },
			broken(func(t store.Table[string]) store.Table[string] { return drifting{t, &n} }))
	})
}

// TestSuiteCatchesBrokenStores checks that the suite fails, in the
// expected subtest, on stores that break the contract.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	if os.Getenv("STORETEST_BROKEN") != "" {
		t.Skip("in the subprocess")
	}
	for _, c := range []struct {
		run  string // subtest of TestBrokenStore
		want string // in the output
	}{
		{"lossyKeys/slidinglog/HostileKeys", `AllowN("\x00", 5) on a new key after using up the keys before it: got {denied`},
		{"peekTakes/fixedwindow/PeekUnseenKey", "Peek(k) on an unseen key at +0s: got {allowed remaining=4/5"},
		{"peekTakes/tokenbucket/Model", "[rapid] failed"},
		{"drifting/tokenbucket-interval", "(store b), want"},
	} {
		t.Run(c.run, func(t *testing.T) {
			pattern := "^TestBrokenStore$"
			for _, part := range strings.Split(c.run, "/") {
				pattern += "/^" + part + "$"
			}
			cmd := exec.Command(os.Args[0], "-test.run="+pattern, "-test.v", "-rapid.nofailfile", "-rapid.shrinktime=1s")
			cmd.Env = append(os.Environ(), "STORETEST_BROKEN=1")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "--- FAIL: TestBrokenStore/"+c.run) {
				t.Fatalf("suite on a store broken as %s: got error %v and output\n%s\nwant a failure of TestBrokenStore/%s saying %q",
					c.run, err, out, c.run, c.want)
			}
		})
	}
}
