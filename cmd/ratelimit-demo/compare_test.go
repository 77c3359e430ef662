package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// compareAll runs every pattern on a fresh store from open, by name.
func compareAll(t *testing.T, open func(p pattern) store.Store[string]) map[string]comparison {
	t.Helper()
	out := make(map[string]comparison)
	for _, p := range patterns {
		c, err := compare(context.Background(), open(p), p)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		out[p.Name] = c
	}
	return out
}

func memoryComparisons(t *testing.T) map[string]comparison {
	return compareAll(t, func(pattern) store.Store[string] { return memorystore.New[string]() })
}

// rowOf returns c's row for the algorithm named name.
func rowOf(t *testing.T, c comparison, name string) compareRow {
	t.Helper()
	for _, r := range c.Rows {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("%s: no row %s", c.Pattern.Name, name)
	return compareRow{}
}

// countIn returns how many of sorted lie in [from, to].
func countIn(sorted []time.Duration, from, to time.Duration) int {
	n := 0
	for _, at := range sorted {
		if at >= from && at <= to {
			n++
		}
	}
	return n
}

// TestCompareRowsPartitionRequests checks every row decides every request
// once: its admitted and denied instants, merged, are the pattern's.
func TestCompareRowsPartitionRequests(t *testing.T) {
	for name, c := range memoryComparisons(t) {
		if len(c.Requests) == 0 {
			t.Errorf("%s: no requests", name)
		}
		if len(c.Rows) != len(contenders) {
			t.Errorf("%s: %d rows, want %d", name, len(c.Rows), len(contenders))
		}
		for _, r := range c.Rows {
			got := slices.Sorted(slices.Values(append(slices.Clone(r.Admitted), r.Denied...)))
			if !slices.Equal(got, c.Requests) {
				t.Errorf("%s/%s: admitted and denied = %v, want the requests %v", name, r.Name, got, c.Requests)
			}
			sum := 0
			for _, n := range r.PerWindow {
				sum += n
			}
			if sum != len(r.Admitted) || r.MaxInWindow != maxWithin(r.Admitted, c.Window) {
				t.Errorf("%s/%s: per window %v (max %d) for %d admitted", name, r.Name, r.PerWindow, r.MaxInWindow, len(r.Admitted))
			}
		}
	}
}

// TestCompareWindowBoundary checks the point of the boundary pattern: the
// fixed window admits twice its limit within one window's length, across the
// edge, where the sliding log admits at most the limit, on every pattern.
func TestCompareWindowBoundary(t *testing.T) {
	cs := memoryComparisons(t)
	c := cs["boundary"]
	fixed := rowOf(t, c, algFixedWindow)
	if got, want := fixed.MaxInWindow, 2*int(c.Limit); got != want {
		t.Errorf("fixed window admitted at most %d within %v across the edge, want %d (2 × the limit); admitted at %v",
			got, c.Window, want, fixed.Admitted)
	}
	for name, c := range cs {
		for _, alg := range []string{algSlidingLog, algFixedWindow, algCounter} {
			r := rowOf(t, c, alg)
			for i, n := range r.PerWindow {
				if n > int(c.Limit) {
					t.Errorf("%s/%s: admitted %d in window %d, above the limit %d", name, alg, n, i, c.Limit)
				}
			}
		}
		if log := rowOf(t, c, algSlidingLog); log.MaxInWindow > int(c.Limit) {
			t.Errorf("%s: sliding log admitted %d within %v, above the limit %d: %v", name, log.MaxInWindow, c.Window, c.Limit, log.Admitted)
		}
	}
}

// TestCompareTokenBucket checks the continuous bucket admits its burst
// plus what it refills: never more than Limit + rate × t within any span t,
// and exactly that on traffic that keeps it empty.
func TestCompareTokenBucket(t *testing.T) {
	cs := memoryComparisons(t)
	for name, c := range cs {
		r := rowOf(t, c, algTokenBucket)
		rate := float64(c.Limit) / c.Window.Seconds()
		for i, a := range r.Admitted {
			for _, b := range r.Admitted[i:] {
				if n, most := countIn(r.Admitted, a, b), float64(c.Limit)+rate*(b-a).Seconds(); float64(n) > most {
					t.Fatalf("%s: admitted %d in [%v, %v], above the burst %d plus refill %.2f", name, n, a, b, c.Limit, most-float64(c.Limit))
				}
			}
		}
	}
	// Steady traffic at twice the rate: the burst, then one a refill.
	c := cs["steady"]
	last := c.Requests[len(c.Requests)-1]
	want := int(c.Limit) + int(float64(c.Limit)*last.Seconds()/c.Window.Seconds())
	if got := len(rowOf(t, c, algTokenBucket).Admitted); got != want {
		t.Errorf("steady: token bucket admitted %d by %v, want %d (burst %d + refill)", got, last, want, c.Limit)
	}
	// A burst from rest: the whole capacity, plus what refills during it.
	c = cs["bursty"]
	first := countIn(rowOf(t, c, algTokenBucket).Admitted, 0, time.Second+100*time.Millisecond)
	if want := int(c.Limit) + 1; first != want {
		t.Errorf("bursty: token bucket admitted %d of the first burst (1.1 s), want %d (burst %d + 1 refilled)", first, want, c.Limit)
	}
}

// TestCompareGCRAPaces checks GCRA with Burst(1) spaces its admissions at
// least one emission interval apart, and admits one per interval when the
// traffic is denser.
func TestCompareGCRAPaces(t *testing.T) {
	cs := memoryComparisons(t)
	for name, c := range cs {
		every := c.Window / time.Duration(c.Limit)
		r := rowOf(t, c, algGCRA)
		for i := 1; i < len(r.Admitted); i++ {
			if gap := r.Admitted[i] - r.Admitted[i-1]; gap < every {
				t.Errorf("%s: GCRA admitted at %v and %v, %v apart, less than %v", name, r.Admitted[i-1], r.Admitted[i], gap, every)
			}
		}
	}
	c := cs["steady"]
	if got, want := len(rowOf(t, c, algGCRA).Admitted), int(c.Span/(c.Window/time.Duration(c.Limit))); got != want {
		t.Errorf("steady: GCRA admitted %d in %v, want %d, one per interval", got, c.Span, want)
	}
}

// TestCompareDrip checks traffic at exactly the limit's rate passes the
// buckets, GCRA, the log and the fixed window untouched, while the
// sliding-window counter denies the request at the first window edge: at
// that instant the previous window, full, still counts whole.
func TestCompareDrip(t *testing.T) {
	c := memoryComparisons(t)["drip"]
	for _, alg := range []string{algTokenBucket, algInterval, algGCRA, algSlidingLog, algFixedWindow} {
		if r := rowOf(t, c, alg); len(r.Denied) > 0 {
			t.Errorf("drip: %s denied %v", alg, r.Denied)
		}
	}
	if r := rowOf(t, c, algCounter); !slices.Contains(r.Denied, c.Window) {
		t.Errorf("drip: the sliding-window counter denied %v, want the request at the window edge %v among them", r.Denied, c.Window)
	}
}

// TestCompareStores checks the comparison is the same on miniredis, on a
// real Redis when RATELIMIT_REDIS_ADDR names one and on a cluster when
// RATELIMIT_REDIS_CLUSTER_ADDRS does, as on memory: it depends on the fake
// clock, not on the store.
func TestCompareStores(t *testing.T) {
	want := memoryComparisons(t)
	mr := miniredis.RunT(t)
	clients := map[string]redis.UniversalClient{"miniredis": redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})}
	if addr := os.Getenv("RATELIMIT_REDIS_ADDR"); addr != "" {
		clients["redis"] = redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	}
	if addrs := os.Getenv("RATELIMIT_REDIS_CLUSTER_ADDRS"); addrs != "" {
		clients["cluster"] = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ","),
			ContextTimeoutEnabled: true, MaxRetries: -1})
	}
	for name, client := range clients {
		t.Cleanup(func() { client.Close() })
		prefix := "rltest:demo-compare:" + name + ":" + time.Now().Format("150405.000000") + ":"
		got := compareAll(t, func(p pattern) store.Store[string] {
			st, err := goredisstore.New[string](client, goredisstore.WithPrefix[string](prefix+p.Name+":"),
				goredisstore.WithTTLMargin[string](compareTimeout))
			if err != nil {
				t.Fatal(err)
			}
			return st
		})
		for p, c := range want {
			if !reflect.DeepEqual(got[p].Rows, c.Rows) {
				t.Errorf("%s, %s: rows differ from memory's:\n got %+v\nwant %+v", name, p, got[p].Rows, c.Rows)
			}
		}
	}
}

