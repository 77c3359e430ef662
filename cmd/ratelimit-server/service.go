package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/store"
)

// stateID names every limit's quota in the store (ratelimit.WithName; the
// key is the descriptor), whatever its algorithm and parameters: a reload that changes a limit keeps every key's count
// (the library carries it to the new limit, as used so far), and so does
// one that gives a descriptor another algorithm (WithResetOnMismatch: the
// library carries what the other kind's state had used).
const stateID = "rl"

// serviceOptions are what the flags say about responses.
type serviceOptions struct {
	// headers adds the RateLimit-* headers of the descriptor closest to its
	// limit to every response, as envoyproxy/ratelimit's
	// LIMIT_RESPONSE_HEADERS_ENABLED does.
	headers                                   bool
	limitHeader, remainingHeader, resetHeader string
	// metadata adds dynamic metadata to responses (the domain, the
	// descriptors, and the metadata of the rules that passed).
	metadata bool
	// shadow answers OK to every request (global shadow mode).
	shadow bool
	// quota makes every rule a quota_mode one (global quota mode).
	quota bool
	// denials is the size of each rule's denial cache (-denial-cache-keys;
	// ratelimit.WithDenialCache), 0 for none.
	denials int
	// maxDescriptors is the most descriptors a request may carry
	// (-max-descriptors).
	maxDescriptors int
}

// defaultMaxDescriptors is -max-descriptors's default. Envoy sends one
// descriptor per rate_limits action set of a route that applies, a handful
// in any deployment; the bound keeps one request from holding a store for
// a long time (100,000 descriptors took 0.8 s and 90 MB).
const defaultMaxDescriptors = 1000

// service answers ShouldRateLimit.
type service struct {
	rlspb.UnimplementedRateLimitServiceServer

	st      store.Store[string]
	clk     clock.Clock
	opts    serviceOptions
	metrics *metrics
	health  *storeHealth
	log     *slog.Logger
	// lastLog is when a failure other than the store's outage was last
	// logged (Unix ns): at most one a second is.
	lastLog atomic.Int64

	cur atomic.Pointer[limits]
}

// limits is a configuration made ready to decide: a Limiter per rule.
type limits struct {
	cfg      *config
	limiters map[*rule]*ratelimit.Limiter[string]

	mu        sync.Mutex
	overrides map[overrideKey]*overrideRule
}

type overrideKey struct {
	rpu  uint32
	unit rlspb.RateLimitResponse_RateLimit_Unit
}

type overrideRule struct {
	rule *rule
	lim  *ratelimit.Limiter[string]
}

// maxOverrides bounds the limiters kept for the limits requests carry
// themselves (RateLimitDescriptor.limit); past it they are made per request.
const maxOverrides = 1024

func newService(st store.Store[string], clk clock.Clock, opts serviceOptions, m *metrics, h *storeHealth, log *slog.Logger) *service {
	if opts.maxDescriptors <= 0 {
		opts.maxDescriptors = defaultMaxDescriptors
	}
	return &service{st: st, clk: clk, opts: opts, metrics: m, health: h, log: log}
}

// setConfig makes cfg the configuration in force, or returns why it cannot
// be and leaves the one in force.
func (s *service) setConfig(cfg *config) error {
	l, err := s.prepare(cfg)
	if err != nil {
		return err
	}
	s.cur.Store(l)
	return nil
}

