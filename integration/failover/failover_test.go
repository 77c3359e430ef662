package failover_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

const (
	// failoverKeys keys of the failing master's slots are asked for.
	failoverKeys = 16
	// failoverLimit is each key's capacity; nothing refills during a test
	// (10^-5 token per second).
	failoverLimit = 300
)

// victimTargets returns failoverKeys targets whose slots one master
// serves, and that master's slot for the first.
func victimTargets(t *testing.T, c *cluster) ([]target, int64) {
	t.Helper()
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: failoverLimit, Rate: 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	first := target{alg: alg, prefix: prefix, key: "user:0"}
	slot := c.slot(first.name(t))
	master, _ := c.master(slot)
	targets := []target{first}
	for i := 1; len(targets) < failoverKeys; i++ {
		tg := target{alg: alg, prefix: prefix, key: fmt.Sprint("user:", i)}
		if m, _ := c.master(c.slot(tg.name(t))); m == master {
			targets = append(targets, tg)
		}
	}
	return targets, slot
}

// perTarget is what the decisions of one target add up to.
type perTarget struct {
	admitted, errors int64
	// lost is how many charges acknowledged before the failover the new
	// master did not have: the highest units used among admissions that
	// started before it, less the units the new master had when its first
	// admission was made. Only a failover at an instant after which the
	// old master serves nothing (a kill) splits the calls cleanly.
	lost int64
	// twice counts units admitted twice: admissions that left the same
	// units used as an earlier one.
	twice int64
}

// tally sums the decisions of each target, splitting those that started
// before at from the others to count lost charges (cost 1, no refill:
// an admission leaving Remaining r used unit limit−r, and each unit is
// admitted once unless a charge was lost).
func tally(ds []decision, targets int, limit int64, at time.Duration) []perTarget {
	pts := make([]perTarget, targets)
	maxBefore := make([]int64, targets)
	seen := make([]map[int64]bool, targets)
	for i := range seen {
		seen[i] = map[int64]bool{}
	}
	minAfter := make([]int64, targets)
	for i := range minAfter {
		minAfter[i] = limit + 1
	}
	for _, d := range ds {
		pt := &pts[d.target]
		switch {
		case d.err != nil:
			pt.errors++
		case d.allowed:
			pt.admitted++
			used := limit - d.remaining
			if seen[d.target][used] {
				pt.twice++
			}
			seen[d.target][used] = true
			if d.start < at {
				maxBefore[d.target] = max(maxBefore[d.target], used)
			} else {
				minAfter[d.target] = min(minAfter[d.target], used)
			}
		}
	}
	for i := range pts {
		if minAfter[i] <= limit {
			pts[i].lost = max(0, maxBefore[i]-(minAfter[i]-1))
		}
	}
	return pts
}

// TestFailoverManual fails over a master with CLUSTER FAILOVER on its
// replica under load. A manual failover waits for the replica to catch
// up, so no acknowledged charge is lost: no key admits more than its
// limit, and every key admits exactly its limit less the calls whose
// outcome is unknown (errors).
func TestFailoverManual(t *testing.T) {
	c := startCluster(t)
	targets, slot := victimTargets(t, c)
	l := startLoad(t, c, targets)
	l.waitAdmitted(t, failoverKeys*failoverLimit/4, 30*time.Second)
	master, replica := c.master(slot)
	if replica == nil {
		t.Fatalf("the master of slot %d has no replica", slot)
	}
	began := l.now()
	if err := replica.admin.Do(t.Context(), "cluster", "failover").Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER on %s: %v", replica.addr, err)
	}
	c.waitFor("the replica promoted", 20*time.Second, func() bool { return c.role(replica) == "master" })
	promoted := l.now()
	resumed := l.waitResumed(t, promoted, 20*time.Second)
	l.waitSaturated(t, 30, 60*time.Second)

	var admitted, errors, twice, over int64
	for i, pt := range tally(l.all(), len(targets), failoverLimit, began) {
		admitted, errors, twice = admitted+pt.admitted, errors+pt.errors, twice+pt.twice
		over += max(0, pt.admitted-failoverLimit)
		if pt.admitted > failoverLimit || pt.admitted < failoverLimit-pt.errors || pt.twice != 0 {
			t.Errorf("%s: %d admitted (limit %d), %d errors, %d units admitted twice; want the limit, less at most the errors, and each unit once",
				targets[i].key, pt.admitted, failoverLimit, pt.errors, pt.twice)
		}
	}
	t.Logf("CLUSTER FAILOVER of %s to %s under %d workers at %v: promoted after %v; decisions through go-redis resumed %v and rueidis %v after the promotion; %d keys admitted %d of %d, over-admission %d, %d units admitted twice, %d calls failed",
		master.addr, replica.addr, workers, began.Round(time.Millisecond), (promoted - began).Round(time.Millisecond),
		(resumed[0] - promoted).Round(time.Millisecond), (resumed[1] - promoted).Round(time.Millisecond),
		len(targets), admitted, int64(len(targets))*failoverLimit, over, twice, errors)
}

