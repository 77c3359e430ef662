package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// errConfig is wrapped by every error of a configuration that cannot be
// loaded (errors.Is tells them from I/O errors of the store).
var errConfig = errors.New("bad rate limit configuration")

// configError is a fault in one configuration file, at a line when known.
type configError struct {
	file string
	line int
	msg  string
}

func (e *configError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg)
	}
	return fmt.Sprintf("%s: %s", e.file, e.msg)
}

func (e *configError) Unwrap() error { return errConfig }

// The algorithms a rate_limit may name; fixed_window is the default, the
// one envoyproxy/ratelimit counts with.
const (
	algFixedWindow   = "fixed_window"
	algSlidingWindow = "sliding_window"
	algSlidingLog    = "sliding_log"
	algTokenBucket   = "token_bucket"
	algGCRA          = "gcra"
)

// units are the rate_limit units, as envoyproxy/ratelimit reads them (any
// case), with its lengths: a month is 30 days and a year 365.
var units = map[rlspb.RateLimitResponse_RateLimit_Unit]time.Duration{
	rlspb.RateLimitResponse_RateLimit_SECOND: time.Second,
	rlspb.RateLimitResponse_RateLimit_MINUTE: time.Minute,
	rlspb.RateLimitResponse_RateLimit_HOUR:   time.Hour,
	rlspb.RateLimitResponse_RateLimit_DAY:    24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_WEEK:   7 * 24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_MONTH:  30 * 24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_YEAR:   365 * 24 * time.Hour,
}

// config is a loaded configuration: every domain of every file.
type config struct {
	domains map[string]*node
	files   []string
	// digest is a hash of the files' names and contents: a reload that
	// finds the same digest has nothing to change.
	digest [sha256.Size]byte
}

// rule is one rate_limit block.
type rule struct {
	unit            rlspb.RateLimitResponse_RateLimit_Unit
	requestsPerUnit uint32
	unlimited       bool
	name            string
	replaces        []string
	algorithm       string
	burst           int64
	shadow          bool
	quota           bool
	detailedMetric  bool
	metadata        *structpb.Struct
	// alg decides; nil when unlimited or requestsPerUnit is 0.
	alg algorithm.Algorithm
	// statsKey names the rule in metrics: domain.key_value.key…
	statsKey string
	// proto is limitProto's, made on first use.
	proto atomic.Pointer[rlspb.RateLimitResponse_RateLimit]
}

// limitProto is the rule as a response's current_limit: one message per
// rule, shared by its responses (gRPC only reads it).
func (r *rule) limitProto() *rlspb.RateLimitResponse_RateLimit {
	if p := r.proto.Load(); p != nil {
		return p
	}
	p := &rlspb.RateLimitResponse_RateLimit{Name: r.name, RequestsPerUnit: r.requestsPerUnit, Unit: r.unit}
	r.proto.Store(p)
	return p
}

// entryKey names a child of a descriptor node: a key alone, or a key and
// value.
type entryKey struct {
	key, value string
	hasValue   bool
}

// wildcard is a child whose value holds a '*'.
type wildcard struct {
	key   string
	parts []string // the value split at '*'
	child *node
}

// node is a domain or a descriptor of the configuration.
type node struct {
	children       map[entryKey]*node
	wildcards      []wildcard
	rule           *rule
	shareThreshold bool
	valueToMetric  bool
	pattern        string // the value with its '*', for share_threshold
}

func newNode() *node { return &node{children: map[entryKey]*node{}} }

// defaultMaxConfigBytes is -max-config-bytes's default: far above the
// largest configurations deployed (a few thousand descriptors is well
// under a megabyte), far below what would hurt the process.
const defaultMaxConfigBytes = 16 << 20

// loadConfig reads path, a YAML file or a directory of them (*.yaml and
// *.yml, not descending into subdirectories, dotfiles skipped). With merge,
// files may add descriptors to a domain another file declared. The files
// together may hold at most maxBytes bytes (0: defaultMaxConfigBytes).
func loadConfig(path string, merge bool, maxBytes int64) (*config, error) {
	files, digest, err := readConfig(path, maxBytes)
	if err != nil {
		return nil, err
	}
	cfg, err := parseConfig(merge, files...)
	if err != nil {
		return nil, err
	}
	cfg.digest = digest
	return cfg, nil
}