func (s *service) prepare(cfg *config) (*limits, error) {
	l := &limits{cfg: cfg, limiters: map[*rule]*ratelimit.Limiter[string]{}, overrides: map[overrideKey]*overrideRule{}}
	var walk func(n *node) error
	walk = func(n *node) error {
		if r := n.rule; r != nil && r.alg != nil {
			lim, err := s.newLimiter(r.alg)
			if err != nil {
				return fmt.Errorf("%w: %s: %v", errConfig, r.statsKey, err)
			}
			l.limiters[r] = lim
		}
		for _, c := range n.children {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	for _, dom := range cfg.domains {
		if err := walk(dom); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (s *service) newLimiter(alg algorithm.Algorithm) (*ratelimit.Limiter[string], error) {
	opts := []ratelimit.Option{
		ratelimit.WithName(stateID),
		ratelimit.WithClock(s.clk),
		ratelimit.WithResetOnMismatch(),
		ratelimit.WithObserver(s.metrics.Observe),
		// A dead store fails calls at once, not after each one's timeout.
		ratelimit.WithBreaker(ratelimit.Breaker{}),
	}
	if s.opts.denials > 0 {
		opts = append(opts, ratelimit.WithDenialCache(s.opts.denials))
	}
	return ratelimit.New(alg, s.st, opts...)
}

// override returns the rule and limiter of a limit a request carries.
func (s *service) override(l *limits, o *rlcommon.RateLimitDescriptor_RateLimitOverride) (*rule, *ratelimit.Limiter[string], error) {
	unit := rlspb.RateLimitResponse_RateLimit_Unit(o.GetUnit())
	k := overrideKey{rpu: o.GetRequestsPerUnit(), unit: unit}
	l.mu.Lock()
	or, ok := l.overrides[k]
	l.mu.Unlock()
	if ok {
		return or.rule, or.lim, nil
	}
	period, ok := units[unit]
	if !ok {
		return nil, nil, fmt.Errorf("the descriptor's limit has no known unit (%v)", o.GetUnit())
	}
	r := &rule{unit: unit, requestsPerUnit: k.rpu, algorithm: algFixedWindow, statsKey: "override"}
	var lim *ratelimit.Limiter[string]
	if k.rpu > 0 {
		alg, err := fixedwindow.Per(int64(k.rpu), period)
		if err != nil {
			return nil, nil, err
		}
		r.alg = alg
		if lim, err = s.newLimiter(alg); err != nil {
			return nil, nil, err
		}
	}
	l.mu.Lock()
	if len(l.overrides) < maxOverrides {
		l.overrides[k] = &overrideRule{rule: r, lim: lim}
	}
	l.mu.Unlock()
	return r, lim, nil
}

// item is one descriptor of a request on its way to a status.
type item struct {
	m         match
	lim       *ratelimit.Limiter[string]
	key       string
	hits      int64
	negative  bool
	unlimited bool
	// what the store said
	d       ratelimit.Decision
	charged bool // hits were charged and may have to be given back
	over    bool
	err     error
}

// ShouldRateLimit decides a request: every descriptor's rule is found, each
// is asked of the store, and the request is admitted when no descriptor
// enforcing its limit is over it (quota_mode descriptors deny only all
// together; shadow_mode ones never). A request that is denied is charged to
// none of its descriptors: what the others were charged is given back.
func (s *service) ShouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	l, err := s.loadedFor(req)
	if err != nil {
		s.metrics.request("error", false)
		return nil, err
	}
	items, err := s.items(l, req)
	if err != nil {
		s.metrics.request("error", false)
		return nil, err
	}
	s.decideAll(ctx, items)
	var failed error
	for i := range items {
		if items[i].err != nil {
			failed = items[i].err
			break
		}
	}
	resp := &rlspb.RateLimitResponse{Statuses: make([]*rlspb.RateLimitResponse_DescriptorStatus, len(items))}
	code := s.overallCode(items, resp)
	if code == rlspb.RateLimitResponse_OVER_LIMIT || failed != nil {
		s.giveBack(ctx, items)
	}
	if failed != nil {
		return nil, s.failure(req, failed)
	}
	s.health.answered()
	for i := range items {
		it := &items[i]
		if it.m.rule == nil || it.unlimited {
			continue
		}
		resp.Statuses[i] = s.status(it)
		s.metrics.rule(it)
	}
	if s.opts.headers {
		resp.ResponseHeadersToAdd = s.headers(items, resp.Statuses)
	}
	if s.opts.metadata {
		resp.DynamicMetadata = responseMetadata(req, items)
	}
	if code == rlspb.RateLimitResponse_OVER_LIMIT && s.opts.shadow {
		code = rlspb.RateLimitResponse_OK
		s.metrics.globalShadowed()
	}
	resp.OverallCode = code
	s.metrics.request(code.String(), false)
	return resp, nil
}

// failure is the gRPC error of a request the store did not decide: the
// caller's (a descriptor too long: INVALID_ARGUMENT; its context ended:
// its context's code), or the store's (UNAVAILABLE). The store's outages
// are logged by the health, once per change; other failures at most once
// a second.
func (s *service) failure(req *rlspb.RateLimitRequest, err error) error {
	switch {
	case errors.Is(err, ratelimit.ErrKeyTooLong):
		s.metrics.request("error", false)
		return status.Errorf(codes.InvalidArgument, "descriptor too long: %v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		s.metrics.request("error", false)
		return status.FromContextError(err).Err()
	}
	s.metrics.request("error", true)
	if errors.Is(err, ratelimit.ErrStoreUnavailable) {
		s.health.failed(err)
	} else if now, last := time.Now().UnixNano(), s.lastLog.Load(); now-last >= int64(time.Second) && s.lastLog.CompareAndSwap(last, now) {
		s.log.Warn("store failed", "domain", req.Domain, "err", err)
	}
	return status.Errorf(codes.Unavailable, "rate limit store: %v", err)
}

// loadedFor returns the configuration that decides req, or the gRPC
// error refusing a request with no domain or no descriptors, or one that
// comes before any configuration is loaded.
func (s *service) loadedFor(req *rlspb.RateLimitRequest) (*limits, error) {
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	}
	if n := len(req.GetDescriptors()); n > s.opts.maxDescriptors {
		return nil, status.Errorf(codes.InvalidArgument, "%d descriptors in one request, more than the %d this server takes (-max-descriptors)", n, s.opts.maxDescriptors)
	}
	l := s.cur.Load()
	if l == nil {
		return nil, status.Error(codes.Unavailable, "no rate limit configuration loaded")
	}
	return l, nil
}

// items returns req's descriptors, each with its rule (the configuration's,
// or the descriptor's own limit), its limiter, its state key and its hits;
// a rule that another matched rule replaces is dropped.
func (s *service) items(l *limits, req *rlspb.RateLimitRequest) ([]item, error) {
	dom := l.cfg.domains[req.Domain]
	items := make([]item, len(req.Descriptors))
	var replacing map[string]bool // made for the first rule that replaces
	for i, desc := range req.Descriptors {
		it := &items[i]
		if o := desc.GetLimit(); o != nil {
			r, lim, err := s.override(l, o)
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "descriptor %d: %v", i, err)
			}
			it.m = match{rule: r, statsKey: "override"}
			it.lim = lim
		} else {
			it.m = lookup(req.Domain, dom, desc.GetEntries())
			if it.m.rule != nil {
				it.lim = l.limiters[it.m.rule]
			}
		}
		r := it.m.rule
		if r == nil {
			continue
		}
		for _, name := range r.replaces {
			if replacing == nil {
				replacing = map[string]bool{}
			}
			replacing[name] = true
		}
		if r.unlimited {
			it.unlimited = true
		}
		it.key = stateKey(req.Domain, desc.GetEntries(), it.m.patterns)
		if h := desc.GetHitsAddend(); h != nil {
			it.hits = int64(min(h.GetValue(), math.MaxInt32))
		} else {
			it.hits = int64(max(1, req.GetHitsAddend()))
		}
		it.negative = desc.GetIsNegativeHits()
	}
	for i := range items {
		if r := items[i].m.rule; r != nil && r.name != "" && replacing[r.name] {
			items[i].m.rule = nil
			items[i].unlimited = false
		}
	}
	return items, nil
}

// overallCode returns the request's code from its decided items: over the
// limit when a rate descriptor is over, or every quota descriptor is. It
// sets the status of the items with no rule or an unlimited one, in resp
// when it is not nil.
func (s *service) overallCode(items []item, resp *rlspb.RateLimitResponse) rlspb.RateLimitResponse_Code {
	overRate, overQuota, quotas := 0, 0, 0
	for i := range items {
		it := &items[i]
		r := it.m.rule
		switch {
		case r == nil:
			if resp != nil {
				resp.Statuses[i] = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
			}
			continue
		case it.unlimited:
			if resp != nil {
				resp.Statuses[i] = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
			}
			continue
		}
		quota := s.quotaMode(r)
		if quota {
			quotas++
		}
		if it.over {
			switch {
			case r.shadow:
			case quota:
				overQuota++
			default:
				overRate++
			}
		}
	}
	if overRate > 0 || (quotas > 0 && quotas == overQuota) {
		return rlspb.RateLimitResponse_OVER_LIMIT
	}
	return rlspb.RateLimitResponse_OK
}

// quotaMode reports whether r denies only with every other quota_mode rule
// of a request: its own quota_mode, or -quota-mode for all.
func (s *service) quotaMode(r *rule) bool { return r.quota || s.opts.quota }

// decideAll asks the store about every item with a limit. The charges go
// together, in one call (ratelimit.AllowAll: one Redis script per request,
// or per node of a cluster), all-or-none: a request denied is charged to
// none of its descriptors. When the descriptors that denied do not deny
// the request (shadow_mode, or quota_mode ones not all over), the others
// are charged by a second call. Peeks and refunds (hits_addend 0,
// is_negative_hits) are asked one by one. No store call gets the
// caller's cancellation or deadline: it is bounded by the store's own
// timeout, and needs no goroutine of its own.
func (s *service) decideAll(ctx context.Context, items []item) {
	ctx = context.WithoutCancel(ctx)
	var buf [4]int
	charges := buf[:0]
	for i := range items {
		it := &items[i]
		if s.needsStore(it) && !it.negative && it.hits > 0 && it.hits <= it.lim.Limit() {
			charges = append(charges, i)
			continue
		}
		s.decide(ctx, it)
	}
	switch {
	case len(charges) == 0:
		return
	case sameKeys(items, charges):
		// One key twice is one state, which the store cannot decide twice
		// at once: one call each, given back on a denial.
		for _, i := range charges {
			s.decide(ctx, &items[i])
		}
		return
	}
	s.chargeAll(ctx, items, charges)
	if items[charges[0]].charged || items[charges[0]].err != nil {
		return
	}
	// Denied, charging nothing: by descriptors that deny the request, or
	// only by shadow_mode ones, or quota_mode ones not all over, which
	// leave the others to charge.
	if s.overall(items) == rlspb.RateLimitResponse_OVER_LIMIT {
		return
	}
	var fits []int
	for _, i := range charges {
		if !items[i].over {
			fits = append(fits, i)
		}
	}
	if len(fits) > 0 {
		s.chargeAll(ctx, items, fits)
	}
}

// chargeAll charges the items at idx together, all-or-none.
func (s *service) chargeAll(ctx context.Context, items []item, idx []int) {
	var buf [4]ratelimit.Request[string]
	reqs := buf[:0]
	for _, i := range idx {
		it := &items[i]
		reqs = append(reqs, ratelimit.Request[string]{Limiter: it.lim, Key: it.key, N: int(it.hits)})
	}
	ok, err := ratelimit.AllowAll(ctx, reqs)
	for j, i := range idx {
		it := &items[i]
		if err != nil {
			it.err = fmt.Errorf("%s: %w", it.m.rule.statsKey, err)
			continue
		}
		it.d = reqs[j].Decision
		it.over = !it.d.Allowed()
		it.charged = ok
	}
}

// sameKeys reports whether two of the items at idx have one key.
func sameKeys(items []item, idx []int) bool {
	for a := range idx {
		for b := range a {
			if items[idx[a]].key == items[idx[b]].key {
				return true
			}
		}
	}
	return false
}

// overall is overallCode without the statuses.
func (s *service) overall(items []item) rlspb.RateLimitResponse_Code {
	return s.overallCode(items, nil)
}

func (s *service) needsStore(it *item) bool {
	return it.m.rule != nil && !it.unlimited && it.lim != nil
}

// decide asks the store about one item: a charge of its hits, a refund of
// them (is_negative_hits), or a look at its state when it has none to add.
func (s *service) decide(ctx context.Context, it *item) {
	r := it.m.rule
	if r == nil || it.unlimited {
		return
	}
	if it.lim == nil { // requests_per_unit: 0
		it.over = !it.negative
		return
	}
	var err error
	switch {
	case it.negative && it.hits > 0:
		it.d, err = it.lim.Refund(ctx, it.key, int(it.hits))
	case it.hits == 0 || it.negative:
		it.d, err = it.lim.Peek(ctx, it.key)
		it.over = err == nil && !it.d.Allowed()
	default:
		it.d, err = it.lim.AllowN(ctx, it.key, int(it.hits))
		if errors.Is(err, ratelimit.ErrCostExceedsLimit) {
			// More hits than the limit ever admits: over, charged nothing.
			it.d, err = it.lim.Peek(ctx, it.key)
			it.over = true
		} else if err == nil {
			it.over = !it.d.Allowed()
			it.charged = it.d.Allowed()
		}
	}
	if err != nil {
		it.err = fmt.Errorf("%s: %w", r.statsKey, err)
	}
}

// giveBack refunds what a denied (or failed) request was charged.
func (s *service) giveBack(ctx context.Context, items []item) {
	for i := range items {
		it := &items[i]
		if !it.charged {
			continue
		}
		d, err := it.lim.Refund(context.WithoutCancel(ctx), it.key, int(it.hits))
		if err != nil {
			// An outage is the health's to log; anything else is rare.
			s.metrics.refundFailed()
			if !errors.Is(err, ratelimit.ErrStoreUnavailable) {
				s.log.Warn("refund failed", "rule", it.m.rule.statsKey, "err", err)
			}
			continue
		}
		it.charged = false
		it.d = d
	}
}

// status is an item's descriptor status.
func (s *service) status(it *item) *rlspb.RateLimitResponse_DescriptorStatus {
	r := it.m.rule
	st := &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK, CurrentLimit: r.limitProto()}
	if it.over && !r.shadow {
		st.Code = rlspb.RateLimitResponse_OVER_LIMIT
	}
	if it.lim == nil { // requests_per_unit: 0, no state: the window's end
		period := units[r.unit]
		now := s.clk.Now()
		st.DurationUntilReset = durationpb.New(period - time.Duration(now.UnixNano()%int64(period)))
		return st
	}
	st.LimitRemaining = uint32(min(max(it.d.Remaining(), 0), math.MaxUint32))
	st.DurationUntilReset = durationpb.New(it.d.ResetAfter())
	return st
}

