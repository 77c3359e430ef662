package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// badConfigs are envoyproxy/ratelimit's bad-configuration fixtures
// (testdata/bad, copied from its test/config) and the message its
// config_test.go expects of each, which the server's error must hold with
// the file's name.
var badConfigs = []struct{ file, want string }{
	{"bad_limit_unit.yaml", "invalid rate limit unit 'foo'"},
	{"bad_yaml.yaml", "error loading config file: yaml: line"},
	{"duplicate_key.yaml", "duplicate descriptor composite key 'test-domain.key1_value1'"},
	{"empty_domain.yaml", "config file cannot have empty domain"},
	{"empty_key.yaml", "descriptor has empty key"},
	{"misspelled_key.yaml", "config error, unknown key 'ratelimit'"},
	{"misspelled_key2.yaml", "config error, unknown key 'requestsperunit'"},
	{"non_map_list.yaml", "config error, yaml file contains list of type other than map: a"},
	{"non_string_key.yaml", "config error, key is not of type string: 0.25"},
	{"replaces_empty.yaml", "should not have an empty replaces entry"},
	{"replaces_self.yaml", "replaces should not contain name of same descriptor"},
	{"unlimited_with_unit.yaml", "should not specify rate limit unit when unlimited"},
}

func TestBadConfigFixtures(t *testing.T) {
	for _, c := range badConfigs {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", "bad", c.file)
			_, err := loadConfig(path, false, 0)
			if err == nil {
				t.Fatalf("%s loaded", path)
			}
			if !errors.Is(err, errConfig) {
				t.Errorf("error %v does not wrap errConfig", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, path+":") || !strings.Contains(msg, c.want) {
				t.Errorf("error %q, want %s: …%s…", msg, path, c.want)
			}
		})
	}
}

// TestDuplicateDomain: a domain in two files is refused, unless merged;
// then a descriptor in both is refused (envoyproxy/ratelimit's
// TestDuplicateDomain and TestDuplicateKeyDomainMerge).
func TestDuplicateDomain(t *testing.T) {
	read := func(name string) [2]string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return [2]string{name, string(b)}
	}
	_, err := parseConfig(false, read("good/basic_config.yaml"), read("bad/duplicate_domain.yaml"))
	if err == nil || !strings.Contains(err.Error(), "bad/duplicate_domain.yaml") || !strings.Contains(err.Error(), "duplicate domain 'test-domain' in config file") {
		t.Errorf("duplicate domain: %v", err)
	}
	cfg, err := parseConfig(true, read("good/merge_domain_key1.yaml"), read("good/merge_domain_key2.yaml"))
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	for _, v := range []string{"value1", "value2"} {
		k := "key" + v[len(v)-1:]
		if m := lookup("test-domain", cfg.domains["test-domain"], desc(k, v).Entries); m.rule == nil {
			t.Errorf("merged domain has no rule for (%s, %s)", k, v)
		}
	}
	_, err = parseConfig(true, read("good/merge_domain_key1.yaml"), read("good/merge_domain_key1.yaml"))
	if err == nil || !strings.Contains(err.Error(), "duplicate descriptor composite key 'test-domain.key1_value1'") {
		t.Errorf("merge of a key twice: %v", err)
	}
}

// TestGoodConfigs: envoyproxy/ratelimit's fixtures of valid configurations
// and its examples load.
func TestGoodConfigs(t *testing.T) {
	for _, path := range []string{
		"testdata/good/basic_config.yaml", "testdata/good/shadowmode_config.yaml", "testdata/good/share_threshold.yaml",
		"testdata/good/wildcard.yaml", "testdata/good/metadata.yaml", "examples/example.yaml", "examples/config.yaml",
	} {
		if _, err := loadConfig(path, false, 0); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	cfg, err := loadConfig("examples", false, 0)
	if err != nil {
		t.Fatalf("directory: %v", err)
	}
	if len(cfg.domains) != 2 || cfg.domains["rl"] == nil || cfg.domains["mongo_cps"] == nil {
		t.Fatalf("directory examples: domains %v, want rl and mongo_cps", cfg.domains)
	}
}

// TestConfigFaults: faults of this server's own keys and of values.
func TestConfigFaults(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: leaky}\n", "4: unknown algorithm 'leaky'"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5, burst: 3}\n", "burst is for the token_bucket and gcra algorithms"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 40000, algorithm: sliding_log}\n", "ratelimit:"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: -1}\n", "requests_per_unit"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute}\n    rate_limit: {unit: hour}\n", "key 'rate_limit' given twice"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1\n      replaces: bob\n", "replaces must be a list"},
		{"domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n", "share_threshold can only be used with wildcard values"},
		{"domain: d\ndescriptors: 5\n", "descriptors must be a list"},
		{"- a\n- b\n", "the file must hold a mapping"},
		{"domain: d\nbogus: 1\n", "unknown key 'bogus'"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, requests_per_unit: 5}\n", "unlimited rate_limit takes no requests_per_unit"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 5}\n", "invalid rate limit unit ''"},
	} {
		_, err := parseConfig(false, [2]string{"f.yaml", c.yaml})
		if err == nil || !errors.Is(err, errConfig) || !strings.HasPrefix(err.Error(), "f.yaml") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want f.yaml: …%s…", c.yaml, err, c.want)
		}
	}
}

