package redisstore

// The table: key naming and the key size limit, script arguments, reply
// checking and error wrapping, whatever the client library (a Runner).

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/store"
)

// Args are a script call's ARGV: the two that change with every call, then
// those a table sends every time (the TTL margin and the algorithm's
// parameters), kept both as strings and boxed once for clients whose
// commands take []any, so that a call does not box them again.
type Args struct {
	Now, Cost string // ARGV[1] and ARGV[2]
	CostAny   any    // Cost boxed when it is a small one (below 100), else nil
	// Batch, when not nil, takes the place of Now and Cost: a batch
	// script's count and its requests' times and costs (luascript.Batch).
	Batch   []string
	Rest    []string
	RestAny []any // Rest, boxed
}

// smallCosts are the costs below 100 boxed once, so that a client whose
// commands take []any does not box the common cost per call.
var smallCosts = func() (boxed [100]any) {
	for i := range boxed {
		boxed[i] = strconv.Itoa(i)
	}
	return boxed
}()

// All returns every argument in order.
func (a Args) All() []string {
	all := make([]string, 0, 2+len(a.Batch)+len(a.Rest))
	if a.Batch != nil {
		return append(append(all, a.Batch...), a.Rest...)
	}
	return append(append(all, a.Now, a.Cost), a.Rest...)
}

// DefaultTTLMargin is the stores' default TTL margin (WithTTLMargin): how
// much longer than its state needs a key lives, so that a request whose
// instant was read a little before its script ran (queued behind others)
// does not find its key expired and start it afresh.
const DefaultTTLMargin = time.Second

// DefaultTimeout is the stores' default Config.Timeout: the longest one
// script call may take, TRYAGAIN retries included. A Limiter runs a Redis
// table's calls under none of its caller's cancellation (store.Remote),
// so this is what bounds a call to a Redis that does not answer. 3 s, as
// go-redis's default read timeout: far above what a loaded server takes
// (a batch's script may run 5 ms, a cluster redirects and retries; 1 s
// was reached on a 2-core machine running five test suites at once), so
// that a slow moment is not taken for an outage.
const DefaultTimeout = 3 * time.Second

// MaxLimits is the most limits a table decides for: a Policy of more is
// refused at Open (store.ErrAlgorithmUnsupported). Every operation is one
// script that runs every limit's part, so its cost grows with them. A
// Policy of 1,000 token buckets took 4.5 ms of Redis per decision (Redis
// 7.0, the 2-core VM; its script is 5 MB), and miniredis did not compile
// its booking script within the client's 10 s timeout; past a few
// thousand limits Redis cannot compile the script at all ("too many local
// variables"). Every call would then fail as an outage would, not at the
// Policy's making. 300 is the most the tests run every operation of, on
// every store and server (TestBigPolicy); a real Policy has a handful.
const MaxLimits = 300

// checkPrefix returns an error wrapping algorithm.ErrInvalidConfig when
// prefix contains a brace: the store's own braces around the key make the
// Redis Cluster hash tag, and a brace in the prefix would take it over.
func checkPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%w: key prefix %q must not contain '{' or '}'", algorithm.ErrInvalidConfig, prefix)
	}
	return nil
}

// config is what a Redis store's options set.
type config[K comparable] struct {
	// Prefix starts every key; it must not contain '{' or '}'.
	Prefix string
	// Encode turns keys into bytes; nil means store.DefaultKeyEncoder.
	Encode store.KeyEncoder[K]
	// TTLMargin is added to every key's time to live (the stores'
	// default: DefaultTTLMargin).
	TTLMargin time.Duration
	// MaxKeyBytes is the longest key encoding (Encode's bytes, before
	// escaping, the prefix and the state ID) a table accepts; 0 means
	// store.DefaultMaxKeyBytes.
	MaxKeyBytes int
	// InFlight, when above 0, coalesces Takes: once InFlight calls for a
	// key are in flight, further Takes of it wait, then go together in
	// one batch script call (see coalesce.go). 0 turns coalescing off;
	// the stores' default is DefaultInFlight.
	InFlight int
	// Timeout bounds each script call (see DefaultTimeout); 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// CommitInFlight, when above 0, is how many multi script calls are
	// in flight before TakeAlls wait to go together (commit.go); 0 sends
	// each alone. The stores' default is DefaultCommitInFlight.
	CommitInFlight int
	// Evictions, when not nil, checks the servers' maxmemory-policy when
	// a table is opened. A store shares one among its tables.
	Evictions *evictionWatch
}

