package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// evictionCheckTimeout bounds the reading of every server's policy.
const evictionCheckTimeout = time.Second

// evictionRecheck is how long a check that did not reach every server
// stands before an Open reads the policies again: a Redis that is down
// makes Open wait for the check's timeout at most this often.
const evictionRecheck = 10 * time.Second

// evictionInterval is how often a store reads the servers' policies again
// once its first Open has, unless told otherwise (WithEvictionCheckInterval):
// the first decision after the interval is over
// starts a check, in a goroutine of its own that ends with it (within
// evictionCheckTimeout), so that a server switched to a policy that
// evicts is noticed while the tables decide. A variable, for tests.
var evictionInterval = time.Minute

// evictionAfterOOM is how soon after the last check an OOM reply makes the
// next decision read the policies again, rather than after
// evictionInterval: a server out of memory is one an operator may switch
// to a policy that evicts. A variable, for tests.
var evictionAfterOOM = time.Second

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

// policyReader reads the maxmemory-policy of every server a client sends
// limiter keys to (every master of a cluster), within ctx. Its error
// means the servers could not even be listed (a cluster's topology could
// not be loaded); a later Open asks again.
type policyReader func(ctx context.Context) ([]NodePolicy, error)

// evicts reports whether policy may evict keys that hold limiter state
// while they are still in use, whatever how close they are to expiry: the
// allkeys-* policies, and volatile-lru, volatile-lfu and volatile-random,
// which evict keys with a TTL, and every limiter key has one (for a Redis
// of limiter keys they are the allkeys-* policies). noeviction never
// evicts (writes fail with OOM instead). volatile-ttl is not reported: it
// evicts the key soonest to expire first, which for a limiter is the one
// closest to fresh, the cheapest to lose (README says what an attacker
// who drains each of its keys can still do under it).
func evicts(policy string) bool {
	switch policy {
	case "volatile-lru", "volatile-lfu", "volatile-random":
		return true
	}
	return strings.HasPrefix(policy, "allkeys-")
}

// evictingError returns the error that reports node's policy: it wraps
// store.ErrEvicting and names both.
func evictingError(node, policy string) error {
	server := "the Redis server"
	if node != "" {
		server = "Redis at " + node
	}
	return fmt.Errorf("%w: %s has maxmemory-policy %s, which under memory pressure evicts limiter keys (every one has a TTL), and an evicted key starts afresh: a spent client is admitted again (noeviction keeps every key, volatile-ttl evicts the ones closest to fresh first; see WithEvictionCheck)",
		store.ErrEvicting, server, policy)
}

// evictionWatch reads the servers' maxmemory-policy for a store, once
// for all its tables at their Open: the result is kept once every server
// has answered (with its policy or a refusal). A check that did not reach
// them all is tried again by an Open at least evictionRecheck later;
// meanwhile Open reports what the servers that answered said.
//
// The tables' decisions read the policies again (Poll): at most once per
// evictionInterval, or evictionAfterOOM after a table saw an OOM reply
// (Soon), each time in a goroutine that ends with the check. What a later
// check finds that the one before did not is reported once to each table's
// reporter (Table.ReportTo); with EvictionRefuse, decisions fail with an
// error wrapping store.ErrEvicting while a server may evict. Its methods
// are safe for concurrent use.
type evictionWatch struct {
	mode  EvictionCheck
	read  policyReader
	now   func() time.Time
	every time.Duration // evictionInterval, or the store's own

	mu      sync.Mutex
	done    bool      // every server answered: found is final
	checked time.Time // when a check that did not reach them all ran
	found   []error   // one evictingError per server that may evict
	news    []error   // what the last change of found added to it

	next    atomic.Int64          // Unix ns from which a decision starts a check
	last    atomic.Int64          // Unix ns at which the last check started
	running atomic.Bool           // a check's goroutine is running
	gen     atomic.Uint64         // counts the changes of found
	refusal atomic.Pointer[error] // EvictionRefuse: found, as an error, while not empty
}

// newEvictionWatch returns a check in mode that reads policies with read.
// It returns an error wrapping algorithm.ErrInvalidConfig for an unknown
// mode.
func newEvictionWatch(mode EvictionCheck, read policyReader) (*evictionWatch, error) {
	if mode < EvictionWarn || mode > EvictionUnchecked {
		return nil, fmt.Errorf("%w: unknown eviction check %d", algorithm.ErrInvalidConfig, mode)
	}
	return &evictionWatch{mode: mode, read: read, now: time.Now, every: evictionInterval}, nil
}

// SetClock makes the check read the time from now, for tests of
// evictionRecheck.
func (c *evictionWatch) SetClock(now func() time.Time) { c.now = now }

