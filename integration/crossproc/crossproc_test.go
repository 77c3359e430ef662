package crossproc_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// The environment of a worker process, set by the parent test.
const (
	envWorker    = "RATELIMIT_CROSSPROC_WORKER"    // "1" in a worker
	envTarget    = "RATELIMIT_CROSSPROC_TARGET"    // "redis" or "cluster"
	envAlgorithm = "RATELIMIT_CROSSPROC_ALGORITHM" // a name in algorithms
	envPrefix    = "RATELIMIT_CROSSPROC_PREFIX"    // the stores' key prefix
)

const (
	// processes is how many worker processes race on the key.
	processes = 2
	// goroutines is how many goroutines each worker runs: even ones on a
	// go-redis store, odd ones on a rueidis store, same prefix; twice as
	// many for the policy.
	goroutines = 32
	// bound is every algorithm's capacity or limit: exactly what all the
	// processes together may admit, since nothing refills during the test.
	bound = 500
	// key is the one key every goroutine asks for.
	key = "user:1234567"
	// streak is how many denials in a row end a goroutine. Its costs
	// alternate between 1 and 2, so a streak holds denials of cost 1, each
	// of which shows less than one unit left, for good.
	streak = 20
	// maxRequests bounds each goroutine's requests whatever happens.
	maxRequests = 4 * bound
	// fixedWindow is the fixed window's length, 2^47 µs (about 4.5 years).
	// The test skips in the unlikely case that it ran across an instant
	// k·2^47 µs (the next one is in December 2027).
	fixedWindow = time.Duration(1<<47) * time.Microsecond
)

// algorithms are configured so that nothing refills or expires during the
// test; each admits exactly bound units of cost in all.
var algorithms = []struct {
	name string
	new  func() (algorithm.Algorithm, error)
}{
	{"tokenbucket", func() (algorithm.Algorithm, error) {
		// One token per 10^5 s; refilling all of them takes 5·10^7 s,
		// within algorithm.MaxDuration. During a test of a few seconds the
		// bucket gains less than 10^-3 tokens.
		return tokenbucket.New(tokenbucket.Config{Capacity: bound, Rate: 1e-5})
	}},
	{"tokenbucket-interval", func() (algorithm.Algorithm, error) {
		return tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: bound, Tokens: bound, Interval: 1000 * time.Hour})
	}},
	{"slidinglog", func() (algorithm.Algorithm, error) {
		return slidinglog.New(slidinglog.Config{Limit: bound, Window: time.Hour})
	}},
	{"fixedwindow", func() (algorithm.Algorithm, error) {
		return fixedwindow.New(fixedwindow.Config{Limit: bound, Window: fixedWindow})
	}},
}

// policy names the two-limit policy the test races on besides the
// algorithms: a token bucket of bound (which binds) and a sliding log of
// policyLog, which must be charged exactly what the bucket admitted.
const (
	policy    = "policy"
	policyLog = 800
)

