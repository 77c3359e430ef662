package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// TestTooManyDescriptors: a request of more descriptors than
// -max-descriptors (1,000 by default) is INVALID_ARGUMENT, and nothing of
// it is charged.
func TestTooManyDescriptors(t *testing.T) {
	for _, c := range []struct {
		max, ok, refused int
	}{{0, defaultMaxDescriptors, 10000}, {2, 2, 3}} {
		s := startServer(t, targets[0], exampleConfig, func(o *options) { o.service.maxDescriptors = c.max })
		req := func(n int) *rlspb.RateLimitRequest {
			r := &rlspb.RateLimitRequest{Domain: "rl"}
			for i := range n {
				r.Descriptors = append(r.Descriptors, desc("foo", "v"+strconv.Itoa(i), "baz", "not-so-shady"))
			}
			return r
		}
		_, err := s.client.ShouldRateLimit(context.Background(), req(c.refused))
		want := strconv.Itoa(c.refused) + " descriptors in one request, more than the " + strconv.Itoa(c.ok) + " this server takes (-max-descriptors)"
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != want {
			t.Fatalf("-max-descriptors %d, %d descriptors: %v, want INVALID_ARGUMENT: %s", c.max, c.refused, err, want)
		}
		// Nothing was charged: v0 has all its 3 a minute.
		for i, remaining := range []uint32{2, 1, 0} {
			if st := s.ask(t, "rl", desc("foo", "v0", "baz", "not-so-shady")).Statuses[0]; st.Code != ok || st.LimitRemaining != remaining {
				t.Fatalf("-max-descriptors %d, request %d of v0: %v, want OK, %d remaining", c.max, i+1, st, remaining)
			}
		}
		if res := s.askReq(t, req(c.ok)); res.OverallCode != over || res.Statuses[1].Code != ok {
			t.Fatalf("-max-descriptors %d, %d descriptors: %v, want v0 over and v1 OK", c.max, c.ok, res.OverallCode)
		}
	}
}