// TestFailoverKill kills a master under load while its replica lags: the
// replica is stopped (SIGSTOP) and its link to the master cut (CLIENT KILL
// TYPE replica), a few hundred charges are acknowledged by the master
// alone, then the master is killed (SIGKILL) and the replica resumed.
// Once the cluster has promoted the replica and the clients have followed,
// decisions resume; the keys admit more than their limits by at most the
// acknowledged charges the replica never received.
func TestFailoverKill(t *testing.T) {
	c := startCluster(t)
	targets, slot := victimTargets(t, c)
	l := startLoad(t, c, targets)
	l.waitAdmitted(t, failoverKeys*failoverLimit/4, 30*time.Second)
	master, replica := c.master(slot)
	if replica == nil {
		t.Fatalf("the master of slot %d has no replica", slot)
	}
	c.signal(replica, syscall.SIGSTOP)
	if err := master.admin.Do(t.Context(), "client", "kill", "type", "replica").Err(); err != nil {
		t.Fatalf("CLIENT KILL TYPE replica on %s: %v", master.addr, err)
	}
	lagFrom := l.admitted.Load()
	l.waitAdmitted(t, lagFrom+400, 30*time.Second)
	lag := l.admitted.Load() - lagFrom
	c.kill(master)
	killed := l.now() // the old master serves no call that starts from now on
	c.signal(replica, syscall.SIGCONT)
	c.waitFor("the replica promoted", 30*time.Second, func() bool { return c.role(replica) == "master" })
	promoted := l.now()
	resumed := l.waitResumed(t, promoted, 30*time.Second)
	l.waitSaturated(t, 30, 60*time.Second)

	var admitted, errors, lost, twice, over int64
	for i, pt := range tally(l.all(), len(targets), failoverLimit, killed) {
		admitted, errors, lost, twice = admitted+pt.admitted, errors+pt.errors, lost+pt.lost, twice+pt.twice
		o := max(0, pt.admitted-failoverLimit)
		over += o
		if o > pt.lost {
			t.Errorf("%s: %d admitted (limit %d): over-admission %d, more than the %d acknowledged charges the replica lacked",
				targets[i].key, pt.admitted, failoverLimit, o, pt.lost)
		}
	}
	if lost == 0 {
		t.Errorf("no acknowledged charge was lost: the replica did not lag as the test meant it to")
	}
	t.Logf("SIGKILL of %s, %d admissions after its replica %s was stopped and cut off: promoted %v after the kill; decisions through go-redis resumed %v and rueidis %v after the promotion; %d keys admitted %d of %d: over-admission %d (units admitted twice: %d), against %d acknowledged charges lost; %d calls failed",
		master.addr, lag, replica.addr, (promoted - killed).Round(time.Millisecond),
		(resumed[0] - promoted).Round(time.Millisecond), (resumed[1] - promoted).Round(time.Millisecond),
		len(targets), admitted, int64(len(targets))*failoverLimit, over, twice, lost, errors)
}

