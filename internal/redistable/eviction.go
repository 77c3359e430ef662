package redistable

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// EvictionMode says what opening a table does about a Redis whose
// maxmemory-policy may evict limiter state (see Evicts). The stores' own
// EvictionCheck types convert to it, value for value.
type EvictionMode int

const (
	// EvictionWarn opens the table, whose Warnings then report each
	// server that may evict (an error wrapping store.ErrEvicting).
	EvictionWarn EvictionMode = iota
	// EvictionRefuse fails Open with an error wrapping store.ErrEvicting.
	EvictionRefuse
	// EvictionUnchecked does not read the policy.
	EvictionUnchecked
)

// EvictionCheckTimeout bounds the reading of every server's policy.
const EvictionCheckTimeout = time.Second

// EvictionRecheck is how long a check that did not reach every server
// stands before an Open reads the policies again: a Redis that is down
// makes Open wait for the check's timeout at most this often.
const EvictionRecheck = 10 * time.Second

// NodePolicy is what one Redis server answered to CONFIG GET
// maxmemory-policy.
type NodePolicy struct {
	// Node names the server (its address), "" when the client does not say.
	Node string
	// Policy is its maxmemory-policy; "" when it did not say (Err, or a
	// server without that setting).
	Policy string
	// Err is why the policy could not be read.
	Err error
	// Refused reports that Err is the server's answer: it will not tell
	// (a managed service or an ACL that refuses CONFIG, miniredis), and
	// asking again will not help. Otherwise the server was not reached,
	// and a later Open asks again.
	Refused bool
}

// PolicyReader reads the maxmemory-policy of every server a client sends
// limiter keys to (every master of a cluster), within ctx. Its error
// means the servers could not even be listed (a cluster's topology could
// not be loaded); a later Open asks again.
type PolicyReader func(ctx context.Context) ([]NodePolicy, error)

// Evicts reports whether policy may evict keys that hold limiter state
// while they are still in use, whatever how close they are to expiry: the
// allkeys-* policies, and volatile-lru, volatile-lfu and volatile-random,
// which evict keys with a TTL, and every limiter key has one (for a Redis
// of limiter keys they are the allkeys-* policies). noeviction never
// evicts (writes fail with OOM instead). volatile-ttl is not reported: it
// evicts the key soonest to expire first, which for a limiter is the one
// closest to fresh, the cheapest to lose (README says what an attacker
// who drains each of its keys can still do under it).
func Evicts(policy string) bool {
	switch policy {
	case "volatile-lru", "volatile-lfu", "volatile-random":
		return true
	}
	return strings.HasPrefix(policy, "allkeys-")
}

// EvictingError returns the error that reports node's policy: it wraps
// store.ErrEvicting and names both.
func EvictingError(node, policy string) error {
	server := "the Redis server"
	if node != "" {
		server = "Redis at " + node
	}
	return fmt.Errorf("%w: %s has maxmemory-policy %s, which under memory pressure evicts limiter keys (every one has a TTL), and an evicted key starts afresh: a spent client is admitted again (noeviction keeps every key, volatile-ttl evicts the ones closest to fresh first; see WithEvictionCheck)",
		store.ErrEvicting, server, policy)
}

// EvictionCheck reads the servers' maxmemory-policy for a store, once
// for all its tables: the result is kept once every server has answered
// (with its policy or a refusal). A check that did not reach them all is
// tried again by an Open at least EvictionRecheck later; meanwhile Open
// reports what the servers that answered said. Its methods are safe for
// concurrent use.
type EvictionCheck struct {
	mode EvictionMode
	read PolicyReader
	now  func() time.Time

	mu      sync.Mutex
	done    bool      // every server answered: found is final
	checked time.Time // when a check that did not reach them all ran
	found   []error   // one EvictingError per server that may evict
}

// NewEvictionCheck returns a check in mode that reads policies with read.
// It returns an error wrapping algorithm.ErrInvalidConfig for an unknown
// mode.
func NewEvictionCheck(mode EvictionMode, read PolicyReader) (*EvictionCheck, error) {
	if mode < EvictionWarn || mode > EvictionUnchecked {
		return nil, fmt.Errorf("%w: unknown eviction check %d", algorithm.ErrInvalidConfig, mode)
	}
	return &EvictionCheck{mode: mode, read: read, now: time.Now}, nil
}

// SetClock makes the check read the time from now, for tests of
// EvictionRecheck.
func (c *EvictionCheck) SetClock(now func() time.Time) { c.now = now }

// Run checks the servers' policies unless a previous check has, and
// returns the warnings a table reports: nil with EvictionUnchecked or
// when no server may evict. With EvictionRefuse, a server that may evict
// is an error instead. A server that cannot be asked is neither.
func (c *EvictionCheck) Run() (warnings []error, err error) {
	if c == nil || c.mode == EvictionUnchecked {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done && (c.checked.IsZero() || c.now().Sub(c.checked) >= EvictionRecheck) {
		c.check()
	}
	if len(c.found) == 0 {
		return nil, nil
	}
	if c.mode == EvictionRefuse {
		return nil, errors.Join(c.found...)
	}
	return slices.Clone(c.found), nil
}

// check reads the policies; c.mu is held.
func (c *EvictionCheck) check() {
	ctx, cancel := context.WithTimeout(context.Background(), EvictionCheckTimeout)
	defer cancel()
	nodes, err := c.read(ctx)
	complete := err == nil
	var found []error
	for _, n := range nodes {
		switch {
		case n.Err != nil:
			complete = complete && n.Refused
		case Evicts(n.Policy):
			found = append(found, EvictingError(n.Node, n.Policy))
		}
	}
	if !complete {
		// A server found evicting before is not forgotten because it
		// was not reached this time.
		for _, old := range c.found {
			if !slices.ContainsFunc(found, func(e error) bool { return e.Error() == old.Error() }) {
				found = append(found, old)
			}
		}
	}
	// Sorted, so that a cluster's warnings read the same at every Open.
	slices.SortFunc(found, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	c.found, c.done = found, complete
	c.checked = c.now()
}
