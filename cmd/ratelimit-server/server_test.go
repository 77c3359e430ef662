package main

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestTrigger is envoyproxy/ratelimit's trigger-ratelimit.sh: (foo: pelle,
// baz: not-so-shady) has 3 a minute.
func TestTrigger(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startServer(t, tg, exampleConfig)
		d := desc("foo", "pelle", "baz", "not-so-shady")
		for i, remaining := range []uint32{2, 1, 0} {
			res := s.ask(t, "rl", d)
			if res.OverallCode != ok {
				t.Fatalf("request %d: %v, want OK", i+1, res.OverallCode)
			}
			st := res.Statuses[0]
			if st.Code != ok || st.LimitRemaining != remaining {
				t.Fatalf("request %d: status %v remaining %d, want OK remaining %d", i+1, st.Code, st.LimitRemaining, remaining)
			}
			if l := st.CurrentLimit; l.GetRequestsPerUnit() != 3 || l.GetUnit() != rlspb.RateLimitResponse_RateLimit_MINUTE {
				t.Fatalf("request %d: current_limit %v, want 3 per MINUTE", i+1, l)
			}
			// The fake clock stands 10 s into its minute: 50 s to the
			// window's end, exactly.
			if got := st.DurationUntilReset.AsDuration(); got != 50*time.Second {
				t.Fatalf("request %d: duration_until_reset %v, want 50s", i+1, got)
			}
		}
		res := s.ask(t, "rl", d)
		if res.OverallCode != over || res.Statuses[0].Code != over || res.Statuses[0].LimitRemaining != 0 {
			t.Fatalf("4th request: %v, want OVER_LIMIT with 0 remaining", res)
		}
		// Another foo counts apart.
		s.expectCodes(t, "rl", descs(desc("foo", "other", "baz", "not-so-shady")), ok)
		// The next minute starts afresh.
		s.clk.Advance(50 * time.Second)
		res = s.ask(t, "rl", d)
		if res.OverallCode != ok || res.Statuses[0].LimitRemaining != 2 || res.Statuses[0].DurationUntilReset.AsDuration() != time.Minute {
			t.Fatalf("next minute: %v, want OK, 2 remaining, reset in 1m", res)
		}
	})
}

func descs(d ...*rlcommon.RateLimitDescriptor) []*rlcommon.RateLimitDescriptor { return d }

// TestShadowMode is trigger-shadow-mode-key.sh: (foo: pelle, baz: shady)
// has 3 a minute in shadow_mode, so it is never limited.
func TestShadowMode(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startServer(t, tg, exampleConfig)
		d := desc("foo", "pelle", "baz", "shady")
		for i, remaining := range []uint32{2, 1, 0, 0, 0} {
			res := s.ask(t, "rl", d)
			if res.OverallCode != ok || res.Statuses[0].Code != ok || res.Statuses[0].LimitRemaining != remaining {
				t.Fatalf("request %d: %v, want OK with %d remaining", i+1, res, remaining)
			}
		}
		text := metricsText(t, s.app.metrics)
		if !strings.Contains(text, `ratelimit_service_rate_limit_shadow_mode{domain="rl",key1="foo",key2="baz_shady"} 2`) {
			t.Fatalf("metrics do not count 2 shadowed denials:\n%s", text)
		}
	})
}