// TestMemoryMaxKeys: -memory-max-keys caps the states the memory store
// holds; a flood of new values evicts instead of growing the process.
func TestMemoryMaxKeys(t *testing.T) {
	path := writeConfig(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n")
	s := startServer(t, targets[0], path, func(o *options) { o.memoryMaxKeys = 100 })
	for i := range 1000 {
		s.expectCodes(t, "d", descs(desc("k", strconv.Itoa(i))), ok)
	}
	st := s.app.svc.st.(*memorystore.Store[string]).Stats()
	if st.Keys > 100 || st.Evicted == 0 {
		t.Fatalf("1,000 values under -memory-max-keys 100: %+v, want at most 100 keys and evictions", st)
	}
	text := metricsText(t, s.app.metrics)
	if !strings.Contains(text, "ratelimit_server_memory_store_keys "+strconv.Itoa(s.app.svc.st.(*memorystore.Store[string]).Stats().Keys)+"\n") ||
		!strings.Contains(text, "ratelimit_server_memory_store_evicted_total ") {
		t.Errorf("metrics lack the memory store's census:\n%s", text)
	}
}

// TestMetrics: /metrics holds the latency histograms, the Go runtime's
// and the process's metrics, and the per-rule counters under
// envoyproxy/ratelimit's names, near_limit counted as it counts it.
func TestMetrics(t *testing.T) {
	path := writeConfig(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 10}\n")
	s := startServer(t, targets[0], path)
	want := slices.Repeat([]rlspb.RateLimitResponse_Code{ok}, 11)
	want[10] = over
	s.expectCodes(t, "d", descs(desc("k", "a")), want...)
	text := metricsText(t, s.app.metrics)
	for _, series := range []string{
		// 10 a hour: the 9th and 10th take the count past 8, its 80%.
		`ratelimit_service_rate_limit_total_hits{domain="d",key1="k",key2=""} 11`,
		`ratelimit_service_rate_limit_within_limit{domain="d",key1="k",key2=""} 10`,
		`ratelimit_service_rate_limit_near_limit{domain="d",key1="k",key2=""} 2`,
		`ratelimit_service_rate_limit_over_limit{domain="d",key1="k",key2=""} 1`,
		`ratelimit_service_rate_limit_shadow_mode{domain="d",key1="k",key2=""} 0`,
		`ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} 11`,
		`ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="+Inf"} 11`,
		`ratelimit_server_requests_total{code="OK"} 10`,
		`ratelimit_server_requests_total{code="OVER_LIMIT"} 1`,
		`ratelimit_server_decisions_total{op="allow",outcome="allowed"} 10`,
		`ratelimit_server_decisions_total{op="allow",outcome="denied"} 1`,
		`ratelimit_server_decision_duration_seconds_bucket{op="allow",le="+Inf"} 11`,
		`ratelimit_service_config_load_success 1`,
		`ratelimit_server_store_up 1`,
		`go_goroutines `,
		`process_resident_memory_bytes `,
	} {
		if !strings.Contains(text, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}

// TestStatsLabels: a rule's stats key is labelled as envoyproxy/ratelimit's
// Prometheus mapping labels its stat (domain, key1, key2; deeper levels
// and ':' '|' made '_', and an IPv4 address kept whole).
func TestStatsLabels(t *testing.T) {
	for key, want := range map[string][3]string{
		"rl.foo":                       {"rl", "foo", ""},
		"rl.foo_bar.baz_shady":         {"rl", "foo_bar", "baz_shady"},
		"rl.a.b.c.d":                   {"rl", "a", "b"},
		"rl.remote_address_10.0.0.1":   {"rl", "remote_address_10_0_0_1", ""},
		"rl.k_a:b|c.x":                 {"rl", "k_a_b_c", "x"},
		"example10.route_api.method_X": {"example10", "route_api", "method_X"},
	} {
		if got := statsLabels(key); got != want {
			t.Errorf("statsLabels(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestReflection: the server lists its services through gRPC reflection,
// as grpcurl asks, and describes the rate limit service.
func TestReflection(t *testing.T) {
	s := startServer(t, targets[0], exampleConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(s.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, svc := range res.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	for _, want := range []string{"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, not %s", names, want)
		}
	}
	err = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "envoy.service.ratelimit.v3.RateLimitService",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err = stream.Recv(); err != nil || len(res.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Fatalf("describing the rate limit service: %v %v", res, err)
	}
}

// TestJSON: POST /json takes a RateLimitRequest in JSON and answers the
// RateLimitResponse in JSON, 200 when OK and 429 when over the limit, as
// envoyproxy/ratelimit's does; a request it cannot read is 400.
func TestJSON(t *testing.T) {
	s := startServer(t, targets[0], exampleConfig)
	srv := httptest.NewServer(s.app.httpHandler())
	defer srv.Close()
	post := func(body string) (int, string) {
		t.Helper()
		res, err := http.Post(srv.URL+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	req := `{"domain": "rl", "descriptors": [{"entries": [{"key": "foo", "value": "j"}, {"key": "baz", "value": "not-so-shady"}]}]}`
	for i, want := range []int{200, 200, 200, 429} {
		code, body := post(req)
		if code != want {
			t.Fatalf("request %d: %d %s, want %d", i+1, code, body, want)
		}
		if want == 429 && !strings.Contains(body, `"overallCode":"OVER_LIMIT"`) {
			t.Fatalf("request %d: %s, want the response in JSON", i+1, body)
		}
		if i == 0 && !strings.Contains(body, `"limitRemaining":2`) {
			t.Fatalf("request 1: %s, want 2 remaining", body)
		}
	}
	for _, c := range []struct {
		body string
		want int
	}{
		{`{`, 400},
		{`{"domain": "rl"}`, 400},
		{`{"domain": "rl", "descriptors": [{"entries": [{"key": "foo", "value": "j"}]}], "bogus": 1}`, 400},
	} {
		if code, body := post(c.body); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.body, code, body, c.want)
		}
	}
	res, err := http.Get(srv.URL + "/json")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /json: %d, want 405", res.StatusCode)
	}
}

// TestDebug: -debug-addr serves pprof.
func TestDebug(t *testing.T) {
	srv := httptest.NewServer(debugHandler())
	defer srv.Close()
	for path, want := range map[string]string{
		"/":                              "/debug/pprof/",
		"/debug/pprof/":                  "goroutine",
		"/debug/pprof/goroutine?debug=1": "goroutine profile",
		"/debug/pprof/cmdline":           "",
	} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d %.200s, want 200 with %q", path, res.StatusCode, b, want)
		}
	}
}

// waitFor polls cond every 20ms until it holds, and returns how long that
// took; it fails the test after limit. The bounds the issue sets are
// measured and logged, not asserted: the machine is shared.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	begin := time.Now()
	for !cond() {
		if time.Since(begin) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d := time.Since(begin)
	t.Logf("%s after %v", what, d.Round(time.Millisecond))
	return d
}

// limited reports whether the configuration in force has a rule for
// (key: v) in domain.
func (s *testServer) limited(t *testing.T, domain, key string) bool {
	t.Helper()
	return s.ask(t, domain, desc(key, "probe")).Statuses[0].CurrentLimit != nil
}

// writeAtomically replaces path's content as tools that care do: a new
// file renamed over the old one.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func domainConfig(domain, key string) string {
	return "domain: " + domain + "\ndescriptors:\n  - key: " + key + "\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n"
}

// TestWatchFile: a configuration file changed on disk is loaded with no
// signal, whether it is rewritten in place or replaced.
func TestWatchFile(t *testing.T) {
	path := writeConfig(t, domainConfig("d", "a"))
	s := startServer(t, targets[0], path, func(o *options) { o.watch = true })
	if !s.limited(t, "d", "a") {
		t.Fatal("the first configuration is not in force")
	}
	rewrite(t, path, domainConfig("d", "b"))
	waitFor(t, "a file rewritten in place loaded", 20*time.Second, func() bool { return s.limited(t, "d", "b") })
	writeAtomically(t, path, domainConfig("d", "c"))
	waitFor(t, "a file renamed over the old one loaded", 20*time.Second, func() bool { return s.limited(t, "d", "c") })
	if s.limited(t, "d", "b") {
		t.Error("the replaced configuration still limits b")
	}
}

// TestWatchDirectory: in a directory, a file added, changed and removed
// is loaded with no signal; a file that does not load leaves the
// configuration in force, until it is fixed.
func TestWatchDirectory(t *testing.T) {
	dir := t.TempDir()
	writeAtomically(t, filepath.Join(dir, "a.yaml"), domainConfig("a", "k"))
	var logs syncBuffer
	s := startServerLogging(t, targets[0], dir, &logs, func(o *options) { o.watch = true })
	defer func() {
		if t.Failed() {
			t.Logf("log:\n%s", logs.String())
		}
	}()
	writeAtomically(t, filepath.Join(dir, "b.yaml"), domainConfig("b", "k"))
	waitFor(t, "a file added loaded", 20*time.Second, func() bool { return s.limited(t, "b", "k") })
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a file removed unloaded", 20*time.Second, func() bool { return !s.limited(t, "b", "k") })

	bad := "domain: c\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"
	writeAtomically(t, filepath.Join(dir, "c.yaml"), bad)
	waitFor(t, "a bad file refused", 20*time.Second, func() bool {
		return strings.Contains(metricsText(t, s.app.metrics), "ratelimit_service_config_load_error 1\n")
	})
	if !s.limited(t, "a", "k") || s.limited(t, "c", "k") {
		t.Fatal("a refused file changed the configuration in force")
	}
	writeAtomically(t, filepath.Join(dir, "c.yaml"), domainConfig("c", "k"))
	waitFor(t, "the bad file fixed loaded", 20*time.Second, func() bool { return s.limited(t, "c", "k") })
	if !s.limited(t, "a", "k") {
		t.Fatal("a.yaml is no longer in force")
	}
}

// TestWatchConfigMap: a Kubernetes ConfigMap mounted as a directory is
// updated by writing the new files into a new hidden directory and
// swapping the "..data" link to it; the files the server reads are links
// through "..data". The swap is loaded with no signal.
func TestWatchConfigMap(t *testing.T) {
	dir := t.TempDir()
	version := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "rl.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_11_27_12_00_00.1", domainConfig("d", "a"))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("..2026_11_27_12_00_00.1", filepath.Join(dir, "..data")))
	must(os.Symlink(filepath.Join("..data", "rl.yaml"), filepath.Join(dir, "rl.yaml")))
	s := startServer(t, targets[0], dir, func(o *options) { o.watch = true })
	if !s.limited(t, "d", "a") {
		t.Fatal("the first version is not in force")
	}
	// kubelet's AtomicWriter: new directory, new link, renamed over ..data,
	// old directory removed.
	version("..2026_11_27_12_05_00.2", domainConfig("d", "b"))
	must(os.Symlink("..2026_11_27_12_05_00.2", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(os.RemoveAll(filepath.Join(dir, "..2026_11_27_12_00_00.1")))
	waitFor(t, "a ConfigMap's swap loaded", 20*time.Second, func() bool { return s.limited(t, "d", "b") })
	// And the next one.
	version("..2026_11_27_12_10_00.3", domainConfig("d", "c"))
	must(os.Symlink("..2026_11_27_12_10_00.3", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(os.RemoveAll(filepath.Join(dir, "..2026_11_27_12_05_00.2")))
	waitFor(t, "a second swap loaded", 20*time.Second, func() bool { return s.limited(t, "d", "c") })
}

// TestStoreOutage: with its Redis gone (an embedded miniredis, closed),
// the server marks its health NOT_SERVING, answers UNAVAILABLE at once,
// and logs the outage once, not per call; with Redis back on the same
// address, it is SERVING again by itself and calls are decided again.
func TestStoreOutage(t *testing.T) {
	mr := miniredis.RunT(t)
	tg := target{name: "miniredis", store: "redis", addrs: func(*testing.T) string { return mr.Addr() }}
	var logs syncBuffer
	s := startServerLogging(t, tg, exampleConfig, &logs)
	hc := healthpb.NewHealthClient(s.conn)
	serving := func() healthpb.HealthCheckResponse_ServingStatus {
		res, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: rlspb.RateLimitService_ServiceDesc.ServiceName})
		if err != nil {
			t.Fatal(err)
		}
		return res.Status
	}
	httpHealth := func() int {
		rec := httptest.NewRecorder()
		s.app.httpHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthcheck", nil))
		return rec.Code
	}
	call := func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		begin := time.Now()
		_, err := s.client.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "rl", Descriptors: descs(desc("foo", "x", "baz", "shady"))})
		return time.Since(begin), err
	}
	if _, err := call(); err != nil || serving() != healthpb.HealthCheckResponse_SERVING || httpHealth() != 200 {
		t.Fatalf("before the outage: %v, %v, /healthcheck %d", err, serving(), httpHealth())
	}

	mr.Close()
	waitFor(t, "NOT_SERVING", 20*time.Second, func() bool {
		call()
		return serving() == healthpb.HealthCheckResponse_NOT_SERVING
	})
	if code := httpHealth(); code != http.StatusServiceUnavailable {
		t.Errorf("/healthcheck during the outage: %d, want 503", code)
	}
	var took []time.Duration
	for range 200 {
		d, err := call()
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("a call during the outage: %v, want UNAVAILABLE", err)
		}
		took = append(took, d)
		s.clk.Advance(10 * time.Millisecond) // the breakers probe on the Limiters' clock
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("UNAVAILABLE answers: median %v, p90 %v, max %v", took[len(took)/2], took[len(took)*9/10], took[len(took)-1])
	if took[len(took)/2] > time.Second {
		t.Errorf("median UNAVAILABLE answer %v: not at once", took[len(took)/2])
	}

	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "SERVING again", 20*time.Second, func() bool { return serving() == healthpb.HealthCheckResponse_SERVING })
	waitFor(t, "calls decided again", 20*time.Second, func() bool {
		s.clk.Advance(time.Second)
		_, err := call()
		return err == nil
	})
	if httpHealth() != 200 {
		t.Errorf("/healthcheck after the outage: %d, want 200", httpHealth())
	}
	log := logs.String()
	if n := strings.Count(log, `msg="store unavailable`); n != 1 {
		t.Errorf("the outage was logged %d times, want once:\n%s", n, log)
	}
	if n := strings.Count(log, `msg="store available again`); n != 1 {
		t.Errorf("the recovery was logged %d times, want once:\n%s", n, log)
	}
	if n := strings.Count(log, "\n"); n > 2 {
		t.Errorf("%d log lines for one outage of 200 calls and more, want 2:\n%s", n, log)
	}
}
