package redisstore

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
	"github.com/go-ratelimit/ratelimit/store"
)

func TestEvicts(t *testing.T) {
	for policy, want := range map[string]bool{
		"allkeys-lru": true, "allkeys-lfu": true, "allkeys-random": true,
		"volatile-lru": true, "volatile-lfu": true, "volatile-random": true,
		"noeviction": false, "volatile-ttl": false,
		"": false,
	} {
		if got := evicts(policy); got != want {
			t.Errorf("evicts(%q) = %v, want %v", policy, got, want)
		}
	}
}

// servers is a policyReader over a fixed answer, counting its reads.
type servers struct {
	nodes []NodePolicy
	err   error
	reads atomic.Int64
}

func (s *servers) read(context.Context) ([]NodePolicy, error) {
	s.reads.Add(1)
	return s.nodes, s.err
}

func openChecked(t *testing.T, check *evictionWatch) (*Table[string], error) {
	t.Helper()
	alg, err := fixedwindow.New(fixedwindow.Config{Limit: 5, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return open(nil, config[string]{Prefix: "rl:", Evictions: check}, store.LimitsOf(alg), clock.Local())
}

func TestEvictionCheck(t *testing.T) {
	unreachable := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	refused := errors.New("NOPERM this user has no permissions to run the 'config|get' command")
	for _, c := range []struct {
		name  string
		nodes []NodePolicy
		err   error
		warn  []string // what each warning names, in order
		final bool     // the result is kept: no second read
	}{
		{"noeviction", []NodePolicy{{Node: "a:1", Policy: "noeviction"}}, nil, nil, true},
		{"volatile-ttl", []NodePolicy{{Node: "a:1", Policy: "volatile-ttl"}}, nil, nil, true},
		{"volatile-lru", []NodePolicy{{Node: "a:1", Policy: "volatile-lru"}}, nil, []string{"a:1 has maxmemory-policy volatile-lru"}, true},
		{"allkeys-lru", []NodePolicy{{Node: "a:1", Policy: "allkeys-lru"}}, nil, []string{"a:1 has maxmemory-policy allkeys-lru"}, true},
		{"unnamed", []NodePolicy{{Policy: "allkeys-random"}}, nil, []string{"the Redis server has maxmemory-policy allkeys-random"}, true},
		{"cluster", []NodePolicy{{Node: "c:3", Policy: "allkeys-lfu"}, {Node: "b:2", Policy: "noeviction"}, {Node: "a:1", Policy: "allkeys-lru"}}, nil,
			[]string{"a:1 has maxmemory-policy allkeys-lru", "c:3 has maxmemory-policy allkeys-lfu"}, true},
		{"refused", []NodePolicy{{Node: "a:1", Err: refused, Refused: true}}, nil, nil, true},
		{"empty", []NodePolicy{{Node: "a:1"}}, nil, nil, true},
		{"unreachable", []NodePolicy{{Node: "a:1", Err: unreachable}}, nil, nil, false},
		{"no topology", nil, unreachable, nil, false},
		{"one master down", []NodePolicy{{Node: "a:1", Policy: "allkeys-lru"}, {Node: "b:2", Err: unreachable}}, nil,
			[]string{"a:1 has maxmemory-policy allkeys-lru"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := &servers{nodes: c.nodes, err: c.err}
			now := time.Unix(1_700_000_000, 0)
			check, err := newEvictionWatch(EvictionWarn, srv.read)
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
					now = now.Add(evictionRecheck)
				}
			}
			// Opens 0 and 1 share a read; 2 comes evictionRecheck later.
			if want := int64(2); c.final {
				want = 1
				if n := srv.reads.Load(); n != want {
					t.Errorf("3 Opens read the policies %d times, want %d (the result is kept)", n, want)
				}
			} else if n := srv.reads.Load(); n != want {
				t.Errorf("3 Opens read the policies %d times, want %d (again only after evictionRecheck)", n, want)
			}

			refuse, err := newEvictionWatch(EvictionRefuse, srv.read)
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
			off, err := newEvictionWatch(EvictionUnchecked, srv.read)
			if err != nil {
				t.Fatal(err)
			}
			if table, err := openChecked(t, off); err != nil || len(table.Warnings()) != 0 || srv.reads.Load() != before {
				t.Errorf("EvictionUnchecked: Open: %v, %d warnings, %d reads; want a table without warnings and no read", err, len(table.Warnings()), srv.reads.Load()-before)
			}
		})
	}
	if _, err := newEvictionWatch(EvictionUnchecked+1, nil); !errors.Is(err, algorithm.ErrInvalidConfig) {
		t.Errorf("newEvictionWatch(unknown mode): %v, want ErrInvalidConfig", err)
	}
}

// TestEvictionCheckRecovers checks that a server found evicting is not
// forgotten when a later check cannot reach it, and that a check that
// reaches every server at last is kept.
func TestEvictionCheckRecovers(t *testing.T) {
	srv := &servers{nodes: []NodePolicy{{Node: "a:1", Err: errors.New("i/o timeout")}}}
	now := time.Unix(1_700_000_000, 0)
	check, err := newEvictionWatch(EvictionWarn, srv.read)
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
		nodes []NodePolicy
		want  int
		reads int64
	}{
		{nil, 0, 1}, // down
		{[]NodePolicy{{Node: "a:1", Policy: "allkeys-lru"}, {Node: "b:2", Err: errors.New("i/o timeout")}}, 1, 2},
		{[]NodePolicy{{Node: "a:1", Err: errors.New("i/o timeout")}, {Node: "b:2", Policy: "noeviction"}}, 1, 3},
		{[]NodePolicy{{Node: "a:1", Policy: "allkeys-lru"}, {Node: "b:2", Policy: "allkeys-lfu"}}, 2, 4},
		{[]NodePolicy{{Node: "a:1", Err: errors.New("i/o timeout")}}, 2, 4}, // kept: not read again
	} {
		if step.nodes != nil {
			srv.nodes = step.nodes
		}
		if got := warnings(); got != step.want || srv.reads.Load() != step.reads {
			t.Errorf("step %d: %d warnings after %d reads, want %d after %d", i, got, srv.reads.Load(), step.want, step.reads)
		}
		now = now.Add(evictionRecheck)
	}
}