// headers are the RateLimit-Limit, -Remaining and -Reset headers of the
// descriptor closest to its limit, chosen as envoyproxy/ratelimit does: the
// least remaining, or the last enforcing descriptor over its limit.
func (s *service) headers(items []item, statuses []*rlspb.RateLimitResponse_DescriptorStatus) []*corepb.HeaderValue {
	var pick *rlspb.RateLimitResponse_DescriptorStatus
	least := uint32(math.MaxUint32)
	for i, st := range statuses {
		it := &items[i]
		if st.CurrentLimit == nil || it.unlimited {
			continue
		}
		if st.LimitRemaining < least {
			pick, least = st, st.LimitRemaining
		}
		if st.Code == rlspb.RateLimitResponse_OVER_LIMIT && !s.quotaMode(it.m.rule) {
			pick, least = st, 0
		}
	}
	if pick == nil {
		return nil
	}
	reset := pick.DurationUntilReset.AsDuration()
	secs := int64(reset / time.Second)
	if reset%time.Second != 0 {
		secs++
	}
	return []*corepb.HeaderValue{
		{Key: s.opts.limitHeader, Value: strconv.FormatUint(uint64(pick.CurrentLimit.RequestsPerUnit), 10)},
		{Key: s.opts.remainingHeader, Value: strconv.FormatUint(uint64(pick.LimitRemaining), 10)},
		{Key: s.opts.resetHeader, Value: strconv.FormatInt(secs, 10)},
	}
}