// TestUnits: every unit envoyproxy/ratelimit knows, in any case.
func TestUnits(t *testing.T) {
	for name, unit := range map[string]rlspb.RateLimitResponse_RateLimit_Unit{
		"second": rlspb.RateLimitResponse_RateLimit_SECOND, "MINUTE": rlspb.RateLimitResponse_RateLimit_MINUTE,
		"Hour": rlspb.RateLimitResponse_RateLimit_HOUR, "day": rlspb.RateLimitResponse_RateLimit_DAY,
		"week": rlspb.RateLimitResponse_RateLimit_WEEK, "month": rlspb.RateLimitResponse_RateLimit_MONTH,
		"year": rlspb.RateLimitResponse_RateLimit_YEAR,
	} {
		cfg, err := parseConfig(false, [2]string{"f.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: " + name + ", requests_per_unit: 5}\n"})
		if err != nil {
			t.Errorf("unit %s: %v", name, err)
			continue
		}
		if r := lookup("d", cfg.domains["d"], desc("k", "v").Entries).rule; r == nil || r.unit != unit {
			t.Errorf("unit %s: rule %+v, want unit %v", name, r, unit)
		}
	}
}

// TestLookup follows envoyproxy/ratelimit's matching rules on its basic
// fixture: key and value first, then the key alone, and only at the
// descriptor's own depth.
func TestLookup(t *testing.T) {
	cfg, err := loadConfig("testdata/good/basic_config.yaml", false, 0)
	if err != nil {
		t.Fatal(err)
	}
	dom := cfg.domains["test-domain"]
	for _, c := range []struct {
		entries  []string
		rpu      uint32 // 0: no rule
		statsKey string
	}{
		{[]string{"key1", "something"}, 0, ""},
		{[]string{"key1", "value1"}, 0, ""},
		{[]string{"key1", "value1", "subkey1", "something"}, 5, "test-domain.key1_value1.subkey1"},
		{[]string{"key1", "value1", "subkey1", "subvalue1"}, 10, "test-domain.key1_value1.subkey1_subvalue1"},
		{[]string{"key2", "something"}, 20, "test-domain.key2"},
		{[]string{"key2", "value2"}, 30, "test-domain.key2_value2"},
		{[]string{"key2", "value3"}, 0, ""},
		{[]string{"key2", "value2", "subkey", "subvalue"}, 0, ""},
		{[]string{"key5", "value5", "subkey5", "subvalue"}, 0, ""},
		{[]string{"key7", "unspecified_value"}, 70, "test-domain.key7_unspecified_value"},
	} {
		m := lookup("test-domain", dom, desc(c.entries...).Entries)
		got := uint32(0)
		if m.rule != nil {
			got = m.rule.requestsPerUnit
		}
		if got != c.rpu || m.statsKey != c.statsKey {
			t.Errorf("%v: rule of %d per unit named %q, want %d named %q", c.entries, got, m.statsKey, c.rpu, c.statsKey)
		}
	}
}

func TestWildcardMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, value string
		want           bool
	}{
		{"value*", "value1", true}, {"value*", "value", true}, {"value*", "valu", false},
		{"/api/*/action", "/api/123/action", true}, {"/api/*/action", "/api/123/other", false},
		{"/api/*/resource/*/action", "/api/v1/resource/9/action", true},
		{"a*a", "a", false}, {"a*a", "aa", true}, {"*", "", true},
	} {
		if got := wildcardMatch(strings.Split(c.pattern, "*"), c.value); got != c.want {
			t.Errorf("wildcardMatch(%q, %q) = %v, want %v", c.pattern, c.value, got, c.want)
		}
	}
}

// TestStateKey: keys are injective where joining with separators is not.
func TestStateKey(t *testing.T) {
	a := stateKey("d", desc("a_b", "c").Entries, nil)
	b := stateKey("d", desc("a", "b_c").Entries, nil)
	c := stateKey("d", desc("a", "b*").Entries, []string{"b*"})
	d := stateKey("d", desc("a", "b*").Entries, nil)
	if a == b || c == d {
		t.Fatalf("keys collide: %q %q %q %q", a, b, c, d)
	}
}