// TestReplaces is replaces.sh, request for request.
func TestReplaces(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startServer(t, tg, exampleConfig)
		type step struct {
			d    []*rlcommon.RateLimitDescriptor
			want rlspb.RateLimitResponse_Code
		}
		banned := desc("foo", "bkthomps", "bar", "banned")
		fooBkthomps := desc("foo", "my_foo", "bar", "bkthomps")
		steps := []step{
			// banned_limit is 0 a minute.
			{descs(banned), over},
			{descs(banned, desc("source_cluster", "proxy", "destination_cluster", "mock")), over},
			// override replaces banned_limit with 2 a minute.
			{descs(banned, desc("source_cluster", "proxy", "destination_cluster", "override")), ok},
			{descs(banned, desc("source_cluster", "proxy", "destination_cluster", "override")), ok},
			{descs(banned, desc("source_cluster", "proxy", "destination_cluster", "override")), over},
			// Replacing does not charge the replaced limit.
			{descs(fooBkthomps, desc("source_cluster", "proxy", "destination_cluster", "bkthomps")), ok},
			{descs(fooBkthomps, desc("source_cluster", "proxy", "destination_cluster", "bkthomps")), ok},
			{descs(fooBkthomps, desc("source_cluster", "proxy", "destination_cluster", "bkthomps")), over},
			{descs(fooBkthomps, desc("source_cluster", "proxy", "destination_cluster", "not_bkthomps")), ok},
			{descs(fooBkthomps, desc("source_cluster", "proxy", "destination_cluster", "not_bkthomps")), over},
			{descs(fooBkthomps, desc("source_cluster", "proxy", "destination_cluster", "bkthomps")), over},
			// category: account replaces bkthomps and fake_name at once.
			{descs(fooBkthomps, desc("source_cluster", "proxy", "destination_cluster", "fake"), desc("category", "account")), ok},
			{descs(fooBkthomps, desc("source_cluster", "proxy", "destination_cluster", "fake"), desc("category", "account")), ok},
			{descs(fooBkthomps, desc("source_cluster", "proxy", "destination_cluster", "fake"), desc("category", "account")), ok},
			{descs(fooBkthomps, desc("source_cluster", "proxy", "destination_cluster", "fake"), desc("category", "account")), ok},
			{descs(fooBkthomps, desc("source_cluster", "proxy", "destination_cluster", "fake"), desc("category", "account")), over},
			{descs(desc("foo", "foo_2", "bar", "bkthomps")), ok},
			{descs(desc("foo", "foo_2", "bar", "bkthomps")), over},
			{descs(desc("foo", "foo_3", "bar", "bar_3"), desc("source_cluster", "proxy", "destination_cluster", "fake")), ok},
			{descs(desc("foo", "foo_3", "bar", "bar_3"), desc("source_cluster", "proxy", "destination_cluster", "fake")), ok},
			{descs(desc("foo", "foo_3", "bar", "bar_3"), desc("source_cluster", "proxy", "destination_cluster", "fake")), over},
			{descs(fooBkthomps, desc("source_cluster", "proxy", "destination_cluster", "fake"), desc("category", "account")), over},
		}
		for i, st := range steps {
			if got := s.ask(t, "rl", st.d...).OverallCode; got != st.want {
				t.Fatalf("step %d (%v): %v, want %v", i+1, st.d, got, st.want)
			}
		}
	})
}

// TestUnlimited: qux and (foo, bay) are unlimited: OK with MaxUint32
// remaining and no limit, never asked of the store.
func TestUnlimited(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startServer(t, tg, exampleConfig)
		for range 5 {
			res := s.ask(t, "rl", desc("qux", "anything"), desc("foo", "x", "bay", "y"), desc("nothing", "here"))
			if res.OverallCode != ok {
				t.Fatalf("%v, want OK", res)
			}
			for i := range 2 {
				if st := res.Statuses[i]; st.Code != ok || st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
					t.Fatalf("status %d: %v, want OK, MaxUint32 remaining, no limit", i, st)
				}
			}
			if st := res.Statuses[2]; st.Code != ok || st.CurrentLimit != nil || st.LimitRemaining != 0 {
				t.Fatalf("unmatched descriptor: %v, want OK with no limit", st)
			}
		}
		// An unknown domain limits nothing.
		s.expectCodes(t, "nope", descs(desc("foo", "a")), ok, ok)
	})
}