// check validates c, sets Encode to store.DefaultKeyEncoder when it is
// nil and MaxKeyBytes to store.DefaultMaxKeyBytes when it is 0. Errors
// wrap algorithm.ErrInvalidConfig or store.ErrKeyType.
func (c *config[K]) check() error {
	if err := checkPrefix(c.Prefix); err != nil {
		return err
	}
	if c.InFlight < 0 {
		return fmt.Errorf("%w: coalescing: %d calls in flight per key; want 0 (off) or more", algorithm.ErrInvalidConfig, c.InFlight)
	}
	if c.CommitInFlight < 0 {
		return fmt.Errorf("%w: group commit: %d calls in flight; want 0 (off) or more", algorithm.ErrInvalidConfig, c.CommitInFlight)
	}
	switch {
	case c.Timeout == 0:
		c.Timeout = DefaultTimeout
	case c.Timeout < 0:
		return fmt.Errorf("%w: call timeout %v; want more than 0", algorithm.ErrInvalidConfig, c.Timeout)
	}
	if c.TTLMargin < 0 || c.TTLMargin > time.Duration(algorithm.MaxDuration)*time.Microsecond {
		return fmt.Errorf("%w: TTL margin %v out of range", algorithm.ErrInvalidConfig, c.TTLMargin)
	}
	switch {
	case c.MaxKeyBytes == 0:
		c.MaxKeyBytes = store.DefaultMaxKeyBytes
	case c.MaxKeyBytes < 0:
		return fmt.Errorf("%w: the longest key must be at least 1 byte", algorithm.ErrInvalidConfig)
	}
	if c.Encode == nil {
		enc, err := store.DefaultKeyEncoder[K]()
		if err != nil {
			return err
		}
		c.Encode = enc
	}
	return nil
}

// Table is a store.Table kept in Redis.
//
// The state of key k is kept in the Redis hash prefix + "{" + encoded k +
// "}" + "#", one field per limit's state ID, whose value is the state's
// header (algorithm.Tag.Header) and body; a sliding log keeps its state
// in a sorted set of its own, that name followed by its ID ("#{}" for the
// empty ID). The braces make every limit of one key share a Redis Cluster
// hash tag, so one script reaches all of them. Keys of the layout before
// headers (prefix{k} and prefix{k}:ID) are never read.
type Table[K comparable] struct {
	run       Runner
	prefix    string
	encode    store.KeyEncoder[K]
	script    *luascript.Script
	suffixes  []string // "#", then "#" + ID per limit ("#{}" for "")
	declared  []string // the suffixes of the keys a decision's script declares (luascript.compose)
	ids       []string // the limits' state IDs, as Reset sends them
	resetAny  []any
	rest      []string // ARGV[3…]: the TTL margin in ms, then the parameters
	restAny   []any
	server    bool
	modes     string                                    // the limits' modes (luascript.Modes), for conversion scripts
	limits    []int64                                   // each limit's Limit
	algs      []algorithm.Algorithm                     // the limits' algorithms, to name them in errors
	ops       [luascript.OpSettle + 1]*luascript.Script // the booking scripts, by Op; nil for an algorithm without them
	opBatch   [luascript.OpSettle + 1]*luascript.Script // their batch scripts (luascript.OpBatch), with coalescing
	opsErr    error                                     // why they are nil
	settleErr error                                     // why ops[OpSettle] is nil (a body without --@owe)
	maxKey    int                                       // the longest encoding of a key accepted
	warnings  []error                                   // found by cfg.Evictions
	evict     tableEviction                             // cfg.Evictions, which decisions poll (eviction.go)
	lines     *lines                                    // keys in flight, nil without coalescing
	inFlight  int                                       // Config.InFlight
	batch     *luascript.Script                         // the batch script of script
	maxBatch  int                                       // the most requests in a batch (batchBound)
	timeout   time.Duration                             // Config.Timeout
	// holding lists the limits whose algorithm holds (algorithm.Holder);
	// when they are some of the limits but not all, holds is the table
	// of them alone, whose undo script a Reservation's Release runs.
	holding []int
	holds   *Table[K]
	// home is the Store that opened the table: TakeAll decides requests
	// of its tables alone.
	home any
	// commit is the store's group commit of TakeAlls; nil without.
	commit *committer[K]
	// declaredAt are the places in suffixes of declared's.
	declaredAt []int
}

