package main

import (
	"strconv"
	"strings"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// match is what a request's descriptor matched: the rule, and for each
// entry the wildcard pattern that stands for its value in the state's key
// (share_threshold), or "".
type match struct {
	rule     *rule
	patterns []string
	// statsKey names the match in metrics (detailed_metric and
	// value_to_metric put the request's values in it).
	statsKey string
}

// lookup finds the rule of a descriptor in a domain as envoyproxy/ratelimit
// does: at each level the entry's key and value first, then the wildcard
// values in the order of the file, then the key alone; the rule applies when
// the descriptor has exactly as many entries as the matched path is deep.
func lookup(domainName string, dom *node, entries []*rlcommon.RateLimitDescriptor_Entry) match {
	var m match
	if dom == nil {
		return m
	}
	var detailed, valued strings.Builder
	detailed.WriteString(domainName)
	valued.WriteString(domainName)
	level := dom
	for i, e := range entries {
		next := level.children[entryKey{key: e.GetKey(), value: e.GetValue(), hasValue: e.GetValue() != ""}]
		byValue := next != nil
		wild := ""
		if next == nil {
			for _, w := range level.wildcards {
				if w.key == e.GetKey() && wildcardMatch(w.parts, e.GetValue()) {
					next, wild = w.child, strings.Join(w.parts, "*")
					break
				}
			}
		}
		if next == nil {
			next = level.children[entryKey{key: e.GetKey()}]
		}
		detailed.WriteByte('.')
		valued.WriteByte('.')
		valued.WriteString(e.GetKey())
		shown := ""
		switch {
		case next == nil:
		case wild != "" && next.shareThreshold:
			shown = next.pattern
		case wild != "" && next.valueToMetric:
			shown = e.GetValue()
		case wild != "":
			shown = wild
		case byValue:
			shown = e.GetValue()
		case next.valueToMetric:
			shown = e.GetValue()
		}
		if shown != "" {
			valued.WriteByte('_')
			valued.WriteString(shown)
		}
		detailed.WriteString(e.GetKey())
		if wild != "" && next.shareThreshold {
			detailed.WriteString("_" + next.pattern)
		} else if e.GetValue() != "" {
			detailed.WriteString("_" + e.GetValue())
		}
		if wild != "" && next.shareThreshold {
			if m.patterns == nil {
				m.patterns = make([]string, len(entries))
			}
			m.patterns[i] = next.pattern
		}
		if next != nil && next.rule != nil && i == len(entries)-1 {
			m.rule = next.rule
		}
		if next == nil || (len(next.children) == 0 && len(next.wildcards) == 0) {
			break
		}
		level = next
	}
	if m.rule == nil {
		m.patterns = nil
		return m
	}
	switch {
	case m.rule.detailedMetric:
		m.statsKey = detailed.String()
	default:
		m.statsKey = valued.String()
	}
	return m
}

// wildcardMatch reports whether value matches a pattern split at its '*'s,
// each of which stands for any run of characters, the empty one included.
func wildcardMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// stateKey is the key of a descriptor's state in the store: the domain and
// every entry, each string preceded by its length so that no two
// descriptors share a key, with a wildcard pattern in place of the value
// of an entry under share_threshold (marked '*' where a value is marked
// '=').
func stateKey(domain string, entries []*rlcommon.RateLimitDescriptor_Entry, patterns []string) string {
	n := len(domain) + 8
	for _, e := range entries {
		n += len(e.GetKey()) + len(e.GetValue()) + 16
	}
	var buf [256]byte // most keys: one allocation, the string's
	b := buf[:0]
	if n > len(buf) {
		b = make([]byte, 0, n)
	}
	b = appendField(b, domain)
	for i, e := range entries {
		b = append(b, '|')
		b = appendField(b, e.GetKey())
		if i < len(patterns) && patterns[i] != "" {
			b = append(b, '*')
			b = appendField(b, patterns[i])
			continue
		}
		b = append(b, '=')
		b = appendField(b, e.GetValue())
	}
	return string(b)
}

func appendField(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}
