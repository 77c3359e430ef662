package ratelimit

import (
	"testing"
	"time"
)

// doneJob is a job that closes its channel when it runs.
type doneJob chan struct{}

func (j doneJob) run() { close(j) }

// idleWorkers returns the idle workers.
func idleWorkers() []*worker {
	workers.mu.Lock()
	defer workers.mu.Unlock()
	return append([]*worker(nil), workers.idle...)
}

// waitIdle waits until n workers are idle, and returns them.
func waitIdle(t *testing.T, n int) []*worker {
	t.Helper()
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(time.Millisecond) {
		if idle := idleWorkers(); len(idle) == n {
			return idle
		}
	}
	t.Fatalf("%d workers idle after 10 s; want %d", len(idleWorkers()), n)
	return nil
}

// TestWorkersReused: a job goes to the worker that went idle last, not to
// a new goroutine, and reap ends the workers idle for a whole run of its.
func TestWorkersReused(t *testing.T) {
	reap()
	reap() // every worker left by other tests was idle since the last run
	waitIdle(t, 0)

	first := make(doneJob)
	startWork(first)
	<-first
	w := waitIdle(t, 1)[0]
	for i := range 3 {
		j := make(doneJob)
		startWork(j)
		<-j
		if idle := waitIdle(t, 1); idle[0] != w {
			t.Fatalf("job %d went to a new worker, with one idle", i+2)
		}
	}

	reap() // w went idle since the last run: it stays
	if idle := idleWorkers(); len(idle) != 1 || idle[0] != w {
		t.Fatalf("after one reap, %d workers idle; want the one, idle for less than a whole run", len(idle))
	}
	reap()
	waitIdle(t, 0)
}