var (
	_ store.Table[string] = (*Table[string])(nil)
	_ store.Warner        = (*Table[string])(nil)
	_ store.Remote        = (*Table[string])(nil)
	_ store.Reporter      = (*Table[string])(nil)
)

// CallTimeout returns the longest one script call may take
// (Config.Timeout). A Limiter gives a call made for a caller whose
// context can end a context with that deadline (store.Remote); the table
// bounds by it its batches, booking operations and resets, and any call
// whose context has no deadline but for a decision's alone, the hot path,
// which an allocation per call would slow: that one is bounded by the
// client library's own timeouts (go-redis's ReadTimeout, 3 s by default).
func (t *Table[K]) CallTimeout() time.Duration { return t.timeout }

// bounded returns ctx, bounded by the table's Timeout when it has no
// deadline.
func (t *Table[K]) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, t.timeout)
}

// newTable returns a table for limits with its keys' suffixes and its
// limits' IDs, but no scripts yet, and the limits' specs for the scripts:
// an error wraps
// algorithm.ErrInvalidConfig for a state ID with a brace, or
// store.ErrAlgorithmUnsupported for an algorithm without an
// algorithm.Tag.
func newTable[K comparable](run Runner, cfg config[K], limits []store.Limit, server bool) (*Table[K], []luascript.Limit, error) {
	specs := make([]luascript.Limit, len(limits))
	t := &Table[K]{
		run:      run,
		prefix:   cfg.Prefix,
		encode:   cfg.Encode,
		suffixes: make([]string, 1+len(limits)),
		ids:      make([]string, len(limits)),
		limits:   make([]int64, len(limits)),
		algs:     make([]algorithm.Algorithm, len(limits)),
		server:   server,
		maxKey:   cfg.MaxKeyBytes,
	}
	for i, l := range limits {
		if strings.ContainsAny(l.ID, "{}") {
			return nil, nil, fmt.Errorf("%w: state ID %q must not contain '{' or '}'", algorithm.ErrInvalidConfig, l.ID)
		}
		t.ids[i] = l.ID
		specs[i] = luascript.Limit{Spec: l.Algorithm.Spec(), ID: l.ID, Rule: l.Inherit, ResetOnMismatch: l.ResetOnMismatch}
		var ok bool
		if specs[i].Tag, ok = algorithm.TagOf(l.Algorithm); !ok {
			return nil, nil, fmt.Errorf("%w: %v has no algorithm.Tag", store.ErrAlgorithmUnsupported, l.Algorithm)
		}
		t.limits[i] = l.Algorithm.Limit()
		t.algs[i] = l.Algorithm
	}
	for i, k := range luascript.Keys("", t.ids...) {
		t.suffixes[i] = k
	}
	return t, specs, nil
}