// Run checks the servers' policies unless a previous check has, and
// returns the warnings a table reports: nil with EvictionUnchecked or
// when no server may evict. With EvictionRefuse, a server that may evict
// is an error instead. A server that cannot be asked is neither.
func (c *evictionWatch) Run() (warnings []error, err error) {
	if c == nil || c.mode == EvictionUnchecked {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done && (c.checked.IsZero() || c.now().Sub(c.checked) >= evictionRecheck) {
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

// Gen returns the number of changes of what the check found, for a table
// opened now, which Open's warnings tell of (see Poll).
func (c *evictionWatch) Gen() uint64 {
	if c == nil {
		return 0
	}
	return c.gen.Load()
}

// Poll is a table's look at the check, at each decision: it starts a
// check when one is due (see evictionWatch), reports to *report, once,
// what the latest change of the findings added when the table has not
// seen that change (seen holds the last it saw), and returns the
// findings as an error wrapping store.ErrEvicting with EvictionRefuse,
// while a server may evict. It costs a decision two atomic loads and a
// read of the time when nothing is due.
func (c *evictionWatch) Poll(seen *atomic.Uint64, report *atomic.Pointer[func(error)]) error {
	if c == nil || c.mode == EvictionUnchecked {
		return nil
	}
	if c.now().UnixNano() >= c.next.Load() && c.running.CompareAndSwap(false, true) {
		go c.recheck()
	}
	if g := c.gen.Load(); seen.Load() != g && seen.Swap(g) != g {
		if f := report.Load(); f != nil {
			c.mu.Lock()
			news := slices.Clone(c.news)
			c.mu.Unlock()
			for _, w := range news {
				(*f)(w)
			}
		}
	}
	if err := c.refusal.Load(); err != nil {
		return *err
	}
	return nil
}

// Running reports whether a check that a decision started is running.
func (c *evictionWatch) Running() bool { return c.running.Load() }

// Soon makes the next decision at least evictionAfterOOM after the last
// check start another: a table saw an OOM reply.
func (c *evictionWatch) Soon() {
	if c == nil || c.mode == EvictionUnchecked {
		return
	}
	due := c.last.Load() + int64(evictionAfterOOM)
	for {
		next := c.next.Load()
		if next <= due || c.next.CompareAndSwap(next, due) {
			return
		}
	}
}

// recheck is the goroutine of a check a decision started: it ends with
// the check, within evictionCheckTimeout.
func (c *evictionWatch) recheck() {
	defer c.running.Store(false)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.check()
}

// check reads the policies; c.mu is held. When what it finds differs from
// what the check before found, it counts a change (gen), keeps what the
// change added (news), and sets the refusal of EvictionRefuse.
func (c *evictionWatch) check() {
	start := c.now()
	c.last.Store(start.UnixNano())
	c.next.Store(start.Add(c.every).UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), evictionCheckTimeout)
	defer cancel()
	nodes, err := c.read(ctx)
	complete := err == nil
	var found []error
	for _, n := range nodes {
		switch {
		case n.Err != nil:
			complete = complete && n.Refused
		case evicts(n.Policy):
			found = append(found, evictingError(n.Node, n.Policy))
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
	if !slices.EqualFunc(found, c.found, func(a, b error) bool { return a.Error() == b.Error() }) {
		var news []error
		for _, f := range found {
			if !slices.ContainsFunc(c.found, func(old error) bool { return old.Error() == f.Error() }) {
				news = append(news, f)
			}
		}
		c.news = news
		c.gen.Add(1)
		if c.mode == EvictionRefuse && len(found) > 0 {
			err := errors.Join(found...)
			c.refusal.Store(&err)
		} else {
			c.refusal.Store(nil)
		}
	}
	c.found, c.done = found, complete
	c.checked = c.now()
}

// tableEviction is a table's part in its store's eviction check.
type tableEviction struct {
	check  *evictionWatch
	seen   atomic.Uint64               // the last change of check's findings reported (Poll)
	report atomic.Pointer[func(error)] // where later findings go (ReportTo)
}

// ReportTo makes the table pass to report each problem a later check of
// the servers finds (store.Reporter): a server switched to a
// maxmemory-policy that may evict, as an error wrapping store.ErrEvicting.
func (t *Table[K]) ReportTo(report func(error)) { t.evict.report.Store(&report) }

// evicting is the table's look at its store's eviction check at each
// decision (evictionWatch.Poll).
func (t *Table[K]) evicting() error { return t.evict.check.Poll(&t.evict.seen, &t.evict.report) }