// readConfig reads the files of the configuration at path (see
// loadConfig), each as its name and contents, and their digest.
func readConfig(path string, maxBytes int64) ([][2]string, [sha256.Size]byte, error) {
	var digest [sha256.Size]byte
	if maxBytes <= 0 {
		maxBytes = defaultMaxConfigBytes
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, digest, fmt.Errorf("%w: %v", errConfig, err)
	}
	names := []string{path}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, digest, fmt.Errorf("%w: %v", errConfig, err)
		}
		names = names[:0]
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
				continue
			}
			names = append(names, filepath.Join(path, n))
		}
		if len(names) == 0 {
			return nil, digest, &configError{file: path, msg: "no configuration files (*.yaml, *.yml) in the directory"}
		}
	}
	h := sha256.New()
	files := make([][2]string, 0, len(names))
	left := maxBytes
	for _, f := range names {
		data, err := readAtMost(f, left, maxBytes)
		if err != nil {
			return nil, digest, err
		}
		left -= int64(len(data))
		fmt.Fprintf(h, "%d:%s%d:", len(f), f, len(data))
		h.Write(data)
		files = append(files, [2]string{f, string(data)})
	}
	h.Sum(digest[:0])
	return files, digest, nil
}

// readAtMost reads file, refusing it when it holds more than max bytes,
// what is left of total.
func readAtMost(file string, max, total int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errConfig, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errConfig, err)
	}
	if int64(len(data)) > max {
		return nil, &configError{file: file, msg: fmt.Sprintf("the configuration's files hold more than %d bytes (-max-config-bytes)", total)}
	}
	return data, nil
}