// declare sets the keys a decision declares, and the most requests in a
// batch, which a sliding log lowers.
func (t *Table[K]) declare(limits []store.Limit) {
	// A decision declares the keys it must find where it runs: the hash
	// when a limit keeps its state there, and each log's sorted set. A
	// key it only looks at on a miss is not declared, so that a Limiter's
	// script has one key and a Redis Cluster slot migration answers it
	// ASK, never TRYAGAIN (which it would for as long as the migration
	// lasts when one declared key, a sorted set never written, is missing).
	var logs []string
	for i, l := range limits {
		if tag, _ := algorithm.TagOf(l.Algorithm); keepsLog(tag) {
			logs = append(logs, t.suffixes[1+i])
		}
	}
	if len(logs) < len(limits) {
		t.declared = append(t.declared, t.suffixes[0])
		t.declaredAt = append(t.declaredAt, 0)
	}
	t.declared = append(t.declared, logs...)
	for i, l := range limits {
		if tag, _ := algorithm.TagOf(l.Algorithm); keepsLog(tag) {
			t.declaredAt = append(t.declaredAt, 1+i)
		}
	}
	t.maxBatch = batchBound(len(limits), len(logs) > 0)
}

// keepsLog reports whether a state of tag's Kind keeps a Log: a sorted
// set of its own on Redis.
func keepsLog(tag algorithm.Tag) bool {
	k, ok := algorithm.KindOf(tag.Kind)
	return ok && k.Log
}

// open returns a table for limits. With cfg.Evictions, it first reads
// the servers' maxmemory-policy (once per store; see evictionWatch): a
// server that may evict limiter state is reported by the table's Warnings,
// or fails Open with EvictionRefuse.
func open[K comparable](run Runner, cfg config[K], limits []store.Limit, clk clock.Clock) (*Table[K], error) {
	if err := store.CheckLimits(limits); err != nil {
		return nil, err
	}
	if len(limits) > MaxLimits {
		return nil, fmt.Errorf("%w: a Policy of %d limits; a Redis store decides for at most %d in one script", store.ErrAlgorithmUnsupported, len(limits), MaxLimits)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	t, specs, err := newTable(run, cfg, limits, clock.IsServer(clk))
	if err != nil {
		return nil, err
	}
	t.declare(limits)
	t.resetAny = make([]any, len(t.ids))
	for i, id := range t.ids {
		t.resetAny[i] = id
	}
	script, params, err := luascript.For(specs...)
	if err != nil {
		return nil, err
	}
	t.modes = luascript.Modes(specs...)
	if t.warnings, err = cfg.Evictions.Run(); err != nil {
		return nil, err
	}
	t.evict.check = cfg.Evictions
	t.evict.seen.Store(cfg.Evictions.Gen())
	t.script = script
	t.timeout = cfg.Timeout
	if t.timeout <= 0 {
		t.timeout = DefaultTimeout
	}
	if cfg.InFlight > 0 {
		t.inFlight = cfg.InFlight
		t.lines = newLines()
		t.batch = luascript.Batch(script)
	}
	for op := luascript.OpBook; op <= luascript.OpUndo; op++ {
		t.ops[op], _, t.opsErr = luascript.ForOp(op, specs...)
		if t.opsErr != nil {
			break
		}
		if t.lines != nil {
			t.opBatch[op] = luascript.OpBatch(t.ops[op])
		}
	}
	if t.opsErr == nil {
		t.ops[luascript.OpSettle], _, t.settleErr = luascript.ForOp(luascript.OpSettle, specs...)
		if t.settleErr == nil && t.lines != nil {
			t.opBatch[luascript.OpSettle] = luascript.OpBatch(t.ops[luascript.OpSettle])
		}
	} else {
		t.settleErr = t.opsErr
	}
	t.rest = append([]string{strconv.FormatInt(cfg.TTLMargin.Milliseconds(), 10)}, params...)
	t.restAny = make([]any, len(t.rest))
	for i, a := range t.rest {
		t.restAny[i] = a
	}
	return t, t.openHolds(cfg, limits, clk)
}

// openHolds sets the limits that a release gives back to (those that
// hold: store.Booking.Gives), and, when they are some of the limits but
// not all, opens the table of them alone.
func (t *Table[K]) openHolds(cfg config[K], limits []store.Limit, clk clock.Clock) error {
	var holds []store.Limit
	release := store.Booking{Release: true}
	for i, l := range limits {
		if release.Gives(l.Algorithm) {
			t.holding = append(t.holding, i)
			holds = append(holds, l)
		}
	}
	if len(holds) == 0 || len(holds) == len(limits) {
		return nil
	}
	var err error
	t.holds, err = open(t.run, cfg, holds, clk)
	return err
}

// Warnings returns what Open found wrong with the servers that does not
// stop the table from deciding: an error wrapping store.ErrEvicting per
// server whose maxmemory-policy may evict limiter state.
func (t *Table[K]) Warnings() []error { return slices.Clone(t.warnings) }

// scratch is a call's Redis keys and the script's reply, pooled: they
// reach the runner through an interface, so slices on the stack would
// escape.
type scratch struct {
	keys  []string
	reply []int64
}

// release returns sc to the pool with keys, its keys slice as a call
// used it, holding no strings.
func (sc *scratch) release(keys []string) {
	clear(keys)
	sc.keys = keys[:0]
	scratches.Put(sc)
}

// decisionArgs are the decision script's arguments at now (ARGV[1] as
// the call sends it) for cost: a cost below 100, the common one, is a
// string strconv keeps, boxed once.
func (t *Table[K]) decisionArgs(now string, cost int64) Args {
	args := Args{Now: now, Cost: strconv.FormatInt(cost, 10), Rest: t.rest, RestAny: t.restAny}
	if cost >= 0 && cost < int64(len(smallCosts)) {
		args.CostAny = smallCosts[cost]
	}
	return args
}

var scratches = sync.Pool{New: func() any {
	return &scratch{keys: make([]string, 0, 4), reply: make([]int64, 0, 12)}
}}

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 128); return &b }}

