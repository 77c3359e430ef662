package redisstore

// TakeAll: several keys, each under its own table's limits, decided by
// one script call per server.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/store"
)

// Sharded is implemented by Runners whose client sends each call to the
// server that holds its keys' hash tag, so that keys of different tags
// may live on different servers: a Redis Cluster client, a go-redis Ring.
// Found by type assertion; a Runner that is not one is taken to reach
// one server (or a primary and its replicas), where any keys go in one
// call.
type Sharded interface {
	// Sharded reports whether the client spreads keys over servers.
	Sharded() bool
}

var _ store.Multi[string] = (*Table[string])(nil)

// multiPart is one request of a TakeAll on its way to a script: its
// table, its declared keys, its state names (for ErrSameState), and its
// hash tag (the node it goes to on a sharded Redis).
type multiPart[K comparable] struct {
	t      *Table[K]
	keys   []string // the declared keys
	states []string // one per limit: the key's name and the limit's ID
	now    string
	tag    string
}

// TakeAll decides reqs together (store.Multi). On one Redis (a Runner
// that is not Sharded, or requests whose keys share one hash tag) they
// go in one script call (luascript.Multi), atomically all-or-none. On a
// Cluster or Ring the requests go in one call per hash tag, in order of
// first appearance, sent at once: first a dry run of the script on every
// node, which charges nothing and answers a denial exactly, then, when
// every node would admit, the decisions. Should a node deny then (another
// process changed its keys between the two), what the other nodes charged
// is given back (Refund). A request whose state another algorithm or
// format wrote (after a change of limits) makes the call of its node fall
// back to one call per request, giving back on a denial (store.TakeEach),
// once: the admissions it makes convert the states.
func (t *Table[K]) TakeAll(ctx context.Context, reqs []store.Request[K]) (bool, error) {
	if len(reqs) == 0 {
		return true, nil
	}
	if err := t.evicting(); err != nil {
		return false, err
	}
	parts := make([]multiPart[K], len(reqs))
	for i := range reqs {
		p, err := t.part(&reqs[i])
		if err != nil {
			return false, &store.RequestError{Index: i, Err: err}
		}
		parts[i] = p
	}
	if err := sameStates(parts); err != nil {
		return false, err
	}
	sharded := false
	if s, ok := t.run.(Sharded); ok {
		sharded = s.Sharded()
	}
	if !sharded {
		return t.takeNode(ctx, reqs, parts, false)
	}
	// One call per hash tag, in order of first appearance.
	var order []string
	byTag := map[string][]int{}
	for i, p := range parts {
		if _, ok := byTag[p.tag]; !ok {
			order = append(order, p.tag)
		}
		byTag[p.tag] = append(byTag[p.tag], i)
	}
	if len(order) == 1 {
		return t.takeNode(ctx, reqs, parts, false)
	}
	nodes := make([][]int, len(order))
	for n, tag := range order {
		nodes[n] = byTag[tag]
	}
	// A dry run on every node first, all at once: a denial charges
	// nothing anywhere, and every request reports what a denial does.
	if ok, err := t.eachNode(ctx, reqs, parts, nodes, true); err != nil || !ok {
		return false, err
	}
	ok, err := t.eachNode(ctx, reqs, parts, nodes, false)
	if err == nil && ok {
		return true, nil
	}
	// Another request changed a key between the two runs: give back what
	// the nodes that admitted charged.
	errs := []error{err}
	for _, idx := range nodes {
		if allowed(reqs, idx) {
			errs = append(errs, refundAll(ctx, reqs, idx))
		}
	}
	return false, errors.Join(errs...)
}

// allowed reports whether every request of idx was admitted.
func allowed[K comparable](reqs []store.Request[K], idx []int) bool {
	for _, i := range idx {
		if !reqs[i].Result.Allowed() {
			return false
		}
	}
	return true
}

// eachNode runs takeSome on every node at once, and reports whether all
// admitted (a dry run's, whether all would).
func (t *Table[K]) eachNode(ctx context.Context, reqs []store.Request[K], parts []multiPart[K], nodes [][]int, dry bool) (bool, error) {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for n, idx := range nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[n+1] = t.takeSome(ctx, reqs, parts, idx, dry)
		}()
	}
	_, errs[0] = t.takeSome(ctx, reqs, parts, nodes[0], dry)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	for _, idx := range nodes {
		if !allowed(reqs, idx) {
			return false, nil
		}
	}
	return true, nil
}

// takeSome is takeNode for the requests of reqs at idx, which live on one
// node: their Results are set in reqs, and an error of one names its
// index in reqs.
func (t *Table[K]) takeSome(ctx context.Context, reqs []store.Request[K], parts []multiPart[K], idx []int, dry bool) (bool, error) {
	sub := make([]store.Request[K], len(idx))
	subParts := make([]multiPart[K], len(idx))
	for j, i := range idx {
		sub[j], subParts[j] = reqs[i], parts[i]
	}
	ok, err := t.takeNode(ctx, sub, subParts, dry)
	for j, i := range idx {
		reqs[i].Result = sub[j].Result
	}
	var rerr *store.RequestError
	if errors.As(err, &rerr) && rerr.Index < len(idx) {
		rerr.Index = idx[rerr.Index]
	}
	return ok, err
}