func newPolicy[K comparable](t testing.TB, st store.Store[K]) *ratelimit.Policy[K] {
	t.Helper()
	log, err := slidinglog.New(slidinglog.Config{Limit: policyLog, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ratelimit.NewPolicy(st, []ratelimit.Limit{
		{Name: "bucket", Algorithm: newAlgorithm(t, "tokenbucket")},
		{Name: "log", Algorithm: log},
	}, ratelimit.WithName("crossproc"), ratelimit.WithClock(clock.Server()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// decider is one client's way to decide: a Limiter's AllowN or a Policy's,
// or, with book set, their ReserveN booking now or not at all (the booking
// script, which must charge as atomically as the decision's).
type decider func(ctx context.Context, cost int, book bool) (bool, error)

// newDecider returns the decider of the algorithm or policy named name on st.
func newDecider(t testing.TB, name string, st store.Store[string]) decider {
	t.Helper()
	if name == policy {
		p := newPolicy(t, st)
		return func(ctx context.Context, cost int, book bool) (bool, error) {
			if book {
				r, err := p.ReserveN(ctx, key, cost, 0)
				return err == nil && r.OK(), err
			}
			d, err := p.AllowN(ctx, key, cost)
			return d.Allowed(), err
		}
	}
	lim, err := ratelimit.New(newAlgorithm(t, name), st, ratelimit.WithName(name), ratelimit.WithClock(clock.Server()))
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, cost int, book bool) (bool, error) {
		if book {
			r, err := lim.ReserveN(ctx, key, cost, 0)
			return err == nil && r.OK(), err
		}
		d, err := lim.AllowN(ctx, key, cost)
		return d.Allowed(), err
	}
}

func newAlgorithm(t testing.TB, name string) algorithm.Algorithm {
	t.Helper()
	for _, a := range algorithms {
		if a.name == name {
			alg, err := a.new()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return alg
		}
	}
	t.Fatalf("unknown algorithm %q", name)
	return nil
}

func target(t testing.TB, name string) redistest.Target {
	t.Helper()
	switch name {
	case "redis":
		return redistest.Standalone(t)
	case "cluster":
		return redistest.Cluster(t)
	}
	t.Fatalf("unknown target %q", name)
	return redistest.Target{}
}

// TestCrossProcess starts worker processes of many goroutines each, half
// on go-redis and half on rueidis, all asking for one key with the server
// clock, and checks that together they admitted exactly the limit, for
// every algorithm, on the real server and on the real cluster.
func TestCrossProcess(t *testing.T) {
	for _, tname := range []string{"redis", "cluster"} {
		t.Run(tname, func(t *testing.T) {
			tg := target(t, tname)
			for _, a := range algorithms {
				t.Run(a.name, func(t *testing.T) { testCrossProcess(t, tg, a.name) })
			}
			t.Run(policy, func(t *testing.T) { testCrossProcess(t, tg, policy) })
		})
	}
}

func testCrossProcess(t *testing.T, tg redistest.Target, algName string) {
	prefix := redistest.Prefix(t)

	// The parent's own view of the key, to check the end state and to
	// delete the key when done: some of these TTLs are very long.
	client := redistest.Rueidis(t, tg)
	st, err := rueidisstore.New[string](client, rueidisstore.WithPrefix[string](prefix))
	if err != nil {
		t.Fatal(err)
	}
	var peek func() ([]ratelimit.Decision, error)
	var reset func(context.Context, string) error
	if algName == policy {
		p := newPolicy(t, st)
		peek = func() ([]ratelimit.Decision, error) { d, err := p.Peek(t.Context(), key); return d.Limits(), err }
		reset = p.Reset
	} else {
		lim, err := ratelimit.New(newAlgorithm(t, algName), st, ratelimit.WithName(algName), ratelimit.WithClock(clock.Server()))
		if err != nil {
			t.Fatal(err)
		}
		peek = func() ([]ratelimit.Decision, error) {
			d, err := lim.Peek(t.Context(), key)
			return []ratelimit.Decision{d}, err
		}
		reset = lim.Reset
	}
	t.Cleanup(func() {
		if err := reset(context.Background(), key); err != nil {
			t.Errorf("Reset: %v", err)
		}
	})

	began := serverTime(t, client)
	workers := make([]*worker, processes)
	for i := range workers {
		workers[i] = startWorker(t, i, tg.Name, algName, prefix)
	}
	for _, w := range workers {
		w.expect("ready")
	}
	for _, w := range workers { // all at once, so that they contend
		w.start()
	}
	var total int64
	for _, w := range workers {
		r := w.result()
		t.Logf("worker %d: admitted %d (go-redis %d, rueidis %d) in %d requests, %d denied",
			w.id, r.goredis+r.rueidis, r.goredis, r.rueidis, r.requests, r.denied)
		total += r.goredis + r.rueidis
	}
	ended := serverTime(t, client)
	if w := fixedWindow.Microseconds(); algName == "fixedwindow" && began/w != ended/w {
		t.Skipf("the test ran across a fixed-window boundary (%d µs to %d µs); run it again", began, ended)
	}

	if total != bound {
		t.Errorf("%d processes admitted %d units of cost in all; want exactly %d", processes, total, bound)
	}
	ds, err := peek()
	if err != nil {
		t.Fatalf("Peek: %v", err)
	}
	if d := ds[0]; d.Allowed() || d.Remaining() != 0 {
		t.Errorf("Peek after the race: got allowed=%v remaining=%d, want allowed=false remaining=0", d.Allowed(), d.Remaining())
	}
	if algName == policy {
		// The log was charged each admitted request exactly once: not a
		// unit for a request the bucket denied.
		if d := ds[1]; d.Remaining() != policyLog-total {
			t.Errorf("the policy's sliding log after the race: remaining %d, want %d (its limit %d minus the %d admitted)",
				d.Remaining(), policyLog-total, policyLog, total)
		}
	}
}

// serverTime reads the clock of the server that client reaches, in Unix µs.
func serverTime(t *testing.T, client rueidis.Client) int64 {
	t.Helper()
	v, err := client.Do(t.Context(), client.B().Time().Build()).AsIntSlice()
	if err != nil || len(v) != 2 {
		t.Fatalf("TIME: %v %v", v, err)
	}
	return v[0]*1_000_000 + v[1]
}

// worker is a worker process as the parent sees it. The protocol on its
// standard streams: it prints "crossproc: ready" when connected, waits for
// a line on its standard input, races, then prints its counts.
type worker struct {
	t      *testing.T
	id     int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string  // the lines it prints, closed at end of output
	output []string     // its lines that are not part of the protocol
	stderr bytes.Buffer // read only after cmd.Wait
}

const marker = "crossproc: "

type counts struct{ goredis, rueidis, requests, denied int64 }

func startWorker(t *testing.T, id int, targetName, algName, prefix string) *worker {
	t.Helper()
	w := &worker{t: t, id: id, lines: make(chan string, 16)}
	w.cmd = exec.Command(os.Args[0], "-test.run=^TestWorker$", "-test.count=1", "-test.timeout=60s")
	w.cmd.Env = append(os.Environ(),
		envWorker+"=1", envTarget+"="+targetName, envAlgorithm+"="+algName, envPrefix+"="+prefix)
	w.cmd.Stderr = &w.stderr
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("start worker %d: %v", id, err)
	}
	t.Cleanup(func() { // after a failure in the parent
		if w.cmd.ProcessState == nil {
			w.cmd.Process.Kill()
			w.cmd.Wait()
		}
	})
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			w.lines <- s.Text()
		}
		close(w.lines)
	}()
	return w
}

// next returns the worker's next protocol line, minus the marker, or
// fails the test with its output if it ends or takes too long.
func (w *worker) next() string {
	w.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				w.fail("ended early")
			}
			if rest, found := strings.CutPrefix(line, marker); found {
				return rest
			}
			w.output = append(w.output, line)
		case <-timeout:
			w.cmd.Process.Kill()
			w.fail("timed out")
		}
	}
}