// Keys returns the Redis keys of key's state in dst[:0]: its hash, then
// one sorted set per limit (see Table): the prefix, then the encoded key
// in braces, so that it is the Redis Cluster hash tag, then the suffix.
// The empty key is written "\\" in the braces, so that its tag is not empty. Inside the braces '\'
// becomes `\\` and '}' becomes `\)`, so no user key can end the tag
// early, and different keys never share a name. The keys are cut from one
// string: one allocation however many limits there are.
//
// A key whose encoding is longer than the table's MaxKeyBytes is refused
// with an error wrapping store.ErrKeyTooLong.
func (t *Table[K]) Keys(dst []string, key K) ([]string, error) {
	keys, _, err := t.keys(dst, key, t.suffixes, nil)
	return keys, err
}

// keys is Keys for the names of these suffixes, with tail (a call's
// ARGV[1], the time in decimal) written after the keys in the same
// allocation and returned as a string of its own: a call's keys and its
// time cost one allocation, not two. The string is never written after
// it is returned, so the runner may keep it as long as it likes.
func (t *Table[K]) keys(dst []string, key K, suffixes []string, tail []byte) ([]string, string, error) {
	bp := buffers.Get().(*[]byte)
	raw := t.encode((*bp)[:0], key)
	if len(raw) > t.maxKey {
		// The pooled buffer goes back as it was: one that grew for this
		// key would keep its size in the pool.
		buffers.Put(bp)
		return dst[:0], "", fmt.Errorf("%w: its encoding has %d bytes, more than the %d the store accepts", store.ErrKeyTooLong, len(raw), t.maxKey)
	}
	// The escaped key follows raw in the same buffer.
	esc := escape(raw, raw[len(raw):])
	if len(esc) == 0 {
		// The empty key: a hash tag of its own, "\", which no other key's
		// escaping writes (a '\' it writes is followed by '\' or ')'). An
		// empty tag would make Redis Cluster hash each whole name, putting
		// a key's hash and its sorted sets in different slots.
		esc = append(esc, '\\')
	}
	size := len(tail)
	for _, sfx := range suffixes {
		size += len(t.prefix) + len(esc) + 2 + len(sfx)
	}
	var all strings.Builder
	all.Grow(size)
	for _, sfx := range suffixes {
		all.WriteString(t.prefix)
		all.WriteByte('{')
		all.Write(esc)
		all.WriteByte('}')
		all.WriteString(sfx)
	}
	all.Write(tail)
	if cap(esc) > cap(raw)-len(raw) {
		*bp = esc[:0] // escaping outgrew the buffer: keep the larger one
	} else {
		*bp = raw[:0]
	}
	buffers.Put(bp)
	joined := all.String()
	dst = dst[:0]
	for _, sfx := range suffixes {
		n := len(t.prefix) + len(esc) + 2 + len(sfx)
		dst = append(dst, joined[:n])
		joined = joined[n:]
	}
	return dst, joined, nil
}