// parseConfig loads a configuration from its files, each given as its
// name and contents.
func parseConfig(merge bool, files ...[2]string) (*config, error) {
	cfg := &config{domains: map[string]*node{}}
	for _, f := range files {
		cfg.files = append(cfg.files, f[0])
		if err := cfg.add(f[0], []byte(f[1]), merge); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// parser reads one file.
type parser struct {
	file string
}

func (p *parser) errf(n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &configError{file: p.file, line: line, msg: fmt.Sprintf(format, args...)}
}

// add loads one file's domain into cfg.
func (cfg *config) add(file string, data []byte, merge bool) error {
	p := &parser{file: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := yamlFault(data, err)
		return &configError{file: file, line: line, msg: "error loading config file: " + msg}
	}
	var root *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	var domain string
	var descs *yaml.Node
	if root != nil && !isNull(root) {
		if root.Kind != yaml.MappingNode {
			return p.errf(root, "the file must hold a mapping with domain and descriptors, not a %s", kindName(root))
		}
		err := p.fields(root, "the file", map[string]func(v *yaml.Node) error{
			"domain":      func(v *yaml.Node) error { return p.scalar(v, "domain", &domain) },
			"descriptors": func(v *yaml.Node) error { descs = v; return nil },
		})
		if err != nil {
			return err
		}
	}
	if domain == "" {
		return &configError{file: file, line: lineOf(root), msg: "config file cannot have empty domain"}
	}
	dom, present := cfg.domains[domain]
	if present && !merge {
		return &configError{file: file, line: lineOf(root), msg: fmt.Sprintf("duplicate domain '%s' in config file", domain)}
	}
	if !present {
		dom = newNode()
		cfg.domains[domain] = dom
	}
	return p.descriptors(dom, domain, descs)
}

// descriptors loads a list of descriptors into parent; path is the
// parent's composite key (domain.key_value…).
func (p *parser) descriptors(parent *node, path string, list *yaml.Node) error {
	if list == nil || isNull(list) {
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		return p.errf(list, "descriptors must be a list, not a %s", kindName(list))
	}
	for _, item := range list.Content {
		if item.Kind != yaml.MappingNode {
			return p.errf(item, "config error, yaml file contains list of type other than map: %s", item.Value)
		}
		if err := p.descriptor(parent, path, item); err != nil {
			return err
		}
	}
	return nil
}

// descriptor loads one descriptor.
func (p *parser) descriptor(parent *node, path string, m *yaml.Node) error {
	var (
		key, value                                             string
		rateLimit, children, metadata                          *yaml.Node
		shadow, quota, detailed, valueToMetric, shareThreshold bool
		hasValue                                               bool
	)
	err := p.fields(m, "a descriptor", map[string]func(v *yaml.Node) error{
		"key": func(v *yaml.Node) error { return p.scalar(v, "key", &key) },
		"value": func(v *yaml.Node) error {
			hasValue = !isNull(v)
			return p.scalar(v, "value", &value)
		},
		"rate_limit":      func(v *yaml.Node) error { rateLimit = v; return nil },
		"descriptors":     func(v *yaml.Node) error { children = v; return nil },
		"shadow_mode":     func(v *yaml.Node) error { return p.scalar(v, "shadow_mode", &shadow) },
		"quota_mode":      func(v *yaml.Node) error { return p.scalar(v, "quota_mode", &quota) },
		"detailed_metric": func(v *yaml.Node) error { return p.scalar(v, "detailed_metric", &detailed) },
		"value_to_metric": func(v *yaml.Node) error { return p.scalar(v, "value_to_metric", &valueToMetric) },
		"share_threshold": func(v *yaml.Node) error { return p.scalar(v, "share_threshold", &shareThreshold) },
		"metadata":        func(v *yaml.Node) error { metadata = v; return nil },
	})
	if err != nil {
		return err
	}
	if key == "" {
		return p.errf(m, "descriptor has empty key")
	}
	// envoyproxy/ratelimit treats an empty value as none.
	hasValue = hasValue && value != ""
	composite := key
	if hasValue {
		composite += "_" + value
	}
	fullPath := path + "." + composite
	ek := entryKey{key: key, value: value, hasValue: hasValue}
	if _, dup := parent.children[ek]; dup {
		return p.errf(m, "duplicate descriptor composite key '%s'", fullPath)
	}
	n := newNode()
	n.valueToMetric = valueToMetric
	if shareThreshold {
		if !hasValue || !strings.Contains(value, "*") {
			return p.errf(m, "share_threshold can only be used with wildcard values (containing '*'), but found key '%s'", composite)
		}
		n.shareThreshold = true
		n.pattern = value
	}
	if rateLimit != nil && !isNull(rateLimit) {
		r, err := p.rule(rateLimit, fullPath)
		if err != nil {
			return err
		}
		r.shadow, r.quota, r.detailedMetric = shadow, quota, detailed
		if metadata != nil && !isNull(metadata) {
			if r.metadata, err = p.metadata(metadata); err != nil {
				return err
			}
		}
		n.rule = r
	} else if metadata != nil && !isNull(metadata) {
		// Metadata is reported for a matched rate limit only; still
		// refuse one that cannot be made a protobuf Struct.
		if _, err := p.metadata(metadata); err != nil {
			return err
		}
	}
	parent.children[ek] = n
	if hasValue && strings.Contains(value, "*") {
		parent.wildcards = append(parent.wildcards, wildcard{key: key, parts: strings.Split(value, "*"), child: n})
	}
	return p.descriptors(n, fullPath, children)
}

// rule loads a rate_limit block.
func (p *parser) rule(m *yaml.Node, statsKey string) (*rule, error) {
	if m.Kind != yaml.MappingNode {
		return nil, p.errf(m, "rate_limit must be a mapping, not a %s", kindName(m))
	}
	r := &rule{statsKey: statsKey}
	var unitName string
	var unitNode, rpuNode, burstNode, algNode *yaml.Node
	err := p.fields(m, "rate_limit", map[string]func(v *yaml.Node) error{
		"unit": func(v *yaml.Node) error { unitNode = v; return p.scalar(v, "unit", &unitName) },
		"requests_per_unit": func(v *yaml.Node) error {
			rpuNode = v
			return p.scalar(v, "requests_per_unit", &r.requestsPerUnit)
		},
		"unlimited": func(v *yaml.Node) error { return p.scalar(v, "unlimited", &r.unlimited) },
		"name":      func(v *yaml.Node) error { return p.scalar(v, "name", &r.name) },
		"replaces":  func(v *yaml.Node) error { return p.replaces(v, r) },
		"algorithm": func(v *yaml.Node) error { algNode = v; return p.scalar(v, "algorithm", &r.algorithm) },
		"burst":     func(v *yaml.Node) error { burstNode = v; return p.scalar(v, "burst", &r.burst) },
	})
	if err != nil {
		return nil, err
	}
	unitValue, known := rlspb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(unitName)]
	validUnit := known && unitValue != int32(rlspb.RateLimitResponse_RateLimit_UNKNOWN)
	if r.unlimited {
		if validUnit {
			return nil, p.errf(unitNode, "should not specify rate limit unit when unlimited")
		}
		if rpuNode != nil || algNode != nil || burstNode != nil {
			return nil, p.errf(m, "an unlimited rate_limit takes no requests_per_unit, algorithm or burst")
		}
	} else if !validUnit {
		return nil, p.errf(orNode(unitNode, m), "invalid rate limit unit '%s'", unitName)
	}
	r.unit = rlspb.RateLimitResponse_RateLimit_Unit(unitValue)
	if slices.Contains(r.replaces, r.name) {
		return nil, p.errf(m, "replaces should not contain name of same descriptor")
	}
	if r.unlimited {
		return r, nil
	}
	if r.algorithm == "" {
		r.algorithm = algFixedWindow
	}
	if !knownAlgorithm(r.algorithm) {
		return nil, p.errf(algNode, "unknown algorithm '%s' (known: %s)", r.algorithm, strings.Join(algorithms, ", "))
	}
	if burstNode != nil && r.algorithm != algTokenBucket && r.algorithm != algGCRA {
		return nil, p.errf(burstNode, "burst is for the token_bucket and gcra algorithms, not %s", r.algorithm)
	}
	if burstNode != nil && r.burst < 1 {
		return nil, p.errf(burstNode, "burst must be at least 1, not %d", r.burst)
	}
	if r.requestsPerUnit == 0 {
		return r, nil // denies every request without asking the store
	}
	alg, err := newAlgorithm(r.algorithm, int64(r.requestsPerUnit), units[r.unit], r.burst)
	if err != nil {
		return nil, p.errf(orNode(algNode, m), "%v", err)
	}
	r.alg = alg
	return r, nil
}

// replaces reads a rate_limit's replaces, a list of {name: …}, into r.
func (p *parser) replaces(v *yaml.Node, r *rule) error {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		return p.errf(v, "replaces must be a list of {name: …}, not a %s", kindName(v))
	}
	for _, item := range v.Content {
		if item.Kind != yaml.MappingNode {
			return p.errf(item, "config error, yaml file contains list of type other than map: %s", item.Value)
		}
		var name string
		err := p.fields(item, "a replaces entry", map[string]func(v *yaml.Node) error{
			"name": func(v *yaml.Node) error { return p.scalar(v, "name", &name) },
		})
		if err != nil {
			return err
		}
		if name == "" {
			return p.errf(item, "should not have an empty replaces entry")
		}
		r.replaces = append(r.replaces, name)
	}
	return nil
}