// TestHitsAddend: the request's hits_addend and a descriptor's own count,
// 0 looks without charging, a cost above the limit is over it and charges
// nothing, and is_negative_hits gives back.
func TestHitsAddend(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startServer(t, tg, exampleConfig)
		d := func() *rlcommon.RateLimitDescriptor { return desc("foo", "pelle", "baz", "not-so-shady") } // 3 a minute
		remaining := func(res *rlspb.RateLimitResponse) uint32 { return res.Statuses[0].LimitRemaining }
		res := s.askReq(t, &rlspb.RateLimitRequest{Domain: "rl", Descriptors: descs(d()), HitsAddend: 2})
		if res.OverallCode != ok || remaining(res) != 1 {
			t.Fatalf("hits_addend 2: %v, want OK with 1 remaining", res)
		}
		// 5 is more than the limit: over, and nothing charged.
		res = s.askReq(t, &rlspb.RateLimitRequest{Domain: "rl", Descriptors: descs(withHits(d(), 5))})
		if res.OverallCode != over || remaining(res) != 1 {
			t.Fatalf("descriptor hits_addend 5: %v, want OVER_LIMIT with 1 remaining", res)
		}
		// The descriptor's own hits_addend wins over the request's.
		res = s.askReq(t, &rlspb.RateLimitRequest{Domain: "rl", Descriptors: descs(withHits(d(), 0)), HitsAddend: 3})
		if res.OverallCode != ok || remaining(res) != 1 {
			t.Fatalf("descriptor hits_addend 0: %v, want OK with 1 remaining", res)
		}
		res = s.askReq(t, &rlspb.RateLimitRequest{Domain: "rl", Descriptors: descs(withHits(d(), 1))})
		if res.OverallCode != ok || remaining(res) != 0 {
			t.Fatalf("descriptor hits_addend 1: %v, want OK with 0 remaining", res)
		}
		// Nothing left: a look with 0 hits says over.
		res = s.askReq(t, &rlspb.RateLimitRequest{Domain: "rl", Descriptors: descs(withHits(d(), 0))})
		if res.OverallCode != over || remaining(res) != 0 {
			t.Fatalf("hits_addend 0 at the limit: %v, want OVER_LIMIT", res)
		}
		// Giving 2 back makes room for 2.
		neg := withHits(d(), 2)
		neg.IsNegativeHits = true
		res = s.askReq(t, &rlspb.RateLimitRequest{Domain: "rl", Descriptors: descs(neg)})
		if res.OverallCode != ok || remaining(res) != 2 {
			t.Fatalf("negative hits 2: %v, want OK with 2 remaining", res)
		}
		s.expectCodes(t, "rl", descs(d()), ok, ok, over)
	})
}

// TestQuota is quota.sh: (service: service_1) and (service: service_2)
// are quota_mode limits of 1 and 2 a minute: the request is over only when
// both are.
func TestQuota(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startServer(t, tg, exampleConfig)
		both := descs(desc("service", "service_1"), desc("service", "service_2"))
		s.expectCodes(t, "rl", both, ok, ok, over)
		s.clk.Advance(time.Minute)
		s.expectCodes(t, "rl", both, ok)
	})
}

// TestTokenQuota is token-quota.sh's flow: a look with hits_addend 0 on
// the request path, a charge of 1 when the stream is done. Envoy's
// counter runs past the limit, so there the third look still passes; here
// the charge that would pass the limit is refused, so service_2's 2 a
// minute admit exactly 2.
func TestTokenQuota(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startServer(t, tg, exampleConfig)
		check := descs(withHits(desc("service", "service_2"), 0))
		debit := descs(withHits(desc("service", "service_2"), 1))
		for i := range 2 {
			s.expectCodes(t, "rl", check, ok)
			if res := s.ask(t, "rl", debit...); res.OverallCode != ok {
				t.Fatalf("debit %d: %v", i+1, res)
			}
		}
		s.expectCodes(t, "rl", check, over)
		s.clk.Advance(time.Minute)
		s.expectCodes(t, "rl", check, ok)
	})
}

// TestAllOrNone: a request denied by one descriptor is charged to none.
func TestAllOrNone(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startServer(t, tg, exampleConfig)
		fooBar := desc("foo", "a", "bar", "b")                                 // 3 a minute
		mock := desc("source_cluster", "proxy", "destination_cluster", "mock") // 1 a minute
		s.expectCodes(t, "rl", descs(fooBar, mock), ok, over, over)
		res := s.ask(t, "rl", withHits(desc("foo", "a", "bar", "b"), 0))
		if got := res.Statuses[0].LimitRemaining; got != 2 {
			t.Fatalf("(foo, bar) has %d remaining after 1 admitted and 2 denied requests, want 2", got)
		}
		// The denied requests' statuses say what is left after the refund.
		res = s.ask(t, "rl", fooBar, mock)
		if res.OverallCode != over || res.Statuses[0].Code != ok || res.Statuses[0].LimitRemaining != 2 || res.Statuses[1].Code != over {
			t.Fatalf("denied request: %v, want (foo, bar) OK with 2 remaining and mock OVER_LIMIT", res)
		}
	})
}