// Key returns the first Redis key a decision for key declares: the hash
// holding its state, or for a table of sliding logs alone the first log's
// sorted set (Keys gives them all).
func (t *Table[K]) Key(key K) (string, error) {
	var one [1]string
	keys, _, err := t.keys(one[:0], key, t.declared[:1], nil)
	if err != nil {
		return "", err
	}
	return keys[0], nil
}

// escape appends raw to dst with '\' written `\\` and '}' written `\)`.
func escape(raw, dst []byte) []byte {
	for _, c := range raw {
		switch c {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '}':
			dst = append(dst, '\\', ')')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// Take runs the script for key at now (ignored with the server clock).
func (t *Table[K]) Take(ctx context.Context, key K, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	return t.eval(ctx, key, false, now, cost, out)
}

// Peek runs the script in its read-only mode.
func (t *Table[K]) Peek(ctx context.Context, key K, now int64, out []algorithm.Result) (algorithm.Result, error) {
	return t.eval(ctx, key, true, now, 0, out)
}

// Reset deletes key's state under every limit: the fields of the
// limits' IDs in key's hash (not other IDs'), and their sorted sets.
func (t *Table[K]) Reset(ctx context.Context, key K) error {
	var buf [5]string
	keys, err := t.Keys(buf[:0], key)
	if err != nil {
		return err
	}
	ctx, cancel := t.bounded(ctx)
	defer cancel()
	return t.call(ctx, luascript.Reset, func(ctx context.Context, _ *luascript.Script) error {
		_, err := t.run.Eval(ctx, runScript(luascript.Reset), false, keys, Args{Rest: t.ids, RestAny: t.resetAny}, nil)
		return err
	})
}

// eval runs the script for key with ARGV now (empty with the server
// clock), cost, then the table's own arguments. The time is written in the
// keys' allocation (see keys); a cost below 100, the common one, is a
// string strconv keeps, so a call allocates once before the client's own.
func (t *Table[K]) eval(ctx context.Context, key K, readOnly bool, now, cost int64, out []algorithm.Result) (algorithm.Result, error) {
	if err := t.evicting(); err != nil {
		return algorithm.Result{}, err
	}
	var digits [20]byte
	var tail []byte
	if !t.server {
		tail = strconv.AppendInt(digits[:0], now, 10)
	}
	sc := scratches.Get().(*scratch)
	keys, nowArg, err := t.keys(sc.keys, key, t.declared, tail)
	if err != nil {
		scratches.Put(sc)
		return algorithm.Result{}, err
	}
	if !readOnly && t.lines != nil {
		name := keys[0]
		sh := t.lines.shard(name)
		if req := t.join(ctx, sh, name, keys, 0, now, cost, nil); req != nil {
			sc.release(keys)
			o := t.await(ctx, sh, name, req, out)
			return o.r, o.err
		}
		defer t.settle(sh, name)
	}
	defer sc.release(keys)
	reply, err := t.retry(ctx, t.script, readOnly, keys, t.decisionArgs(nowArg, cost), sc.reply)
	if err != nil {
		return algorithm.Result{}, err
	}
	if cap(reply) <= 1024 {
		sc.reply = reply[:0] // a far larger one is not kept
	}
	return t.result(reply, out)
}

// retry runs s and returns its reply, sent again after a TRYAGAIN
// (which ran nothing), with errors wrapped as the store contract wants
// them (call).
func (t *Table[K]) retry(ctx context.Context, s *luascript.Script, readOnly bool, keys []string, args Args, reply []int64) ([]int64, error) {
	err := t.call(ctx, s, func(ctx context.Context, s *luascript.Script) (err error) {
		reply, err = t.run.Eval(ctx, runScript(s), readOnly, keys, args, reply)
		return err
	})
	return reply, err
}

// tryAgainBackoff are the pauses before each retry of a script that a
// Redis Cluster answered TRYAGAIN: it did not run the script (its keys
// were split by a slot migration in progress), so retrying charges once.
// After the last, the error is returned. They add up to 63 ms.
var tryAgainBackoff = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond,
	8 * time.Millisecond, 16 * time.Millisecond, 32 * time.Millisecond,
}

// isTryAgain reports whether err is a TRYAGAIN reply, as either client
// library returns it: the error's text is the server's.
func isTryAgain(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "TRYAGAIN")
}

// isMismatch reports whether err is a script's refusal of a key's state
// (an error reply starting "RLMISMATCH ", which names the key and what it
// holds) or Redis's WRONGTYPE reply (a key of another type, should a
// command escape the script's checks), as either client library returns
// them: the error's text is the server's.
func isMismatch(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "RLMISMATCH ") || strings.HasPrefix(msg, "WRONGTYPE")
}