var algorithms = []string{algFixedWindow, algSlidingWindow, algSlidingLog, algTokenBucket, algGCRA}

func knownAlgorithm(name string) bool { return slices.Contains(algorithms, name) }

// newAlgorithm returns the algorithm of a rate_limit: n per period, with a
// burst for the buckets (0: n).
func newAlgorithm(name string, n int64, period time.Duration, burst int64) (algorithm.Algorithm, error) {
	switch name {
	case algFixedWindow:
		return fixedwindow.Per(n, period)
	case algSlidingWindow:
		return slidingwindow.Per(n, period)
	case algSlidingLog:
		return slidinglog.Per(n, period)
	case algTokenBucket:
		if burst > 0 {
			return tokenbucket.Per(n, period, tokenbucket.Burst(burst))
		}
		return tokenbucket.Per(n, period)
	case algGCRA:
		if burst > 0 {
			return gcra.Per(n, period, gcra.Burst(burst))
		}
		return gcra.Per(n, period)
	}
	return nil, fmt.Errorf("unknown algorithm '%s' (known: %s)", name, strings.Join(algorithms, ", "))
}

// metadata converts a metadata block to the Struct reported in responses.
func (p *parser) metadata(n *yaml.Node) (*structpb.Struct, error) {
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return nil, p.errf(n, "error parsing metadata: %v", err)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil, p.errf(n, "error parsing metadata: %v", err)
	}
	return s, nil
}

// fields calls set for each key of mapping m, refusing keys that are not
// strings, unknown keys and keys given twice.
func (p *parser) fields(m *yaml.Node, what string, set map[string]func(v *yaml.Node) error) error {
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return p.errf(k, "config error, key is not of type string: %s", k.Value)
		}
		f, ok := set[k.Value]
		if !ok {
			known := make([]string, 0, len(set))
			for name := range set {
				known = append(known, name)
			}
			slices.Sort(known)
			return p.errf(k, "config error, unknown key '%s' in %s (known: %s)", k.Value, what, strings.Join(known, ", "))
		}
		if seen[k.Value] {
			return p.errf(k, "config error, key '%s' given twice in %s", k.Value, what)
		}
		seen[k.Value] = true
		if err := f(v); err != nil {
			return err
		}
	}
	return nil
}

// scalar decodes a scalar value into dst; null leaves dst zero.
func (p *parser) scalar(v *yaml.Node, name string, dst any) error {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.ScalarNode {
		return p.errf(v, "%s must be a single value, not a %s", name, kindName(v))
	}
	if _, isString := dst.(*string); isString && v.Tag != "!!str" {
		// Numbers and booleans as keys or values are common in
		// descriptors (value: 200); take their text.
		*dst.(*string) = v.Value
		return nil
	}
	if err := v.Decode(dst); err != nil {
		return p.errf(v, "%s: %v", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

func lineOf(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

func orNode(a, b *yaml.Node) *yaml.Node {
	if a != nil {
		return a
	}
	return b
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "value " + n.Value
}