// refundAll gives back what the requests of idx were charged.
func refundAll[K comparable](ctx context.Context, reqs []store.Request[K], idx []int) error {
	var errs []error
	for _, i := range idx {
		rq := &reqs[i]
		if _, err := rq.Table.(*Table[K]).Refund(ctx, rq.Key, rq.Now, rq.Cost, nil); err != nil {
			errs = append(errs, &store.RequestError{Index: i, Err: err})
		}
	}
	return errors.Join(errs...)
}

// part checks a request and makes its keys.
func (t *Table[K]) part(rq *store.Request[K]) (multiPart[K], error) {
	rt, ok := rq.Table.(*Table[K])
	if !ok || rt.home == nil || rt.home != t.home {
		return multiPart[K]{}, fmt.Errorf("%w: %T", store.ErrForeignTable, rq.Table)
	}
	if err := algorithm.CheckCost(rq.Cost, slicesMin(rt.limits)); err != nil {
		return multiPart[K]{}, err
	}
	var digits [20]byte
	var tail []byte
	if !rt.server {
		tail = strconv.AppendInt(digits[:0], rq.Now, 10)
	}
	all, now, err := rt.keys(make([]string, 0, len(rt.suffixes)), rq.Key, rt.suffixes, tail)
	if err != nil {
		return multiPart[K]{}, err
	}
	p := multiPart[K]{t: rt, now: now, states: all[1:], keys: make([]string, len(rt.declaredAt))}
	for j, k := range rt.declaredAt {
		p.keys[j] = all[k]
	}
	// The hash tag: the name up to its closing brace (the escaping leaves
	// none inside it).
	h := all[0]
	p.tag = h[:len(h)-len(rt.suffixes[0])]
	return p, nil
}

// slicesMin is the least of limits, which is never empty.
func slicesMin(limits []int64) int64 {
	m := limits[0]
	for _, l := range limits[1:] {
		m = min(m, l)
	}
	return m
}

// sameStates returns an error wrapping store.ErrSameState when two parts
// name one state.
func sameStates[K comparable](parts []multiPart[K]) error {
	seen := make(map[string]int, len(parts))
	for i, p := range parts {
		for _, s := range p.states {
			if j, ok := seen[s]; ok && j != i {
				return fmt.Errorf("%w: requests %d and %d (%q)", store.ErrSameState, j, i, s)
			}
			seen[s] = i
		}
	}
	return nil
}

// takeNode decides reqs, whose keys live on one server, with one multi
// script call; or, when they are too many for one script, or a state
// needs converting, one call per request (store.TakeEach). A dry run
// charges nothing and sets what a denial reports.
func (t *Table[K]) takeNode(ctx context.Context, reqs []store.Request[K], parts []multiPart[K], dry bool) (bool, error) {
	if len(reqs) == 1 && !dry {
		// A request alone is its table's own decision.
		p := parts[0]
		rq := &reqs[0]
		reply, err := p.t.retry(ctx, p.t.script, false, p.keys, p.t.decisionArgs(p.now, rq.Cost), nil)
		if err != nil {
			return false, &store.RequestError{Index: 0, Err: err}
		}
		if rq.Result, err = p.t.result(reply, rq.Out); err != nil {
			return false, &store.RequestError{Index: 0, Err: err}
		}
		return rq.Result.Allowed(), nil
	}
	groups := make([]*luascript.Script, len(parts))
	for i, p := range parts {
		groups[i] = p.t.script
	}
	s, ok := luascript.Multi(groups...)
	if !ok {
		return t.takeEach(ctx, reqs, dry)
	}
	var keys []string
	count := len(parts)
	if dry {
		count = -count
	}
	args := []string{strconv.Itoa(count)}
	for i, p := range parts {
		keys = append(keys, p.keys...)
		args = append(args, strconv.Itoa(2+len(p.t.rest)), strconv.Itoa(len(p.keys)), p.now, strconv.FormatInt(reqs[i].Cost, 10))
		args = append(args, p.t.rest...)
	}
	var reply []int64
	var raw error // the runner's error, before call wraps it
	err := t.call(ctx, s, func(ctx context.Context, s *luascript.Script) error {
		reply, raw = t.run.Eval(ctx, runScript(s), false, keys, Args{Batch: args}, nil)
		return raw
	})
	if _, conv := luascript.Conversion(raw); conv && err != nil {
		return t.takeEach(ctx, reqs, dry)
	}
	if err != nil {
		return false, err
	}
	all := true
	for i, p := range parts {
		n := 3 * len(p.t.limits)
		if len(reply) < n {
			return false, fmt.Errorf("%w: %s script replied too few values", store.ErrUnavailable, s.Name)
		}
		r, err := p.t.result(reply[:n], reqs[i].Out)
		if err != nil {
			return false, err
		}
		reqs[i].Result = r
		all = all && r.Allowed()
		reply = reply[n:]
	}
	if len(reply) != 0 {
		return false, fmt.Errorf("%w: %s script replied too many values", store.ErrUnavailable, s.Name)
	}
	return all && !dry, nil
}

// takeEach is takeNode one request at a time (store.TakeEach); a dry run
// reports each request's Peek, for a cost of 1.
func (t *Table[K]) takeEach(ctx context.Context, reqs []store.Request[K], dry bool) (bool, error) {
	if !dry {
		return store.TakeEach(ctx, reqs)
	}
	var errs []error
	for i := range reqs {
		rq := &reqs[i]
		r, err := rq.Table.Peek(ctx, rq.Key, rq.Now, rq.Out)
		if err != nil {
			errs = append(errs, &store.RequestError{Index: i, Err: err})
		}
		rq.Result = r
	}
	return false, errors.Join(errs...)
}