// TestCompareAPI checks GET /api/compare: the pattern asked for, on the
// store in service, and a clear 400 for an unknown pattern.
func TestCompareAPI(t *testing.T) {
	srv := newTestServer(t, serverOptions{Store: storeMiniredis})
	for _, p := range patterns {
		res, body := call(t, srv, "GET", "/api/compare?pattern="+p.Name, "")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", p.Name, res.StatusCode, body)
		}
		var got compareJSON
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		want, err := compare(context.Background(), memorystore.New[string](), p)
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.Marshal(want.json(storeMiniredis))
		gotJSON, _ := json.Marshal(got)
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Errorf("%s: GET /api/compare =\n%s\nwant (as on memory)\n%s", p.Name, gotJSON, wantJSON)
		}
	}
	res, body := call(t, srv, "GET", "/api/compare", "")
	var got compareJSON
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil || got.Pattern.Name != patterns[0].Name {
		t.Errorf("GET /api/compare without a pattern: %d %s, want pattern %s", res.StatusCode, body, patterns[0].Name)
	}
	res, body = call(t, srv, "GET", "/api/compare?pattern=nope", "")
	if res.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte(`unknown pattern \"nope\"`)) {
		t.Errorf("unknown pattern: %d %s, want 400 naming it", res.StatusCode, body)
	}
}

