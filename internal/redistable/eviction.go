package redistable

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

// EvictionInterval is how often a store reads the servers' policies again
// once its first Open has: the first decision after the interval is over
// starts a check, in a goroutine of its own that ends with it (within
// EvictionCheckTimeout), so that a server switched to a policy that
// evicts is noticed while the tables decide. A variable, for tests.
var EvictionInterval = time.Minute

// EvictionAfterOOM is how soon after the last check an OOM reply makes the
// next decision read the policies again, rather than after
// EvictionInterval: a server out of memory is one an operator may switch
// to a policy that evicts. A variable, for tests.
var EvictionAfterOOM = time.Second

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
// for all its tables at their Open: the result is kept once every server
// has answered (with its policy or a refusal). A check that did not reach
// them all is tried again by an Open at least EvictionRecheck later;
// meanwhile Open reports what the servers that answered said.
//
// The tables' decisions read the policies again (Poll): at most once per
// EvictionInterval, or EvictionAfterOOM after a table saw an OOM reply
// (Soon), each time in a goroutine that ends with the check. What a later
// check finds that the one before did not is reported once to each table's
// reporter (Table.ReportTo); with EvictionRefuse, decisions fail with an
// error wrapping store.ErrEvicting while a server may evict. Its methods
// are safe for concurrent use.
type EvictionCheck struct {
	mode EvictionMode
	read PolicyReader
	now  func() time.Time

	mu      sync.Mutex
	done    bool      // every server answered: found is final
	checked time.Time // when a check that did not reach them all ran
	found   []error   // one EvictingError per server that may evict
	news    []error   // what the last change of found added to it

	next    atomic.Int64          // Unix ns from which a decision starts a check
	last    atomic.Int64          // Unix ns at which the last check started
	running atomic.Bool           // a check's goroutine is running
	gen     atomic.Uint64         // counts the changes of found
	refusal atomic.Pointer[error] // EvictionRefuse: found, as an error, while not empty
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

// Gen returns the number of changes of what the check found, for a table
// opened now, which Open's warnings tell of (see Poll).
func (c *EvictionCheck) Gen() uint64 {
	if c == nil {
		return 0
	}
	return c.gen.Load()
}

// Poll is a table's look at the check, at each decision: it starts a
// check when one is due (see EvictionCheck), reports to *report, once,
// what the latest change of the findings added when the table has not
// seen that change (seen holds the last it saw), and returns the
// findings as an error wrapping store.ErrEvicting with EvictionRefuse,
// while a server may evict. It costs a decision two atomic loads and a
// read of the time when nothing is due.
func (c *EvictionCheck) Poll(seen *atomic.Uint64, report *atomic.Pointer[func(error)]) error {
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
func (c *EvictionCheck) Running() bool { return c.running.Load() }

// Soon makes the next decision at least EvictionAfterOOM after the last
// check start another: a table saw an OOM reply.
func (c *EvictionCheck) Soon() {
	if c == nil || c.mode == EvictionUnchecked {
		return
	}
	due := c.last.Load() + int64(EvictionAfterOOM)
	for {
		next := c.next.Load()
		if next <= due || c.next.CompareAndSwap(next, due) {
			return
		}
	}
}

// recheck is the goroutine of a check a decision started: it ends with
// the check, within EvictionCheckTimeout.
func (c *EvictionCheck) recheck() {
	defer c.running.Store(false)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.check()
}

// check reads the policies; c.mu is held. When what it finds differs from
// what the check before found, it counts a change (gen), keeps what the
// change added (news), and sets the refusal of EvictionRefuse.
func (c *EvictionCheck) check() {
	start := c.now()
	c.last.Store(start.UnixNano())
	c.next.Store(start.Add(EvictionInterval).UnixNano())
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
	check  *EvictionCheck
	seen   atomic.Uint64               // the last change of check's findings reported (Poll)
	report atomic.Pointer[func(error)] // where later findings go (ReportTo)
}

// ReportTo makes the table pass to report each problem a later check of
// the servers finds (store.Reporter): a server switched to a
// maxmemory-policy that may evict, as an error wrapping store.ErrEvicting.
func (t *Table[K]) ReportTo(report func(error)) { t.evict.report.Store(&report) }

// evicting is the table's look at its store's eviction check at each
// decision (EvictionCheck.Poll).
func (t *Table[K]) evicting() error { return t.evict.check.Poll(&t.evict.seen, &t.evict.report) }
