package redistable_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/internal/redistable"
	"github.com/go-ratelimit/ratelimit/store"
)

func TestEvicts(t *testing.T) {
	for policy, want := range map[string]bool{
		"allkeys-lru": true, "allkeys-lfu": true, "allkeys-random": true,
		"volatile-lru": true, "volatile-lfu": true, "volatile-random": true,
		"noeviction": false, "volatile-ttl": false,
		"": false,
	} {
		if got := redistable.Evicts(policy); got != want {
			t.Errorf("Evicts(%q) = %v, want %v", policy, got, want)
		}
	}
}

// servers is a PolicyReader over a fixed answer, counting its reads.
type servers struct {
	nodes []redistable.NodePolicy
	err   error
	reads atomic.Int64
}

func (s *servers) read(context.Context) ([]redistable.NodePolicy, error) {
	s.reads.Add(1)
	return s.nodes, s.err
}

func openChecked(t *testing.T, check *redistable.EvictionCheck) (*redistable.Table[string], error) {
	t.Helper()
	alg, err := fixedwindow.New(fixedwindow.Config{Limit: 5, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return redistable.Open(nil, redistable.Config[string]{Prefix: "rl:", Evictions: check}, store.LimitsOf(alg), clock.Local())
}

func TestEvictionCheck(t *testing.T) {
	unreachable := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	refused := errors.New("NOPERM this user has no permissions to run the 'config|get' command")
	for _, c := range []struct {
		name  string
		nodes []redistable.NodePolicy
		err   error
		warn  []string // what each warning names, in order
		final bool     // the result is kept: no second read
	}{
		{"noeviction", []redistable.NodePolicy{{Node: "a:1", Policy: "noeviction"}}, nil, nil, true},
		{"volatile-ttl", []redistable.NodePolicy{{Node: "a:1", Policy: "volatile-ttl"}}, nil, nil, true},
		{"volatile-lru", []redistable.NodePolicy{{Node: "a:1", Policy: "volatile-lru"}}, nil, []string{"a:1 has maxmemory-policy volatile-lru"}, true},
		{"allkeys-lru", []redistable.NodePolicy{{Node: "a:1", Policy: "allkeys-lru"}}, nil, []string{"a:1 has maxmemory-policy allkeys-lru"}, true},
		{"unnamed", []redistable.NodePolicy{{Policy: "allkeys-random"}}, nil, []string{"the Redis server has maxmemory-policy allkeys-random"}, true},
		{"cluster", []redistable.NodePolicy{{Node: "c:3", Policy: "allkeys-lfu"}, {Node: "b:2", Policy: "noeviction"}, {Node: "a:1", Policy: "allkeys-lru"}}, nil,
			[]string{"a:1 has maxmemory-policy allkeys-lru", "c:3 has maxmemory-policy allkeys-lfu"}, true},
		{"refused", []redistable.NodePolicy{{Node: "a:1", Err: refused, Refused: true}}, nil, nil, true},
		{"empty", []redistable.NodePolicy{{Node: "a:1"}}, nil, nil, true},
		{"unreachable", []redistable.NodePolicy{{Node: "a:1", Err: unreachable}}, nil, nil, false},
		{"no topology", nil, unreachable, nil, false},
		{"one master down", []redistable.NodePolicy{{Node: "a:1", Policy: "allkeys-lru"}, {Node: "b:2", Err: unreachable}}, nil,
			[]string{"a:1 has maxmemory-policy allkeys-lru"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := &servers{nodes: c.nodes, err: c.err}
			now := time.Unix(1_700_000_000, 0)
			check, err := redistable.NewEvictionCheck(redistable.EvictionWarn, srv.read)
			if err != nil {
				t.Fatal(err)
			}
			check.SetClock(func() time.Time { return now })
			for i := range 3 {
				table, err := openChecked(t, check)
				if err != nil {
					t.Fatalf("Open #%d: %v", i, err)
				}
				got := table.Warnings()
				if len(got) != len(c.warn) {
					t.Fatalf("Open #%d: Warnings() = %v, want %d naming %q", i, got, len(c.warn), c.warn)
				}
				for j, w := range got {
					if !errors.Is(w, store.ErrEvicting) || !strings.Contains(w.Error(), c.warn[j]) {
						t.Errorf("Open #%d: warning %d = %v, want ErrEvicting naming %q", i, j, w, c.warn[j])
					}
				}
				if i == 1 {
					now = now.Add(redistable.EvictionRecheck)
				}
			}
			// Opens 0 and 1 share a read; 2 comes EvictionRecheck later.
			if want := int64(2); c.final {
				want = 1
				if n := srv.reads.Load(); n != want {
					t.Errorf("3 Opens read the policies %d times, want %d (the result is kept)", n, want)
				}
			} else if n := srv.reads.Load(); n != want {
				t.Errorf("3 Opens read the policies %d times, want %d (again only after EvictionRecheck)", n, want)
			}

			refuse, err := redistable.NewEvictionCheck(redistable.EvictionRefuse, srv.read)
			if err != nil {
				t.Fatal(err)
			}
			table, err := openChecked(t, refuse)
			if c.warn == nil && (err != nil || len(table.Warnings()) != 0) {
				t.Errorf("EvictionRefuse: Open: %v, want a table without warnings", err)
			}
			if c.warn != nil && (!errors.Is(err, store.ErrEvicting) || !strings.Contains(err.Error(), c.warn[0])) {
				t.Errorf("EvictionRefuse: Open: %v, want ErrEvicting naming %q", err, c.warn[0])
			}

			before := srv.reads.Load()
			off, err := redistable.NewEvictionCheck(redistable.EvictionUnchecked, srv.read)
			if err != nil {
				t.Fatal(err)
			}
			if table, err := openChecked(t, off); err != nil || len(table.Warnings()) != 0 || srv.reads.Load() != before {
				t.Errorf("EvictionUnchecked: Open: %v, %d warnings, %d reads; want a table without warnings and no read", err, len(table.Warnings()), srv.reads.Load()-before)
			}
		})
	}
	if _, err := redistable.NewEvictionCheck(redistable.EvictionUnchecked+1, nil); !errors.Is(err, algorithm.ErrInvalidConfig) {
		t.Errorf("NewEvictionCheck(unknown mode): %v, want ErrInvalidConfig", err)
	}
}

// TestEvictionCheckRecovers checks that a server found evicting is not
// forgotten when a later check cannot reach it, and that a check that
// reaches every server at last is kept.
func TestEvictionCheckRecovers(t *testing.T) {
	srv := &servers{nodes: []redistable.NodePolicy{{Node: "a:1", Err: errors.New("i/o timeout")}}}
	now := time.Unix(1_700_000_000, 0)
	check, err := redistable.NewEvictionCheck(redistable.EvictionWarn, srv.read)
	if err != nil {
		t.Fatal(err)
	}
	check.SetClock(func() time.Time { return now })
	warnings := func() int {
		t.Helper()
		table, err := openChecked(t, check)
		if err != nil {
			t.Fatal(err)
		}
		return len(table.Warnings())
	}
	for i, step := range []struct {
		nodes []redistable.NodePolicy
		want  int
		reads int64
	}{
		{nil, 0, 1}, // down
		{[]redistable.NodePolicy{{Node: "a:1", Policy: "allkeys-lru"}, {Node: "b:2", Err: errors.New("i/o timeout")}}, 1, 2},
		{[]redistable.NodePolicy{{Node: "a:1", Err: errors.New("i/o timeout")}, {Node: "b:2", Policy: "noeviction"}}, 1, 3},
		{[]redistable.NodePolicy{{Node: "a:1", Policy: "allkeys-lru"}, {Node: "b:2", Policy: "allkeys-lfu"}}, 2, 4},
		{[]redistable.NodePolicy{{Node: "a:1", Err: errors.New("i/o timeout")}}, 2, 4}, // kept: not read again
	} {
		if step.nodes != nil {
			srv.nodes = step.nodes
		}
		if got := warnings(); got != step.want || srv.reads.Load() != step.reads {
			t.Errorf("step %d: %d warnings after %d reads, want %d after %d", i, got, srv.reads.Load(), step.want, step.reads)
		}
		now = now.Add(redistable.EvictionRecheck)
	}
}
