package redisstore

import (
	"context"
	"sync"
)

// Group commit: the TakeAlls of a store's tables on one Redis that
// arrive while calls are in flight wait, and go together in one multi
// script call (units, each all-or-none, decided in arrival order), as
// databases commit the transactions that wait for a log write. What
// Redis pays per call (reading and parsing the command, running a
// script, writing the reply), and the client's round trip, is then
// shared by the units of a batch. No timer: a batch forms only behind
// calls in flight, so a lone TakeAll is sent at once.

// DefaultCommitInFlight is how many multi script calls a store has in
// flight at once before TakeAlls wait to go together (WithGroupCommit).
const DefaultCommitInFlight = 2

// maxCommitUnits bounds the units of one batch; maxCommitGroups the
// groups (keys) of all its units, so that one script call stays short.
const (
	maxCommitUnits  = 64
	maxCommitGroups = 256
)

// committer queues a store's TakeAlls while its calls are in flight.
type committer[K comparable] struct {
	max int // calls in flight at most

	mu       sync.Mutex
	inFlight int
	queue    []*unit[K]
}

func newCommitter[K comparable](inFlight int) *committer[K] {
	return &committer[K]{max: inFlight}
}

// do decides u: at once when fewer than max calls are in flight, under
// ctx; otherwise in the next batch, sent under a context of its own
// bounded by the table's timeout. It returns when u's code and err are
// set.
func (c *committer[K]) do(ctx context.Context, t *Table[K], u *unit[K]) {
	c.mu.Lock()
	if c.inFlight < c.max {
		c.inFlight++
		c.mu.Unlock()
		u.err = t.sendUnits(ctx, []*unit[K]{u}, false)
		c.next(t)
		return
	}
	u.done = make(chan struct{})
	c.queue = append(c.queue, u)
	c.mu.Unlock()
	<-u.done
}

// next sends the units waiting, as one batch from a goroutine of its
// own, which keeps the call's place in flight and sends the next batch
// after it; or, when none waits, gives the place up.
func (c *committer[K]) next(t *Table[K]) {
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.inFlight--
		c.mu.Unlock()
		return
	}
	n, groups := 0, 0
	for n < len(c.queue) && n < maxCommitUnits && (n == 0 || groups+len(c.queue[n].parts) <= maxCommitGroups) {
		groups += len(c.queue[n].parts)
		n++
	}
	batch := make([]*unit[K], n)
	copy(batch, c.queue)
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	c.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
		err := t.sendUnits(ctx, batch, false)
		cancel()
		for _, u := range batch {
			if err != nil {
				u.err = err
			}
			close(u.done)
		}
		c.next(t)
	}()
}