// isOOM reports whether err is Redis's OOM reply, as either client
// library returns it ("OOM command not allowed when used memory >
// 'maxmemory'."): a server at its maxmemory under noeviction refused a
// write. On Redis 7.0 a script without flags (ours have none) runs under
// OOM and is refused at its first write, before it has written anything:
// a denial or a peek, which write nothing, still answer.
func isOOM(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "OOM")
}

// result checks a script's reply, {remaining, retry after, reset after}
// per limit, and turns it into Results, combined: a limit admitted the
// cost exactly when its retry after is 0. A reply out of shape (a foreign
// script under the same SHA, a key of another type under this prefix) is
// an error, never a wrong decision.
func (t *Table[K]) result(reply []int64, out []algorithm.Result) (algorithm.Result, error) {
	if len(reply) != 3*len(t.limits) {
		return algorithm.Result{}, fmt.Errorf("%w: %s script replied %d values, want %d", store.ErrUnavailable, t.script.Name, len(reply), 3*len(t.limits))
	}
	rs := out
	if rs == nil {
		var buf [4]algorithm.Result
		rs = buf[:0]
		if len(t.limits) > len(buf) {
			rs = make([]algorithm.Result, 0, len(t.limits))
		}
		rs = rs[:len(t.limits)]
	}
	for i, limit := range t.limits {
		r := algorithm.Result{
			Remaining:  reply[3*i],
			RetryAfter: reply[3*i+1],
			ResetAfter: reply[3*i+2],
		}
		if r.Remaining < 0 || r.Remaining > limit || r.RetryAfter < 0 || r.ResetAfter < 0 {
			return algorithm.Result{}, fmt.Errorf("%w: %s script replied %v, out of range", store.ErrUnavailable, t.script.Name, reply)
		}
		rs[i] = r
	}
	return algorithm.Combine(rs), nil
}