// TestResharding migrates the slot of two hot keys (one Limiter's token
// bucket and another's sliding log, same user key, so the same slot) to
// another master under load, a key at a time, and hands the slot over:
// calls on a migrated key are answered ASK, then MOVED, and both clients
// follow. No call fails, and each key admits exactly its limit. Between
// the two MIGRATEs, a script of both keys would get TRYAGAIN: the test
// checks that the stores recognise it as each client library returns it,
// and that the single-key scripts the stores send never got one.
func TestResharding(t *testing.T) {
	c := startCluster(t)
	const limit = 2000
	tb, err1 := tokenbucket.New(tokenbucket.Config{Capacity: limit, Rate: 1e-5})
	sl, err2 := slidinglog.New(slidinglog.Config{Limit: limit, Window: time.Hour})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	targets := []target{{tb, redistest.Prefix(t), "hot"}, {sl, redistest.Prefix(t), "hot"}}
	names := []string{targets[0].name(t), targets[1].name(t)}
	slot := c.slot(names[0])
	if s := c.slot(names[1]); s != slot {
		t.Fatalf("%s is in slot %d and %s in %d; want one slot", names[0], slot, names[1], s)
	}
	src, _ := c.master(slot)
	var dst *node
	for _, n := range c.nodes {
		if n != src && c.role(n) == "master" {
			dst = n
			break
		}
	}
	ctx := t.Context()
	srcID, dstID := c.id(src), c.id(dst)
	host, port := "127.0.0.1", dst.addr[len("127.0.0.1:"):]
	before := c.errorStats(src)

	l := startLoad(t, c, targets)
	step := func(share int64, what string, args ...any) {
		t.Helper()
		l.waitAdmitted(t, 2*limit*share/10, 30*time.Second)
		if err := src.admin.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	l.waitAdmitted(t, 2*limit/10, 30*time.Second)
	if err := dst.admin.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err(); err != nil {
		t.Fatalf("CLUSTER SETSLOT IMPORTING on %s: %v", dst.addr, err)
	}
	step(1, "CLUSTER SETSLOT MIGRATING", "cluster", "setslot", slot, "migrating", dstID)
	step(2, "MIGRATE "+names[0], "migrate", host, port, "", 0, 5000, "keys", names[0])

	// One key moved, the other not: a script of both gets TRYAGAIN, from
	// either client library.
	eval := []any{"eval", "return 1", 2, names[0], names[1]}
	if err := src.admin.Do(ctx, eval...).Err(); !isTryAgain(err) {
		t.Errorf("go-redis: EVAL of both keys on %s between the MIGRATEs: %v, want TRYAGAIN", src.addr, err)
	}
	single, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{src.addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	cmd := single.B().Eval().Script("return 1").Numkeys(2).Key(names[0], names[1]).Build()
	if err := single.Do(ctx, cmd).Error(); !isTryAgain(err) {
		t.Errorf("rueidis: EVAL of both keys on %s between the MIGRATEs: %v, want TRYAGAIN", src.addr, err)
	}

	step(3, "MIGRATE "+names[1], "migrate", host, port, "", 0, 5000, "keys", names[1])
	l.waitAdmitted(t, 2*limit*4/10, 30*time.Second)
	for _, n := range c.nodes {
		if c.role(n) == "master" {
			if err := n.admin.Do(ctx, "cluster", "setslot", slot, "node", dstID).Err(); err != nil {
				t.Fatalf("CLUSTER SETSLOT NODE on %s: %v", n.addr, err)
			}
		}
	}
	handed := l.now()
	l.waitSaturated(t, 30, 60*time.Second)
	if m, _ := c.master(slot); m != dst {
		t.Fatalf("slot %d is served by %s, want %s", slot, m.addr, dst.addr)
	}

	after := c.errorStats(src)
	replies := map[string]int64{}
	for _, e := range []string{"ASK", "MOVED", "TRYAGAIN"} {
		replies[e] = after[e] - before[e]
	}
	pts := tally(l.all(), len(targets), limit, handed)
	for i, pt := range pts {
		if pt.errors != 0 || pt.admitted != limit || pt.twice != 0 {
			t.Errorf("%s (%s): %d admitted, %d calls failed, %d units admitted twice; want exactly %d admitted, each once, and no failure", names[i], targets[i].alg.Spec().Name, pt.admitted, pt.errors, pt.twice, limit)
		}
	}
	if replies["ASK"] == 0 || replies["MOVED"] == 0 {
		t.Errorf("%s replied ASK %d times and MOVED %d times; want both, followed", src.addr, replies["ASK"], replies["MOVED"])
	}
	if replies["TRYAGAIN"] != 2 {
		t.Errorf("%s replied TRYAGAIN %d times, want 2 (the test's own two-key EVALs; the stores' scripts have one key)", src.addr, replies["TRYAGAIN"])
	}
	t.Logf("slot %d (%s, %s) migrated from %s to %s under %d workers: %s replied ASK %d times, MOVED %d, TRYAGAIN %d (the test's own); admitted %d and %d of %d each, no call failed",
		slot, names[0], names[1], src.addr, dst.addr, workers, src.addr, replies["ASK"], replies["MOVED"], replies["TRYAGAIN"],
		pts[0].admitted, pts[1].admitted, limit)
}

// isTryAgain reports whether err is Redis Cluster's TRYAGAIN reply: the
// error's text is the server's.
func isTryAgain(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "TRYAGAIN")
}