// TestAlgorithms: the algorithm a rate_limit names decides, with exact
// reset times.
func TestAlgorithms(t *testing.T) {
	cfg := `
domain: algs
descriptors:
  - key: bucket
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token_bucket, burst: 2}
  - key: gcra
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 1}
  - key: log
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: sliding_log}
  - key: sliding
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: sliding_window}
`
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startServer(t, tg, writeConfig(t, cfg))
		// A bucket of 2, one token a second.
		b := descs(desc("bucket", "k"))
		s.expectCodes(t, "algs", b, ok, ok, over)
		s.clk.Advance(time.Second)
		res := s.ask(t, "algs", b...)
		if res.OverallCode != ok || res.Statuses[0].DurationUntilReset.AsDuration() != 2*time.Second {
			t.Fatalf("bucket after 1s: %v, want OK and full again in 2s", res)
		}
		// GCRA of 10 a second, no burst: one every 100ms.
		g := descs(desc("gcra", "k"))
		s.expectCodes(t, "algs", g, ok, over)
		s.clk.Advance(100 * time.Millisecond)
		s.expectCodes(t, "algs", g, ok, over)
		// A sliding log: 2 in any minute, counted from each admission.
		l := descs(desc("log", "k"))
		s.expectCodes(t, "algs", l, ok)
		s.clk.Advance(30 * time.Second)
		s.expectCodes(t, "algs", l, ok, over)
		s.clk.Advance(30 * time.Second) // the first admission leaves the window
		res = s.ask(t, "algs", l...)
		if res.OverallCode != ok || res.Statuses[0].DurationUntilReset.AsDuration() != time.Minute {
			t.Fatalf("log: %v, want OK and fresh in 1m", res)
		}
		s.expectCodes(t, "algs", l, over)
		s.expectCodes(t, "algs", descs(desc("sliding", "k")), ok, ok, over)
	})
}

// TestShareThreshold: values matching a share_threshold wildcard share one
// count; without it each value counts apart.
func TestShareThreshold(t *testing.T) {
	cfg := `
domain: files
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: own
    value: own/*
    rate_limit: {unit: hour, requests_per_unit: 1}
`
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startServer(t, tg, writeConfig(t, cfg))
		s.expectCodes(t, "files", descs(desc("files", "files/a.pdf")), ok)
		s.expectCodes(t, "files", descs(desc("files", "files/b.csv")), ok, over)
		s.expectCodes(t, "files", descs(desc("own", "own/a")), ok, over)
		s.expectCodes(t, "files", descs(desc("own", "own/b")), ok, over)
	})
}

// TestLimitOverride: a descriptor may carry its own limit.
func TestLimitOverride(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startServer(t, tg, exampleConfig)
		d := desc("foo", "o", "baz", "not-so-shady")
		d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
		res := s.ask(t, "rl", d)
		if l := res.Statuses[0].CurrentLimit; res.OverallCode != ok || l.GetRequestsPerUnit() != 1 || l.GetUnit() != rlspb.RateLimitResponse_RateLimit_HOUR {
			t.Fatalf("%v, want OK under 1 per HOUR", res)
		}
		s.expectCodes(t, "rl", descs(d), over)
	})
}

// TestBadRequests: an empty domain, no descriptors or a descriptor too long
// to keep are invalid arguments.
func TestBadRequests(t *testing.T) {
	s := startServer(t, targets[0], exampleConfig)
	for _, req := range []*rlspb.RateLimitRequest{
		{Descriptors: descs(desc("foo", "a"))},
		{Domain: "rl"},
		// Longer than the store keeps (maxKeyBytes): refused, not an outage.
		{Domain: "rl", Descriptors: descs(desc("foo", strings.Repeat("x", maxKeyBytes)))},
	} {
		_, err := s.client.ShouldRateLimit(context.Background(), req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: error %v, want InvalidArgument", req, err)
		}
	}
}

// TestHeadersAndMetadata: with -response-headers the descriptor closest to
// its limit names the headers; with -response-metadata the rules that
// passed give their metadata (the quota example's service name).
func TestHeadersAndMetadata(t *testing.T) {
	s := startServer(t, targets[0], exampleConfig, func(o *options) {
		o.service.headers = true
		o.service.metadata = true
	})
	res := s.ask(t, "rl", desc("foo", "h", "baz", "not-so-shady"), desc("foo", "h", "bar", "x"))
	want := map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "2", "RateLimit-Reset": "50"}
	if len(res.ResponseHeadersToAdd) != 3 {
		t.Fatalf("headers %v, want 3", res.ResponseHeadersToAdd)
	}
	for _, h := range res.ResponseHeadersToAdd {
		if want[h.Key] != h.Value {
			t.Errorf("header %s: %q, want %q", h.Key, h.Value, want[h.Key])
		}
	}
	// A descriptor over its limit names the headers, whatever the others have left.
	res = s.ask(t, "rl", desc("foo", "h2", "baz", "not-so-shady"), desc("foo", "h2", "bar", "banned"))
	want = map[string]string{"RateLimit-Limit": "0", "RateLimit-Remaining": "0", "RateLimit-Reset": "50"}
	for _, h := range res.ResponseHeadersToAdd {
		if want[h.Key] != h.Value {
			t.Errorf("over the limit, header %s: %q, want %q", h.Key, h.Value, want[h.Key])
		}
	}
	both := descs(desc("service", "service_1"), desc("service", "service_2"))
	name := func(res *rlspb.RateLimitResponse) string {
		return res.GetDynamicMetadata().GetFields()["metadata"].GetStructValue().GetFields()["service_with_quota"].GetStructValue().GetFields()["name"].GetStringValue()
	}
	if got := name(s.ask(t, "rl", both...)); got != "service_1" {
		t.Fatalf("first request's service: %q, want service_1", got)
	}
	if got := name(s.ask(t, "rl", both...)); got != "service_2" {
		t.Fatalf("second request's service: %q, want service_2 (service_1 is out of quota)", got)
	}
	if res := s.ask(t, "rl", both...); res.GetDynamicMetadata().GetFields()["domain"].GetStringValue() != "rl" {
		t.Fatalf("metadata %v has no domain", res.GetDynamicMetadata())
	}
}

