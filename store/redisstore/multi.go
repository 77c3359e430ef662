package redisstore

// TakeAll: several keys, each under its own table's limits, decided by
// one script call per server.

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	now    string   // the request's instant as its decision script takes it: "" for the server's clock
	at     int64    // the request's instant in µs (its Now), unless now is ""
	tag    string
}

// TakeAll decides reqs together (store.Multi). On one Redis (a Runner
// that is not Sharded, or requests whose keys share one hash tag) they
// go in one script call (luascript.MultiKinds), atomically all-or-none,
// with other TakeAlls' when calls are in flight (WithGroupCommit). On a
// Cluster or Ring the requests go in one call per hash tag, in order of
// first appearance, sent at once. One request per node (the common case)
// is booked at its instant (Book, admitting what Take would), and when one
// is denied the others' bookings are undone (Undo: exact while no other
// request changed their keys) and report what a denial does by a dry run;
// otherwise a dry run of the script on every node comes first, which
// charges nothing and answers a denial exactly, then, when every node
// would admit, the decisions. Should a node deny then (another
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
	if !t.sharded() {
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
	if bookable(reqs, nodes) {
		return t.bookNodes(ctx, reqs, parts, nodes)
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

// bookable reports whether every node has one request, of a table that
// books (the common case: a request's keys in different slots).
func bookable[K comparable](reqs []store.Request[K], nodes [][]int) bool {
	for _, idx := range nodes {
		if len(idx) != 1 || reqs[idx[0]].Table.(*Table[K]).ops[luascript.OpBook] == nil {
			return false
		}
	}
	return true
}

// bookNodes decides requests of one per node by booking each at its
// instant (Book with no delay: what Take admits), all at once: one call
// per node when all admit. When one is denied, the bookings made are
// undone, exactly while no other request changed their keys (Undo), and
// their requests report what a denial does by a dry run.
func (t *Table[K]) bookNodes(ctx context.Context, reqs []store.Request[K], parts []multiPart[K], nodes [][]int) (bool, error) {
	books := make([]store.Booking, len(reqs))
	booked := make([]bool, len(reqs))
	errs := make([]error, len(reqs))
	book := func(i int) {
		rq := &reqs[i]
		var err error
		rq.Result, books[i], booked[i], err = rq.Table.(*Table[K]).Book(ctx, rq.Key, rq.Now, rq.Cost, 0, rq.Out)
		if err != nil {
			errs[i] = &store.RequestError{Index: i, Err: err}
		}
	}
	var wg sync.WaitGroup
	for _, idx := range nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			book(idx[0])
		}()
	}
	book(nodes[0][0])
	wg.Wait()
	err := errors.Join(errs...)
	all := err == nil
	for i := range reqs {
		all = all && booked[i]
	}
	if all {
		return true, nil
	}
	for i := range reqs {
		if !booked[i] {
			continue
		}
		rq := &reqs[i]
		if _, uerr := rq.Table.(*Table[K]).Undo(ctx, rq.Key, rq.Now, books[i]); uerr != nil {
			errs = append(errs, &store.RequestError{Index: i, Err: uerr})
			continue
		}
		if err == nil {
			_, derr := t.takeSome(ctx, reqs, parts, []int{i}, true)
			errs = append(errs, derr)
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

// sharded reports whether the table's Runner spreads keys over servers.
func (t *Table[K]) sharded() bool {
	s, ok := t.run.(Sharded)
	return ok && s.Sharded()
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
	p := multiPart[K]{t: rt, now: now, at: rq.Now, states: all[1:]}
	if len(rt.declaredAt) == 1 && rt.declaredAt[0] == 0 {
		p.keys = all[:1] // the hash alone, the common case
	} else {
		p.keys = make([]string, len(rt.declaredAt))
		for j, k := range rt.declaredAt {
			p.keys[j] = all[k]
		}
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
// name one state. Few parts (a request's descriptors) are compared in
// pairs, more through a map.
func sameStates[K comparable](parts []multiPart[K]) error {
	same := func(i, j int, s string) error {
		return fmt.Errorf("%w: requests %d and %d (%q)", store.ErrSameState, j, i, s)
	}
	if len(parts) <= 8 {
		for i, p := range parts {
			for j := range i {
				for _, s := range p.states {
					if slices.Contains(parts[j].states, s) {
						return same(i, j, s)
					}
				}
			}
		}
		return nil
	}
	seen := make(map[string]int, len(parts))
	for i, p := range parts {
		for _, s := range p.states {
			if j, ok := seen[s]; ok && j != i {
				return same(i, j, s)
			}
			seen[s] = i
		}
	}
	return nil
}

// takeNode decides reqs, whose keys live on one server, as one unit of a
// multi script call: through the store's group commit when it is not a
// dry run; or, when they cannot go in a multi script, or a state needs
// converting, one call per request (store.TakeEach). A dry run charges
// nothing and sets what a denial reports.
func (t *Table[K]) takeNode(ctx context.Context, reqs []store.Request[K], parts []multiPart[K], dry bool) (bool, error) {
	if len(reqs) == 1 && !dry && (t.commit == nil || t.sharded()) {
		// A request alone, with no batch to join: its table's own script,
		// whose Lua is the least (and which converts a state by itself).
		p, rq := &parts[0], &reqs[0]
		reply, err := p.t.retry(ctx, p.t.script, false, p.keys, p.t.decisionArgs(p.now, rq.Cost), nil)
		if err != nil {
			return false, &store.RequestError{Index: 0, Err: err}
		}
		if rq.Result, err = p.t.result(reply, rq.Out); err != nil {
			return false, &store.RequestError{Index: 0, Err: err}
		}
		return rq.Result.Allowed(), nil
	}
	u := &unit[K]{reqs: reqs, parts: parts}
	if !t.fitsMulti(u) {
		return t.takeEach(ctx, reqs, dry)
	}
	if dry || t.commit == nil || t.sharded() {
		// A cluster's units go alone: each batch's keys must share a slot.
		u.err = t.sendUnits(ctx, []*unit[K]{u}, dry)
	} else {
		t.commit.do(ctx, t, u)
	}
	switch {
	case u.err != nil:
		return false, u.err
	case u.code == codeConvert:
		return t.takeEach(ctx, reqs, dry)
	case u.code == codeTooMany:
		return false, fmt.Errorf("%w: a key of the request holds the most states a key keeps (%d)", store.ErrTooManyStates, store.MaxStatesPerKey)
	}
	return u.code == codeAdmitted, nil
}

// The codes of a unit in a multi script's reply (luascript.MultiKinds).
const (
	codeAdmitted = 1
	codeDenied   = 0
	codeConvert  = -1
	codeTooMany  = -2
)

// unit is one TakeAll's requests on their way to a multi script, with
// what the script said of them.
type unit[K comparable] struct {
	reqs  []store.Request[K]
	parts []multiPart[K]
	code  int64
	err   error
	done  chan struct{} // closed when code and err are set, for a unit queued
}

// fitsMulti reports whether u can go in a multi script.
func (t *Table[K]) fitsMulti(u *unit[K]) bool {
	if len(u.parts) > luascript.MaxGroups {
		return false
	}
	var gbuf [8]*luascript.Script
	var kbuf [8]int
	groups := gbuf[:0]
	for _, p := range u.parts {
		groups = append(groups, p.t.script)
	}
	_, _, ok := luascript.MultiKindsTo(kbuf[:0], groups...)
	return ok
}

// sendUnits runs units in one multi script call (a dry run when dry), and sets
// each unit's code and its requests' Results. An error of the call is
// returned, for every unit.
func (t *Table[K]) sendUnits(ctx context.Context, units []*unit[K], dry bool) error {
	var gbuf [8]*luascript.Script
	var kbuf [8]int
	groups := gbuf[:0]
	for _, u := range units {
		for _, p := range u.parts {
			groups = append(groups, p.t.script)
		}
	}
	s, kinds, ok := luascript.MultiKindsTo(kbuf[:0], groups...)
	if !ok {
		return fmt.Errorf("%w: a request's limits cannot go in a multi script", store.ErrAlgorithmUnsupported)
	}
	keys, args := multiArgs(units, kinds, dry)
	var reply []int64
	err := t.call(ctx, s, func(ctx context.Context, s *luascript.Script) (err error) {
		reply, err = t.run.Eval(ctx, runScript(s), false, keys, Args{Batch: args}, nil)
		return err
	})
	if err != nil {
		return err
	}
	for _, u := range units {
		if len(reply) == 0 {
			return fmt.Errorf("%w: %s script replied too few values", store.ErrUnavailable, s.Name)
		}
		u.code, reply = reply[0], reply[1:]
		switch u.code {
		case codeConvert, codeTooMany:
			continue
		case codeAdmitted, codeDenied:
		default:
			return fmt.Errorf("%w: %s script replied code %d", store.ErrUnavailable, s.Name, u.code)
		}
		for i, p := range u.parts {
			m := 3 * len(p.t.limits)
			if len(reply) < m {
				return fmt.Errorf("%w: %s script replied too few values", store.ErrUnavailable, s.Name)
			}
			r, err := p.t.result(reply[:m], u.reqs[i].Out)
			if err != nil {
				return err
			}
			u.reqs[i].Result = r
			reply = reply[m:]
		}
	}
	if len(reply) != 0 {
		return fmt.Errorf("%w: %s script replied too many values", store.ErrUnavailable, s.Name)
	}
	return nil
}

// multiArgs returns the KEYS and ARGV of a multi script call deciding
// units (a dry run when dry), whose groups are of kinds, in order
// (luascript.MultiKinds). Each table's tail of arguments (the TTL margin,
// its limits') goes once, however many groups of the call it has; a
// group names where, as the script's r (its ARGV[i] for i >= 3 is
// ARGV[r + i]), in its shape, with its key count and cost. Instants go as offsets from the first
// group's, which the script converts faster than whole ones.
func multiArgs[K comparable](units []*unit[K], kinds []int, dry bool) (keys, args []string) {
	var tbuf [8]*Table[K]
	var abuf [8]int
	tables, at := tbuf[:0], abuf[:0]
	nkeys, nargs, shared := 0, 3+len(units), 0
	var base int64
	based := false
	for _, u := range units {
		for _, p := range u.parts {
			nkeys += len(p.keys)
			nargs += 2
			if !slices.Contains(tables, p.t) {
				tables = append(tables, p.t)
				at = append(at, 1+shared) // from ARGV[4 + shared]: r = 1 + shared
				shared += len(p.t.rest)
			}
			if !based && p.now != "" {
				base, based = p.at, true
			}
		}
	}
	n := len(units)
	if dry {
		n = -n
	}
	keys = make([]string, 0, nkeys)
	args = make([]string, 0, nargs+shared)
	args = append(args, strconv.Itoa(n), strconv.Itoa(shared), strconv.FormatInt(base, 10))
	for _, tb := range tables {
		args = append(args, tb.rest...)
	}
	// The groups' shapes and offsets are written into one buffer, sized
	// for the common case (a shape of 7 bytes, an offset of at most 7), and
	// cut from one string, rather than a string allocated for each.
	groups := (nargs - 3 - len(units)) / 2
	text := make([]byte, 0, 14*groups)
	ends := make([]int, 0, 2*groups) // where each shape and offset ends
	g := 0
	for _, u := range units {
		for i, p := range u.parts {
			text = strconv.AppendInt(text, int64(kinds[g]), 10)
			text = append(text, ' ')
			text = strconv.AppendInt(text, int64(at[slices.Index(tables, p.t)]), 10)
			text = append(text, ' ')
			text = strconv.AppendInt(text, int64(len(p.keys)), 10)
			text = append(text, ' ')
			text = strconv.AppendInt(text, u.reqs[i].Cost, 10)
			ends = append(ends, len(text))
			if p.now != "" {
				text = strconv.AppendInt(text, p.at-base, 10)
			}
			ends = append(ends, len(text))
			g++
		}
	}
	all, e, from := string(text), 0, 0
	cut := func() string {
		s := all[from:ends[e]]
		from, e = ends[e], e+1
		return s
	}
	for _, u := range units {
		args = append(args, strconv.Itoa(len(u.parts)))
		for _, p := range u.parts {
			keys = append(keys, p.keys...)
			shape := cut()
			args = append(args, shape, cut())
		}
	}
	return keys, args
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
