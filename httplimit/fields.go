package httplimit

import (
	"strconv"
	"strings"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Fields formats the IETF rate-limit fields of a policy's limits
// (draft-ietf-httpapi-ratelimit-headers): RateLimit-Policy, which says
// what the limits are, and RateLimit, which says where a decision left
// each of them. The middleware writes them as HTTP headers; other
// transports carry the same values (grpcratelimit sends them as response
// metadata). Make one per policy, once: the RateLimit-Policy field is
// formatted when it is made.
type Fields struct {
	names  []string // the limits' names
	quoted []string // the names as structured-field strings
	quotas []int64  // the limits' quotas (algorithm.Quota.Limit)
	policy string   // RateLimit-Policy
	holds  bool     // a limit holds (algorithm.Holder)
}

// PolicyFields returns the fields of p's limits, one list item per limit
// under its name, in p's order, each with the quota its user configured
// (algorithm.QuotaOf).
func PolicyFields[K comparable](p *ratelimit.Policy[K]) *Fields {
	names, quotas := policyQuotas(p)
	f := newFields(names, quotas)
	f.holds = policyHolds(p)
	return f
}

// policyHolds reports whether a limit of p holds.
func policyHolds[K comparable](p *ratelimit.Policy[K]) bool {
	for _, l := range p.Limits() {
		if algorithm.Holds(l.Algorithm) {
			return true
		}
	}
	return false
}

// LimiterFields returns the fields of lim, as those of a policy of one
// limit with lim's quota, named as lim is (ratelimit.WithName), or
// "default" when it has no name; of a Limiter of several limits
// (ratelimit.NewPolicy), PolicyFields.
func LimiterFields[K comparable](lim *ratelimit.Limiter[K]) *Fields {
	if isPolicy(lim) {
		return PolicyFields(lim)
	}
	f := newFields([]string{limiterName(lim)}, []algorithm.Quota{algorithm.QuotaOf(lim.Limits()[0].Algorithm)})
	f.holds = algorithm.Holds(lim.Limits()[0].Algorithm)
	return f
}

// isPolicy reports whether lim was built by ratelimit.NewPolicy, whose
// limits have names (ratelimit.New's one limit has none).
func isPolicy[K comparable](lim *ratelimit.Limiter[K]) bool {
	return lim.Limits()[0].Name != ""
}

// limiterName is the name lim's limit goes by in the fields: its own
// (ratelimit.WithName), or "default".
func limiterName[K comparable](lim *ratelimit.Limiter[K]) string {
	if name := lim.Name(); name != "" {
		return name
	}
	return "default"
}

// policyQuotas returns the names of p's limits and their quotas.
func policyQuotas[K comparable](p *ratelimit.Policy[K]) ([]string, []algorithm.Quota) {
	ls := p.Limits()
	names := make([]string, len(ls))
	quotas := make([]algorithm.Quota, len(ls))
	for i, l := range ls {
		names[i], quotas[i] = l.Name, algorithm.QuotaOf(l.Algorithm)
	}
	return names, quotas
}

// newFields returns the fields of limits of these names and quotas.
func newFields(names []string, quotas []algorithm.Quota) *Fields {
	f := &Fields{names: names, quoted: make([]string, len(names)), quotas: make([]int64, len(names))}
	var policy strings.Builder
	for i, name := range names {
		if i > 0 {
			policy.WriteString(", ")
		}
		f.quoted[i], f.quotas[i] = quote(name), quotas[i].Limit
		policy.WriteString(f.quoted[i])
		policy.WriteString(";q=")
		policy.WriteString(strconv.FormatInt(quotas[i].Limit, 10))
		if w := seconds(quotas[i].Window); w > 0 {
			policy.WriteString(";w=")
			policy.WriteString(strconv.FormatInt(w, 10))
		}
	}
	f.policy = policy.String()
	return f
}

// Holds reports whether a limit of the fields holds each request it
// admits until it ends (an algorithm.Holder, such as package concurrency's
// in-flight limit): the middleware then holds a slot for the request's
// duration.
func (f *Fields) Holds() bool { return f.holds }

// Name returns the name of limit i.
func (f *Fields) Name(i int) string { return f.names[i] }

// Quota returns the quota of limit i, as RateLimit-Policy says it (q).
func (f *Fields) Quota(i int) int64 { return f.quotas[i] }

// Policy returns the RateLimit-Policy field, such as
// `"second";q=3;w=1, "day";q=5;w=86400`: each limit's quota q and, when
// its algorithm has one, its window w in seconds (rounded up).
func (f *Fields) Policy() string { return f.policy }

// RateLimit returns the RateLimit field of d, a decision of the policy f
// describes, such as `"second";r=0;t=1, "day";r=2;t=50400`: what each
// limit has remaining r, and the seconds t (rounded up) until it is fresh
// again.
func (f *Fields) RateLimit(d *ratelimit.Decision) string {
	// Formatted on the stack when it fits, so that the string is the only
	// allocation.
	var buf [256]byte
	return string(f.appendRateLimit(buf[:0], d))
}

// appendRateLimit appends the RateLimit field of d to b.
func (f *Fields) appendRateLimit(b []byte, d *ratelimit.Decision) []byte {
	ds := d.Limits()
	if ds == nil {
		ds = []ratelimit.Decision{*d} // one limit's
	}
	for i, di := range ds {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, f.quoted[i]...)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, di.Remaining(), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, seconds(di.ResetAfter()), 10)
	}
	return b
}

// quote renders s as a structured-field string (RFC 8941): printable
// ASCII, with '"' and '\' escaped; anything else becomes '?'.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