// responseMetadata is the dynamic metadata of a response: the domain, the
// request's descriptors and hits_addend, and the metadata of the rules of
// the descriptors that passed, merged.
func responseMetadata(req *rlspb.RateLimitRequest, items []item) *structpb.Struct {
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.Domain)}
	descs := make([]*structpb.Value, 0, len(req.Descriptors))
	for _, d := range req.Descriptors {
		entries := make([]*structpb.Value, 0, len(d.GetEntries()))
		for _, e := range d.GetEntries() {
			entries = append(entries, structpb.NewStringValue(e.GetKey()+"="+e.GetValue()))
		}
		f := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
		if d.GetLimit() != nil {
			f["limit"] = structpb.NewStringValue(d.GetLimit().String())
		}
		if h := d.GetHitsAddend(); h != nil {
			f["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
		}
		descs = append(descs, structpb.NewStructValue(&structpb.Struct{Fields: f}))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: descs})
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	passed := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range items {
		it := &items[i]
		if it.m.rule == nil || it.unlimited || it.over || it.m.rule.metadata == nil {
			continue
		}
		mergeStruct(passed, it.m.rule.metadata)
	}
	if len(passed.Fields) > 0 {
		fields["metadata"] = structpb.NewStructValue(passed)
	}
	return &structpb.Struct{Fields: fields}
}

// mergeStruct adds src's fields to dst; where both hold a struct under one
// name the two are merged, and otherwise the first value stays.
func mergeStruct(dst, src *structpb.Struct) {
	for k, v := range src.GetFields() {
		old, ok := dst.Fields[k]
		if !ok {
			dst.Fields[k] = v
			continue
		}
		if a, b := old.GetStructValue(), v.GetStructValue(); a != nil && b != nil {
			// Copy before merging so that the rule's metadata stays as loaded.
			c := &structpb.Struct{Fields: map[string]*structpb.Value{}}
			mergeStruct(c, a)
			mergeStruct(c, b)
			dst.Fields[k] = structpb.NewStructValue(c)
		}
	}
}
