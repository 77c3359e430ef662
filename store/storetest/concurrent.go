package storetest

import (
	"cmp"
	"slices"
	"sync"

	"github.com/go-ratelimit/ratelimit"
)

const (
	// concurrentLimit is the limit of the algorithms in the concurrency
	// tests, whose fake clock stands still: nothing refills.
	concurrentLimit = 100
	// goroutines is how many goroutines race on one key.
	goroutines = 32
)

// outcome is one request a goroutine made.
type outcome struct {
	cost int64
	d    ratelimit.Decision
}

// hammer has goroutines goroutines call AllowN on key, each with the costs
// cost(g, i) for i = 0, 1, ... until stop(d) or n requests, and returns
// every outcome. Errors fail the test.
func (f *fixture) hammer(key string, n int, cost func(g, i int) int64, stop func(ratelimit.Decision) bool) []outcome {
	f.t.Helper()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		all []outcome
	)
	wg.Add(goroutines)
	for g := range goroutines {
		go func() {
			defer wg.Done()
			var mine []outcome
			for i := range n {
				c := cost(g, i)
				d, err := f.lim.AllowN(f.t.Context(), key, int(c))
				if err != nil {
					f.t.Errorf("goroutine %d: AllowN(%q, %d): %v", g, key, c, err)
					break
				}
				if err := sanity(d, f.limit, c); err != nil {
					f.t.Errorf("goroutine %d: AllowN(%q, %d) = %s: %v", g, key, c, show(d), err)
				}
				mine = append(mine, outcome{c, d})
				if stop(d) {
					break
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if f.t.Failed() {
		f.t.FailNow()
	}
	return all
}

// testConcurrent races goroutines asking for one unit each until denied:
// exactly the limit is admitted, and the admitted decisions' Remaining are
// limit−1, ..., 0, once each, as one request after the other would see.
func testConcurrent(f *fixture) {
	all := f.hammer("hot", concurrentLimit+1,
		func(int, int) int64 { return 1 },
		func(d ratelimit.Decision) bool { return !d.Allowed() })
	seen := make([]bool, f.limit)
	admitted := int64(0)
	for _, o := range all {
		if !o.d.Allowed() {
			if o.d.Remaining() != 0 {
				f.t.Errorf("a denied Allow: got %s, want remaining=0", show(o.d))
			}
			continue
		}
		admitted++
		if r := o.d.Remaining(); r >= 0 && r < f.limit {
			if seen[r] {
				f.t.Errorf("two admitted Allows both report remaining=%d, want each of 0..%d once", r, f.limit-1)
			}
			seen[r] = true
		}
	}
	if admitted != f.limit {
		f.t.Errorf("%d goroutines racing on one key at a frozen instant: got %d admitted, want exactly %d",
			goroutines, admitted, f.limit)
	}
	if d := f.peek("hot"); d.Remaining() != 0 || d.Allowed() {
		f.t.Errorf("Peek(hot) after the race: got %s, want denied with remaining=0", show(d))
	}
}

// testConcurrentCosts races goroutines asking for costs of 1 to 3: ordered
// by Remaining, the admitted decisions must each take exactly their cost
// from the one before, starting from the limit, and Peek must show what
// is left after the last.
func testConcurrentCosts(f *fixture) {
	all := f.hammer("hot", 6,
		func(g, i int) int64 { return int64((g+i)%3 + 1) },
		func(ratelimit.Decision) bool { return false })
	var admitted []outcome
	for _, o := range all {
		if o.d.Allowed() {
			admitted = append(admitted, o)
		}
	}
	slices.SortFunc(admitted, func(a, b outcome) int { return cmp.Compare(b.d.Remaining(), a.d.Remaining()) })
	left := f.limit
	for _, o := range admitted {
		if o.d.Remaining() != left-o.cost {
			f.t.Fatalf("admitted AllowN(hot, %d) after others had left %d: got remaining=%d, want %d (no consistent order of the admitted requests exists)",
				o.cost, left, o.d.Remaining(), left-o.cost)
		}
		left = o.d.Remaining()
	}
	for _, o := range all {
		if !o.d.Allowed() && o.cost <= left {
			f.t.Errorf("AllowN(hot, %d) denied with %s, though %d was still left at the end", o.cost, show(o.d), left)
		}
	}
	if d := f.peek("hot"); d.Remaining() != left {
		f.t.Errorf("Peek(hot) after the race: got %s, want remaining=%d (the limit %d less the admitted costs)",
			show(d), left, f.limit)
	}
}