// switchable is a policyReader of one server whose policy the test
// changes, counting its reads.
type switchable struct {
	policy atomic.Pointer[string]
	reads  atomic.Int64
}

func (s *switchable) set(policy string) { s.policy.Store(&policy) }

func (s *switchable) read(context.Context) ([]NodePolicy, error) {
	s.reads.Add(1)
	return []NodePolicy{{Node: "a:1", Policy: *s.policy.Load()}}, nil
}

// TestEvictionRecheck checks that decisions read the policies again, at
// most once per evictionInterval, or evictionAfterOOM after an OOM reply
// (Soon), each in a goroutine that ends: a server switched to allkeys-lru
// after the first Open is reported once to each table's reporter
// (EvictionWarn), or makes decisions fail with ErrEvicting
// (EvictionRefuse) until it is switched back.
func TestEvictionRecheck(t *testing.T) {
	for _, mode := range []EvictionCheck{EvictionWarn, EvictionRefuse} {
		t.Run(map[EvictionCheck]string{EvictionWarn: "warn", EvictionRefuse: "refuse"}[mode], func(t *testing.T) {
			srv := &switchable{}
			srv.set("noeviction")
			var now atomic.Int64
			now.Store(time.Unix(1_700_000_000, 0).UnixNano())
			advance := func(d time.Duration) { now.Add(int64(d)) }
			check, err := newEvictionWatch(mode, srv.read)
			if err != nil {
				t.Fatal(err)
			}
			check.SetClock(func() time.Time { return time.Unix(0, now.Load()) })
			table, err := openChecked(t, check)
			if err != nil || len(table.Warnings()) != 0 {
				t.Fatalf("Open on noeviction: %v, %v", table.Warnings(), err)
			}
			var seen atomic.Uint64
			seen.Store(check.Gen())
			reports := make(chan error, 10)
			var report atomic.Pointer[func(error)]
			f := func(err error) { reports <- err }
			report.Store(&f)
			// poll polls until the check has read the policies reads times
			// and has ended, and returns a Poll's error after that.
			poll := func(reads int64) error {
				t.Helper()
				deadline := time.Now().Add(5 * time.Second)
				for {
					check.Poll(&seen, &report)
					if srv.reads.Load() == reads && !check.Running() {
						return check.Poll(&seen, &report)
					}
					if time.Now().After(deadline) {
						t.Fatalf("the policies were read %d times, want %d", srv.reads.Load(), reads)
					}
					time.Sleep(time.Millisecond)
				}
			}
			srv.set("allkeys-lru")
			for range 100 {
				if err := check.Poll(&seen, &report); err != nil {
					t.Fatalf("Poll before evictionInterval: %v", err)
				}
			}
			if n := srv.reads.Load(); n != 1 {
				t.Fatalf("100 decisions within evictionInterval read the policies %d times, want once (at Open)", n)
			}
			advance(evictionInterval)
			err = poll(2)
			if mode == EvictionRefuse && (!errors.Is(err, store.ErrEvicting) || !strings.Contains(err.Error(), "allkeys-lru")) {
				t.Errorf("EvictionRefuse: a decision after the check found allkeys-lru: %v, want ErrEvicting naming it", err)
			}
			if mode == EvictionWarn && err != nil {
				t.Errorf("EvictionWarn: a decision after the check: %v, want none", err)
			}
			select {
			case w := <-reports:
				if !errors.Is(w, store.ErrEvicting) || !strings.Contains(w.Error(), "a:1 has maxmemory-policy allkeys-lru") {
					t.Errorf("reported %v, want ErrEvicting naming a:1 and allkeys-lru", w)
				}
			default:
				t.Errorf("nothing reported after the check found allkeys-lru")
			}
			check.Poll(&seen, &report)
			if len(reports) != 0 {
				t.Errorf("reported again: %v", <-reports)
			}
			// An OOM reply: the next decision evictionAfterOOM after the last
			// check reads the policies again, well within evictionInterval.
			srv.set("noeviction")
			advance(evictionAfterOOM)
			check.Poll(&seen, &report)
			if n := srv.reads.Load(); n != 2 {
				t.Fatalf("a decision evictionAfterOOM later without an OOM read the policies: %d reads, want 2", n)
			}
			check.Soon()
			if err := poll(3); err != nil {
				t.Errorf("a decision after the server went back to noeviction: %v, want none", err)
			}
			if len(reports) != 0 {
				t.Errorf("reported when the server went back to noeviction: %v", <-reports)
			}
			// No check runs between schedules.
			for range 10 {
				check.Poll(&seen, &report)
			}
			if n := srv.reads.Load(); n != 3 || check.Running() {
				t.Errorf("%d reads, a check running: %v; want 3 and none", n, check.Running())
			}
		})
	}
}