// TestGlobalShadowMode: -shadow-mode answers OK, and the status still
// says which descriptor is over.
func TestGlobalShadowMode(t *testing.T) {
	s := startServer(t, targets[0], exampleConfig, func(o *options) { o.service.shadow = true })
	res := s.ask(t, "rl", desc("foo", "x", "bar", "banned"))
	if res.OverallCode != ok || res.Statuses[0].Code != over {
		t.Fatalf("%v, want overall OK with the descriptor OVER_LIMIT", res)
	}
}

// TestReload: a configuration that loads replaces the one in force; one
// that does not leaves it. Files that hold what was last loaded or
// refused are neither loaded nor refused again.
func TestReload(t *testing.T) {
	three := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 3}\n"
	path := writeConfig(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")
	s := startServer(t, targets[0], path)
	s.expectCodes(t, "d", descs(desc("k", "a")), ok, over)
	rewrite(t, path, three)
	if outcome, err := s.app.reload(); outcome != reloaded || err != nil {
		t.Fatalf("reload: %v, %v; want reloaded", outcome, err)
	}
	// The count carries: 1 used of the new 3.
	s.expectCodes(t, "d", descs(desc("k", "a")), ok, ok, over)
	rewrite(t, path, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 3}\n")
	for _, want := range []reloadOutcome{refused, stillRefused} {
		if outcome, err := s.app.reload(); outcome != want || err == nil || !strings.Contains(err.Error(), "invalid rate limit unit 'fortnight'") {
			t.Fatalf("reload of a bad unit: %v, %v; want %v", outcome, err, want)
		}
	}
	s.expectCodes(t, "d", descs(desc("k", "b")), ok, ok, ok, over)
	rewrite(t, path, three)
	if outcome, err := s.app.reload(); outcome != unchanged || err != nil {
		t.Fatalf("reload of the configuration in force: %v, %v; want unchanged", outcome, err)
	}
	text := metricsText(t, s.app.metrics)
	for _, want := range []string{"ratelimit_service_config_load_success 2", "ratelimit_service_config_load_error 1"} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
}

// TestReloadSwitchingAlgorithm: a reload that gives a descriptor another
// algorithm keeps what its keys used, on every store: a client cannot
// wait for an operator's switch to get a fresh quota.
func TestReloadSwitchingAlgorithm(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		path := writeConfig(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 3}\n")
		s := startServer(t, tg, path)
		s.expectCodes(t, "d", descs(desc("k", "a")), ok, ok, ok, over)
		for _, alg := range []string{"token_bucket", "gcra", "sliding_log", "sliding_window", "fixed_window"} {
			rewrite(t, path, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: "+alg+"}\n")
			if _, err := s.app.reload(); err != nil {
				t.Fatal(err)
			}
			s.expectCodes(t, "d", descs(desc("k", "a")), over)
		}
	})
}

func rewrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGlobalQuotaMode: with -quota-mode a request is over only when every
// descriptor with a limit is.
func TestGlobalQuotaMode(t *testing.T) {
	s := startServer(t, targets[0], exampleConfig, func(o *options) { o.service.quota = true })
	banned := desc("foo", "q", "bar", "banned") // 0 a minute
	s.expectCodes(t, "rl", descs(banned, desc("foo", "q", "baz", "not-so-shady")), ok, ok, ok, over)
	s.expectCodes(t, "rl", descs(banned), over)
}
