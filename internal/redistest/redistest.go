// Package redistest finds and starts the Redis servers that tests of the
// Redis stores run against: an embedded miniredis always, a real
// standalone Redis at $RATELIMIT_REDIS_ADDR and a real Redis Cluster at
// $RATELIMIT_REDIS_CLUSTER_ADDRS when they are set (.ci/run sets both).
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit/store/redisstore"
)

// The environment variables naming real servers.
const (
	EnvAddr    = "RATELIMIT_REDIS_ADDR"          // host:port of a standalone server
	EnvCluster = "RATELIMIT_REDIS_CLUSTER_ADDRS" // comma-separated cluster seed nodes
)

// Target is a Redis deployment to test against.
type Target struct {
	// Name names the target in subtest names: "miniredis", "redis", "cluster".
	Name string
	// Addrs are the addresses to dial (seed nodes for a cluster).
	Addrs []string
	// Cluster reports a Redis Cluster.
	Cluster bool
	// Mini is the embedded server, for the miniredis target only.
	Mini *miniredis.Miniredis
	// Username and Password, when set, authenticate the clients GoRedis
	// and Rueidis make (an ACL user of a private server).
	Username, Password string
	// TTLMargin is the TTL margin the tests' store constructors give the
	// stores (WithTTLMargin). Suites on fake clocks need one on real
	// Redis: its TTLs count real time, which passes while a fake clock
	// stands still, so keys would expire early in the suite's time.
	TTLMargin time.Duration
	// MaxKeyBytes, when not 0, is the longest key the tests' store
	// constructors let the stores accept (WithMaxKeyBytes).
	MaxKeyBytes int
	// Eviction is the eviction check the tests' store constructors give
	// the stores (WithEvictionCheck).
	Eviction redisstore.EvictionCheck
	// EvictionInterval, when not 0, is how often the stores read the
	// servers' maxmemory-policy again (WithEvictionCheckInterval).
	EvictionInterval time.Duration
	// NoCoalescing, when set, makes the tests' store constructors turn
	// coalescing off (WithCoalescing(0)).
	NoCoalescing bool
}

// Miniredis starts an embedded server for the test.
func Miniredis(t testing.TB) Target {
	mr := miniredis.RunT(t)
	return Target{Name: "miniredis", Addrs: []string{mr.Addr()}, Mini: mr}
}

// Standalone returns the real standalone server, or skips the test with
// a message saying how to run it.
func Standalone(t testing.TB) Target {
	addr := os.Getenv(EnvAddr)
	if addr == "" {
		t.Skipf("no real Redis: set %s=host:port to run this test (bash .ci/run starts one)", EnvAddr)
	}
	return Target{Name: "redis", Addrs: []string{addr}}
}

// LookupStandalone returns the real standalone server, and whether one is
// configured, for benchmarks that run with or without it.
func LookupStandalone() (Target, bool) {
	addr := os.Getenv(EnvAddr)
	return Target{Name: "redis", Addrs: []string{addr}}, addr != ""
}

// Cluster returns the real cluster, or skips the test with a message
// saying how to run it.
func Cluster(t testing.TB) Target {
	addrs := os.Getenv(EnvCluster)
	if addrs == "" {
		t.Skipf("no Redis Cluster: set %s=host:port,host:port,... to run this test (bash .ci/run starts a 3-master cluster)", EnvCluster)
	}
	return Target{Name: "cluster", Addrs: strings.Split(addrs, ","), Cluster: true}
}

// Each runs f in a subtest for miniredis, the real server and the real
// cluster; the real ones skip when not configured.
func Each(t *testing.T, f func(t *testing.T, target Target)) {
	t.Run("miniredis", func(t *testing.T) { f(t, Miniredis(t)) })
	t.Run("redis", func(t *testing.T) { f(t, Standalone(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, Cluster(t)) })
}

// GoRedis returns a go-redis client for target, closed when the test ends.
// Its calls are bounded by their contexts alone (the stores' WithTimeout),
// not by go-redis's default read timeout of 3 s, which a large script on
// miniredis under -race on a loaded machine can outlast; and it never
// resends a command, so that a test's own script call that timed out is
// not run twice (the stores' calls are never resent, whatever the client).
func GoRedis(t testing.TB, target Target) redis.UniversalClient {
	var c redis.UniversalClient
	if target.Cluster {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: target.Addrs, ContextTimeoutEnabled: true,
			ReadTimeout: -1, MaxRetries: -1, Username: target.Username, Password: target.Password})
	} else {
		c = redis.NewClient(&redis.Options{Addr: target.Addrs[0], ContextTimeoutEnabled: true,
			ReadTimeout: -1, MaxRetries: -1, Username: target.Username, Password: target.Password})
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Rueidis returns a rueidis client for target, closed when the test ends.
func Rueidis(t testing.TB, target Target) rueidis.Client {
	opt := rueidis.ClientOption{InitAddress: target.Addrs, DisableCache: true,
		Username: target.Username, Password: target.Password}
	if target.Mini != nil {
		opt.ForceSingleClient = true
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("rueidis client for %s: %v", target.Name, err)
	}
	t.Cleanup(c.Close)
	return c
}

var prefixes atomic.Int64

// Prefix returns a key prefix no other call in this process returns, so
// tests sharing a real server never see each other's keys.
func Prefix(t testing.TB) string {
	return fmt.Sprintf("rltest:%d:%d:", os.Getpid(), prefixes.Add(1))
}

// Server is a redis-server process of the test's own, for tests that kill,
// restart or reconfigure a server.
type Server struct {
	Addr string
	t    testing.TB
	dir  string
	args []string
	cmd  *exec.Cmd
}

// StartServer starts a private redis-server on a free loopback port with
// extra args, stopped when the test ends. It skips the test unless real
// Redis tests are enabled ($RATELIMIT_REDIS_ADDR set) and redis-server is
// on the PATH.
func StartServer(t testing.TB, args ...string) *Server {
	Standalone(t) // skips when real Redis tests are off
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not on the PATH")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &Server{Addr: addr, t: t, dir: t.TempDir(), args: args}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Target returns the server as a standalone target named "private".
func (s *Server) Target() Target {
	return Target{Name: "private", Addrs: []string{s.Addr}}
}

// Start starts the server process (again, after Kill) and waits until it
// answers.
func (s *Server) Start() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	args := append([]string{"--bind", "127.0.0.1", "--port", port, "--dir", s.dir,
		"--save", "", "--appendonly", "no"}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	log, err := os.Create(filepath.Join(s.dir, "log"))
	if err != nil {
		s.t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	for i := 0; i < 100; i++ {
		if c.Ping(context.Background()).Err() == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	s.t.Fatalf("redis-server on %s did not answer:\n%s", s.Addr, out)
}

// Kill stops the server process at once (SIGKILL) and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Pause makes the server hold every script its clients send (CLIENT
// PAUSE WRITE: what they send runs once the pause ends) until resume is
// called, at the latest after a minute, and returns once the pause is in
// effect: the server's reply says so, not a probe's timeout, which a
// loaded machine can reach before the server is asleep. resume returns
// once the pause has ended.
func (s *Server) Pause() (resume func()) {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	if err := c.Do(context.Background(), "client", "pause", "60000", "write").Err(); err != nil {
		c.Close()
		s.t.Fatalf("CLIENT PAUSE on %s: %v", s.Addr, err)
	}
	return func() {
		s.t.Helper()
		defer c.Close()
		if err := c.Do(context.Background(), "client", "unpause").Err(); err != nil {
			s.t.Fatalf("CLIENT UNPAUSE on %s: %v", s.Addr, err)
		}
	}
}