func (w *worker) fail(what string) {
	w.t.Helper()
	err := w.cmd.Wait()
	w.t.Fatalf("worker %d %s (%v); its output:\n%s\n%s", w.id, what, err, strings.Join(w.output, "\n"), w.stderr.String())
}

func (w *worker) expect(want string) {
	w.t.Helper()
	if got := w.next(); got != want {
		w.fail(fmt.Sprintf("said %q, want %q", got, want))
	}
}

func (w *worker) start() {
	w.t.Helper()
	if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
		w.fail(fmt.Sprintf("could not be started: %v", err))
	}
	w.stdin.Close()
}

// result reads the worker's counts and waits for it to exit cleanly.
func (w *worker) result() counts {
	w.t.Helper()
	var c counts
	line := w.next()
	if _, err := fmt.Sscanf(line, "admitted goredis=%d rueidis=%d requests=%d denied=%d",
		&c.goredis, &c.rueidis, &c.requests, &c.denied); err != nil {
		w.fail(fmt.Sprintf("said %q: %v", line, err))
	}
	for line := range w.lines {
		w.output = append(w.output, line)
	}
	if err := w.cmd.Wait(); err != nil {
		w.t.Fatalf("worker %d: %v; its output:\n%s\n%s", w.id, err, strings.Join(w.output, "\n"), w.stderr.String())
	}
	return c
}

// TestWorker is the worker process of TestCrossProcess; run on its own,
// it skips.
func TestWorker(t *testing.T) {
	if os.Getenv(envWorker) != "1" {
		t.Skip("the worker process of TestCrossProcess, which runs it with " + envWorker + "=1")
	}
	tg := target(t, os.Getenv(envTarget))
	name := os.Getenv(envAlgorithm)
	prefix := os.Getenv(envPrefix)

	gs, err := goredisstore.New[string](redistest.GoRedis(t, tg), goredisstore.WithPrefix[string](prefix))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rueidisstore.New[string](redistest.Rueidis(t, tg), rueidisstore.WithPrefix[string](prefix))
	if err != nil {
		t.Fatal(err)
	}
	deciders := [2]decider{newDecider(t, name, gs), newDecider(t, name, rs)}
	// Connect both clients (and load the script) before the race: a
	// request of cost 0 is refused before it reaches the store, so
	// connect with the stores' own Reset of an unrelated key instead.
	for _, st := range []store.Store[string]{gs, rs} {
		tab, err := st.Open(store.LimitsOf(newAlgorithm(t, "fixedwindow")), clock.Server())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tab.Peek(t.Context(), key+":warm", 0, nil); err != nil {
			t.Fatalf("Peek: %v", err)
		}
	}
	workers := goroutines
	if name == policy {
		workers = 2 * goroutines
	}
	fmt.Println(marker + "ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("waiting for the parent's go: %v", err)
	}

	var (
		admitted          [2]atomic.Int64 // by client
		requests, denials atomic.Int64
		wg                sync.WaitGroup
	)
	wg.Add(workers)
	for g := range workers {
		go func() {
			defer wg.Done()
			decide := deciders[g%2]
			for i, inARow := 0, 0; inARow < streak && i < maxRequests; i++ {
				cost := 1 + (g+i)%2
				allowed, err := decide(t.Context(), cost, (g+i)%3 == 0) // every third a booking
				if err != nil {
					t.Errorf("goroutine %d: AllowN(%q, %d): %v", g, key, cost, err)
					return
				}
				requests.Add(1)
				if allowed {
					admitted[g%2].Add(int64(cost))
					inARow = 0
				} else {
					denials.Add(1)
					inARow++
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf(marker+"admitted goredis=%d rueidis=%d requests=%d denied=%d\n",
		admitted[0].Load(), admitted[1].Load(), requests.Load(), denials.Load())
}