// TestStatsKeys: value_to_metric puts the request's values in a rule's
// metric name, as envoyproxy/ratelimit's README (its Example 10) shows.
func TestStatsKeys(t *testing.T) {
	cfg, err := parseConfig(false, [2]string{"a.yaml", `
domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
`}, [2]string{"b.yaml", `
domain: example10_wildcard
descriptors:
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: minute, requests_per_unit: 100}
`})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		domain  string
		entries []string
		want    string
	}{
		{"example10", []string{"route", "api", "http_method", "GET", "subject_id", "123"}, "example10.route_api.http_method_GET.subject_id"},
		{"example10", []string{"route", "web", "http_method", "POST", "subject_id", "456"}, "example10.route_web.http_method_POST.subject_id"},
		{"example10_wildcard", []string{"user", "alice", "action", "readfile", "resource", "documents"}, "example10_wildcard.user_alice.action_readfile.resource"},
	} {
		if got := lookup(c.domain, cfg.domains[c.domain], desc(c.entries...).Entries).statsKey; got != c.want {
			t.Errorf("%v: stats key %q, want %q", c.entries, got, c.want)
		}
	}
}

// TestNilEntries: a descriptor made in process with nil entries matches
// nothing and does not panic.
func TestNilEntries(t *testing.T) {
	cfg, err := loadConfig(exampleConfig, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	entries := desc("foo", "a").Entries
	entries = append(entries, nil)
	if m := lookup("rl", cfg.domains["rl"], entries); m.rule != nil {
		t.Errorf("(foo, nil) matched %+v", m.rule)
	}
	stateKey("rl", entries, nil)
}

// TestYAMLFaultLine: a YAML syntax error names the line of the fault.
// yaml.v3 names the line where the construct around it began, counted
// from 0 for its parser's errors: the first case said "line 2".
func TestYAMLFaultLine(t *testing.T) {
	head := "domain: rl\ndescriptors:\n  - key: foo\n    rate_limit:\n      unit: minute\n"
	for _, c := range []struct {
		yaml string
		line int
		want string
	}{
		// requests_per_unit one column left of unit
		{head + "     requests_per_unit: 3\n", 6, "did not find expected key"},
		// a descriptor one column right of its siblings
		{head + "      requests_per_unit: 3\n   - key: bar\n", 7, "did not find expected '-' indicator"},
		// requests_per_unit two columns right of unit
		{head + "        requests_per_unit: 3\n", 6, "mapping values are not allowed in this context"},
		// a tab for indentation
		{"domain: rl\ndescriptors:\n  - key: foo\n\trate_limit: x\n", 4, "found a tab character"},
		// a quote never closed, then more lines
		{"domain: rl\ndescriptors:\n  - key: foo\n    value: \"abc\n  - key: bar\n", 4, "found unexpected end of stream"},
		// a flow mapping never closed, after one that spans two lines
		{"domain: rl\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute,\n      requests_per_unit: 3}\n  - key: foo\n    rate_limit: {unit: minute, requests_per_unit: 3\n  - key: bar\n", 7, "did not find expected ',' or '}'"},
	} {
		_, err := parseConfig(false, [2]string{"f.yaml", c.yaml})
		prefix := fmt.Sprintf("f.yaml:%d: error loading config file: yaml: line %d: ", c.line, c.line)
		if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %s…%s", c.yaml, err, prefix, c.want)
		}
	}
}

// TestUnknownAlgorithm: an unknown algorithm is the fault named, with the
// known ones, whatever else the rate_limit holds (with a burst, it was
// reported as "burst is for the token_bucket and gcra algorithms").
func TestUnknownAlgorithm(t *testing.T) {
	for _, rl := range []string{
		"{unit: minute, requests_per_unit: 5, algorithm: leaky_bucket, burst: 3}",
		"{unit: minute, requests_per_unit: 5, algorithm: leaky_bucket}",
		"{unit: minute, requests_per_unit: 0, algorithm: leaky_bucket}",
	} {
		_, err := parseConfig(false, [2]string{"f.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + rl + "\n"})
		want := "f.yaml:4: unknown algorithm 'leaky_bucket' (known: fixed_window, sliding_window, sliding_log, token_bucket, gcra)"
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %s", rl, err, want)
		}
	}
}

// TestConfigSize: the configuration's files together hold at most
// -max-config-bytes; past it the file that crosses the bound is named and
// nothing loads.
func TestConfigSize(t *testing.T) {
	dir := t.TempDir()
	one := "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"
	for _, f := range []string{"a.yaml", "b.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(strings.Replace(one, "domain: a", "domain: "+f[:1], 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := int64(len(one))
	if _, err := loadConfig(dir, false, 2*n); err != nil {
		t.Fatalf("two files of %d bytes under a bound of %d: %v", n, 2*n, err)
	}
	_, err := loadConfig(dir, false, 2*n-1)
	want := filepath.Join(dir, "b.yaml") + fmt.Sprintf(": the configuration's files hold more than %d bytes (-max-config-bytes)", 2*n-1)
	if err == nil || err.Error() != want || !errors.Is(err, errConfig) {
		t.Fatalf("a bound of %d: error %v, want %s", 2*n-1, err, want)
	}
}
