package failover_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// envPorts names the port range the tests' clusters may use.
const envPorts = "RATELIMIT_REDIS_SPARE_PORTS"

// nodes is how many nodes a test cluster has: three masters, a replica
// each.
const nodes = 6

// ports returns the ports of a test cluster, or skips the test.
func ports(t *testing.T) []int {
	t.Helper()
	spec := os.Getenv(envPorts)
	if spec == "" {
		t.Skipf("no spare ports: set %s=first-last (six ports or more, each with port+10000 free) to run the failover tests", envPorts)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not on the PATH")
	}
	lo, hi, ok := strings.Cut(spec, "-")
	first, err1 := strconv.Atoi(lo)
	last, err2 := strconv.Atoi(hi)
	if !ok || err1 != nil || err2 != nil || last-first+1 < nodes || first < 1 || last+10000 > 65535 {
		t.Fatalf("%s=%q: want first-last, a range of at least %d ports below 55536", envPorts, spec, nodes)
	}
	var ps []int
	for p := first; p < first+nodes; p++ {
		ps = append(ps, p)
	}
	return ps
}

// node is one redis-server of a test cluster.
type node struct {
	addr  string
	dir   string
	cmd   *exec.Cmd
	admin *redis.Client // a plain client of this node alone
}

// cluster is a Redis Cluster of the test's own.
type cluster struct {
	t     *testing.T
	nodes []*node
}

// startCluster starts six nodes on ports and makes them a cluster of three
// masters with a replica each, with a node timeout of 1 s so that a dead
// master is replaced within seconds. Every node is killed when the test
// ends.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{t: t}
	// The directories are made before c.stop is registered: cleanups run
	// last registered first, so every node is killed before its directory
	// is removed. The other way round, a node still running could write
	// its log or nodes.conf into a directory being removed, and the
	// removal failed the test ("directory not empty").
	ps := ports(t)
	dirs := make([]string, len(ps))
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	t.Cleanup(c.stop)
	for i, port := range ps {
		for _, p := range []int{port, port + 10000} {
			if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err != nil {
				t.Fatalf("port %d is taken: %v", p, err)
			} else {
				l.Close()
			}
		}
		n := &node{addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dirs[i]}
		n.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", n.dir,
			"--save", "", "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1000", "--enable-debug-command", "yes")
		log, err := os.Create(filepath.Join(n.dir, "log"))
		if err != nil {
			t.Fatal(err)
		}
		n.cmd.Stdout, n.cmd.Stderr = log, log
		if err := n.cmd.Start(); err != nil {
			t.Fatalf("start redis-server on %s: %v", n.addr, err)
		}
		n.admin = redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1})
		c.nodes = append(c.nodes, n)
	}
	ctx := t.Context()
	for _, n := range c.nodes {
		c.waitFor(n.addr+" answering", 10*time.Second, func() bool { return n.admin.Ping(ctx).Err() == nil })
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, n.addr)
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.waitFor("the cluster ok on every node, every replica in sync", 30*time.Second, func() bool {
		for _, n := range c.nodes {
			info, err := n.admin.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
			role, err := n.admin.Do(ctx, "role").Slice()
			if err != nil {
				return false
			}
			if role[0] == "slave" && role[3] != "connected" {
				return false
			}
		}
		return true
	})
	return c
}

// stop kills every node that still runs.
func (c *cluster) stop() {
	for _, n := range c.nodes {
		n.admin.Close()
		if n.cmd != nil && n.cmd.Process != nil {
			n.cmd.Process.Signal(syscall.SIGCONT) // a node the test stopped dies too
			n.cmd.Process.Kill()
			n.cmd.Wait()
			n.cmd = nil
		}
	}
}

// kill kills n at once (SIGKILL).
func (c *cluster) kill(n *node) {
	n.cmd.Process.Kill()
	n.cmd.Wait()
	n.cmd = nil
}

// signal sends sig to n.
func (c *cluster) signal(n *node, sig syscall.Signal) {
	c.t.Helper()
	if err := n.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %v to %s: %v", sig, n.addr, err)
	}
}

// waitFor polls cond every 10 ms until it holds, or fails the test after
// limit.
func (c *cluster) waitFor(what string, limit time.Duration, cond func() bool) {
	c.t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within %v", what, limit)
		}
	}
}

// addrs returns every node's address, the clients' seeds.
func (c *cluster) addrs() []string {
	var as []string
	for _, n := range c.nodes {
		as = append(as, n.addr)
	}
	return as
}

// id returns n's cluster node ID.
func (c *cluster) id(n *node) string {
	c.t.Helper()
	id, err := n.admin.Do(c.t.Context(), "cluster", "myid").Text()
	if err != nil {
		c.t.Fatalf("CLUSTER MYID on %s: %v", n.addr, err)
	}
	return id
}

// byID returns the node whose ID is id.
func (c *cluster) byID(id string) *node {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.cmd != nil && c.id(n) == id {
			return n
		}
	}
	c.t.Fatalf("no running node has ID %s", id)
	return nil
}

// master returns the node that serves slot, as the first node that
// answers sees it, and its replica (nil when it has none).
func (c *cluster) master(slot int64) (master, replica *node) {
	c.t.Helper()
	ctx := c.t.Context()
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		shards, err := n.admin.ClusterSlots(ctx).Result()
		if err != nil {
			continue
		}
		for _, s := range shards {
			if int64(s.Start) <= slot && slot <= int64(s.End) {
				master := c.byID(s.Nodes[0].ID)
				return master, c.replicaOf(master)
			}
		}
	}
	c.t.Fatalf("no node serves slot %d", slot)
	return nil, nil
}

// replicaOf returns the running replica of master whose link to it is
// up, or nil.
func (c *cluster) replicaOf(master *node) *node {
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		role, err := n.admin.Do(c.t.Context(), "role").Slice()
		if err != nil || len(role) < 4 || role[0] != "slave" {
			continue
		}
		if fmt.Sprintf("%v:%v", role[1], role[2]) == master.addr && role[3] == "connected" {
			return n
		}
	}
	return nil
}

// role returns n's role: "master" or "slave".
func (c *cluster) role(n *node) string {
	role, err := n.admin.Do(context.Background(), "role").Slice()
	if err != nil || len(role) == 0 {
		return ""
	}
	s, _ := role[0].(string)
	return s
}

// slot returns the cluster slot of the Redis key name.
func (c *cluster) slot(name string) int64 {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		if slot, err := n.admin.ClusterKeySlot(c.t.Context(), name).Result(); err == nil {
			return slot
		}
	}
	c.t.Fatal("no node answers CLUSTER KEYSLOT")
	return 0
}

// errorStats returns a node's INFO errorstats: how many replies of each
// error prefix (ASK, MOVED, TRYAGAIN…) it sent.
func (c *cluster) errorStats(n *node) map[string]int64 {
	c.t.Helper()
	text, err := n.admin.Info(c.t.Context(), "errorstats").Result()
	if err != nil {
		c.t.Fatalf("INFO errorstats on %s: %v", n.addr, err)
	}
	stats := map[string]int64{}
	for _, line := range strings.Split(text, "\r\n") {
		name, v, ok := strings.Cut(line, ":count=")
		if !ok {
			continue
		}
		count, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			c.t.Fatalf("INFO errorstats: %q", line)
		}
		stats[strings.TrimPrefix(name, "errorstat_")] = count
	}
	return stats
}