// TestFigureCurrent checks docs/algorithms.svg is what the comparison
// draws today.
func TestFigureCurrent(t *testing.T) {
	want, err := figure()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/algorithms.svg")
	if err != nil {
		t.Fatalf("%v; create it with: %s", err, figureCommand)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/algorithms.svg is not what the comparison draws today; refresh it with: %s", figureCommand)
	}
}

// TestRunFigure checks -figure writes the figure and exits, as go generate
// runs it.
func TestRunFigure(t *testing.T) {
	path := t.TempDir() + "/algorithms.svg"
	if err := run(context.Background(), []string{"-figure", path}, io.Discard, io.Discard); err != nil {
		t.Fatalf("run -figure: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := figure()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("run -figure wrote %d bytes that are not the figure's %d", len(got), len(want))
	}
}

// redisLag is a go-redis hook that, at the at-th command the client sends,
// moves miniredis's clock on by d first: a Redis whose own clock, which
// expires keys, runs on while the comparison's fake clock stands still, as
// a slow store's does.
type redisLag struct {
	mr    *miniredis.Miniredis
	at    int64
	d     time.Duration
	calls atomic.Int64
}

func (h *redisLag) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *redisLag) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *redisLag) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.calls.Add(1) == h.at {
			h.mr.FastForward(h.d)
		}
		return next(ctx, cmd)
	}
}

// TestCompareSlowRedis checks a comparison on Redis is the same as on
// memory however slowly the store answers, within compareTimeout: no key
// may expire, on Redis's clock, while the run still needs it. Here Redis's
// clock jumps by just under compareTimeout part-way through each run.
func TestCompareSlowRedis(t *testing.T) {
	want := memoryComparisons(t)
	srv := newTestServer(t, serverOptions{Store: storeMiniredis})
	lag := &redisLag{mr: srv.mini, at: 50, d: compareTimeout - time.Millisecond}
	srv.miniClient.AddHook(lag)
	for _, p := range patterns {
		lag.calls.Store(0)
		res, body := call(t, srv, "GET", "/api/compare?pattern="+p.Name, "")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", p.Name, res.StatusCode, body)
		}
		if lag.calls.Load() < lag.at {
			t.Fatalf("%s: only %d commands reached Redis; the lag never came", p.Name, lag.calls.Load())
		}
		var got compareJSON
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		gotJSON, _ := json.Marshal(got.Rows)
		wantJSON, _ := json.Marshal(want[p.Name].json(storeMiniredis).Rows)
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Errorf("%s: rows on a Redis %v slow differ from memory's:\n got %s\nwant %s", p.Name, lag.d, gotJSON, wantJSON)
		}
	}
}
