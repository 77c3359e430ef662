package luascript

//go:generate go test -run TestGenerated -update

import (
	"fmt"
	"strings"
)

// A script is composed in stages, each a function of one limit (a
// limitAt) returning Lua text: load reads the limit's state, decide runs
// its body's first part (fits), report its --@report part (rem, retry,
// reset as the state stands), commit its --@commit part (the charge), and
// store writes the state. The arrangements (oneLimit, nestedLimits,
// closureLimits for a decision; ops.go for the booking scripts) put the
// stages of all the limits in order. docs/design/lua-composition.md
// describes the marks the bodies use and the scripts that result.

// limitAt is one limit of a script being composed: its body, and where
// its arguments and its field are.
type limitAt struct {
	name string
	b    body
	n    int // the limit's number, from 1
	// argv is the ARGV index before the limit's arguments.
	argv int
	// field is the limit's place among those kept in the key's hash,
	// from 1; 0 for a sliding log, which keeps its own sorted set.
	field int
}

// limitsOf places the limits of the named algorithms, in order.
func limitsOf(names []string) []limitAt {
	out := make([]limitAt, len(names))
	argv, field := 3, 0
	for i, name := range names {
		b := bodies[name]
		l := limitAt{name: name, b: b, n: i + 1, argv: argv}
		if !b.log {
			field++
			l.field = field
		}
		out[i] = l
		argv += fixedArgs + b.params
	}
	return out
}

// log reports whether the limit is a sliding log.
func (l limitAt) log() bool { return l.b.log }

// sub returns part with the limit's argument references made ARGV
// indices (substitute).
func (l limitAt) sub(part string) string { return substitute(part, l.argv) }

// storeStyle is how a script writes a limit's state kept in the hash.
type storeStyle int

const (
	storeOne    storeStyle = iota // its own HSET and PEXPIRE (store.lua)
	storeLocals                   // locals hset1…, one HSET at the end (storeNested)
	storeTable                    // the table hset, one HSET at the end (storeMany)
	storeCarry                    // a batch's: the numbers kept, the tail writes
)

// composer holds what the stages of one script share.
type composer struct {
	limits []limitAt
	names  []string
	// hashed is how many of the limits keep their state in the hash;
	// more than one are read with one HMGET (hmget).
	hashed int
	hmget  bool
	batch  bool
	store  storeStyle
	// hoist: in a batch of few limits (a single one, or nested), each
	// body's setup (its parameters, once per batch) goes before the
	// requests' function, into hoisted, in locals named by the limit
	// ("s2_capacity"), which the limit's part in each request takes in
	// its own names. Not for more: the request's function would read them
	// as upvalues, of which Lua allows 60.
	hoist   bool
	hoisted strings.Builder
}

// newComposer returns the composer of a script for limits of the named
// algorithms, a batch's when batch is set, which writes its states in
// the given style.
func newComposer(names []string, batch bool, store storeStyle) *composer {
	c := &composer{limits: limitsOf(names), names: names, batch: batch, store: store}
	c.hashed = len(hashFields(names))
	c.hmget = c.hashed > 1
	c.hoist = batch && len(names) <= nestLimits
	return c
}

// head returns the lines before any limit's: the key's names, usedOf,
// and for several limits in the hash their one HMGET. held declares the
// script's held (load.lua), which a batch sets in its own head.
//
// KEYS holds the keys the script must find on the node it runs on: the
// hash when a limit keeps its state there, then each sliding log's
// sorted set (redistable.Table declares no more, so that a Limiter's
// script has one key, which a Redis Cluster slot migration never answers
// TRYAGAIN). Other names (the hash for a script of logs alone, a sorted
// set where a string-state limit looks for a log on a miss) are derived
// from it. Callers that pass every name (the hash, then one sorted set
// per limit) get the same script.
func (c *composer) head(held bool) string {
	var src strings.Builder
	src.WriteString("local hkey = KEYS[1]\n")
	if held {
		src.WriteString("local held = false\n")
	}
	src.WriteString(usedHead(c.names))
	if c.hashed == 0 {
		// Logs alone: KEYS[1] is the first log's sorted set, the hash's
		// name followed by its ID ("{}" for the empty one).
		fmt.Fprintf(&src, "if #KEYS == %d then\n  hkey = string.sub(hkey, 1, #hkey - (ARGV[%d] == '' and 2 or #ARGV[%d]))\nend\n", len(c.limits), 3+1, 3+1)
	}
	if c.hmget {
		src.WriteString(hmgetLine(hashFields(c.names)))
	}
	return src.String()
}

// batchHead returns a batch's read of every field kept in the hash into
// fcur, once for all its requests, and the refusal of a key that is full.
// Tables indexed by the field's place, not a local per field: the
// request's function reads them as upvalues, of which Lua allows 60.
func (c *composer) batchHead() string {
	var src strings.Builder
	src.WriteString("local fcur, fown, fenc, fcv1, fcv2, fcv3, httl = {}, {}, {}, {}, {}, {}, 0\n")
	for i, a := range hashFields(c.names) {
		if c.hmget {
			fmt.Fprintf(&src, "fcur[%d] = hv.err or hv[%d]\n", i+1, i+1)
		} else {
			fmt.Fprintf(&src, "fcur[%d] = redis.pcall('HGET', hkey, ARGV[%d])\n", i+1, a)
		}
	}
	src.WriteString(heldOf)
	src.WriteString(batchFull(c.hashed))
	return src.String()
}

// load returns the limit's load: a log names its sorted set once
// (zkeyOf); a state kept in the hash is read by load.lua, from the
// script's HMGET when it has one, or, in a batch, from fcur. A limit
// whose state is in the hash looks at its ID's sorted set only on a miss
// or to wipe it, so it names it there ($zkey), and a decision on the
// fast path builds no string for it.
func (c *composer) load(l limitAt) string {
	switch {
	case l.log():
		return l.sub(zkeyOf)
	case c.batch:
		return l.sub(strings.NewReplacer(hgetLine, fmt.Sprintf("local v = fcur[%d]\n", l.field), heldLine, "").Replace(loadHash))
	case c.hmget:
		return l.sub(loadFrom(l.field))
	}
	return l.sub(loadHash)
}

// decide returns the limit's body's first part, which sets fits. In a
// batch, its setup is hoisted (when c.hoist) and its parse takes the
// numbers a request before kept (carry).
func (c *composer) decide(l limitAt) string {
	region, lines := c.hoistSetup(l)
	if !c.batch || l.log() {
		return l.sub(strings.Replace(l.b.decide, region, lines, 1))
	}
	k := l.b.carry
	parse := fmt.Sprintf("if fown[%d] then\n  %s = %s\nelse\n%send\n", l.field, strings.Join(k.parseVars, ", "), carried(l.field, len(k.parseVars)), k.parse)
	return l.sub(strings.Replace(k.beforeParse, region, lines, 1) + parse + k.afterParse)
}

// hoistSetup returns the lines of the limit's decide part that stand for
// its setup and what replaces them: the region itself, taken from the
// values set once in hoisted, when hoisting; else "", "".
func (c *composer) hoistSetup(l limitAt) (region, lines string) {
	su := l.b.setup
	if su == nil || !c.hoist {
		return "", ""
	}
	own := make([]string, len(su.vars))
	for i, v := range su.vars {
		own[i] = fmt.Sprintf("s%d_%s", l.n, v)
	}
	vars, owns := strings.Join(su.vars, ", "), strings.Join(own, ", ")
	fmt.Fprintf(&c.hoisted, "local %s\ndo\n%s%s = %s\nend\n", owns, l.sub(su.text), owns, vars)
	return su.region, fmt.Sprintf("local %s = %s\n", vars, owns)
}

// report returns the limit's --@report part: rem, retry and reset for
// the state as it stands.
func (c *composer) report(l limitAt) string { return l.sub(l.b.report) }

// commit returns the limit's --@commit part, which charges the cost and
// sets value and ttl (in a batch, up to its encode region), then its
// store.
func (c *composer) commit(l limitAt) string {
	part := l.b.commit
	if c.batch && !l.log() {
		part = l.b.carry.beforeEncode
	}
	return l.sub(part + c.storeOf(l))
}

// storeOf returns the write of a limit's state kept in the hash, after
// wipeFirst, in the composer's style: store.lua for one limit; the
// field joining the script's one HSET (storeNested, storeMany) for
// several; in a batch, the state's numbers kept for the next request and
// the tail (carry). A sliding log writes its own sorted set in its
// commit part.
func (c *composer) storeOf(l limitAt) string {
	if l.log() {
		return ""
	}
	switch c.store {
	case storeCarry:
		k := l.b.carry
		var keep strings.Builder
		vars := strings.Join(k.encodeVars, ", ")
		fmt.Fprintf(&keep, "fown[%d] = true\n%s = %s\n", l.field, carried(l.field, len(k.encodeVars)), vars)
		fmt.Fprintf(&keep, "if not fenc[%d] then\n  fenc[%d] = function(%s)\n%s\nreturn value\nend\nend\n", l.field, l.field, vars, k.encode)
		fmt.Fprintf(&keep, "fcur[%d] = ARGV[$hdr]\nif ttl > httl then\n  httl = ttl\nend\n", l.field)
		return wipeFirst + keep.String()
	case storeLocals:
		return wipeFirst + fmt.Sprintf(storeNested, 2*l.field-1, 2*l.field)
	case storeTable:
		return wipeFirst + storeMany
	}
	return wipeFirst + storeHash
}

// reply returns where the k-th number of a decision's reply goes: a
// batch writes it into the batch's replies, from index roff + 1 (no
// table per request); a nested decision keeps it in a local (out1…);
// others fill out.
func (c *composer) reply(k int) string {
	switch {
	case c.batch:
		return fmt.Sprintf("replies[roff + %d]", k)
	case c.store == storeLocals:
		return fmt.Sprintf("out%d", k)
	}
	return fmt.Sprintf("out[%d]", k)
}

// replyOf returns the three places of the i-th limit's reply (from 0).
func (c *composer) replyOf(i int) string {
	return fmt.Sprintf("%s, %s, %s", c.reply(3*i+1), c.reply(3*i+2), c.reply(3*i+3))
}

// composeParts writes the parts of a script deciding for limits of the
// named algorithms: head, which names the keys (and, in a batch, reads
// the limits' fields of the hash once); limits, which decides one request
// and returns its reply; and, in a batch, tail, which writes the fields
// the batch's requests changed (batch.lua puts a batch together).
//
// The decision script (batch false) reads each field in its load and
// writes it in its store. In a batch, the head reads the fields of all
// the limits kept in the hash into a Lua table (fcur, by the field's
// place), each load reads its place there instead of Redis, and each store
// keeps the state's numbers (carry) after removing what must go first, as
// a single store does; the tail encodes and writes every field that was
// set with one HSET, and the key's TTL once, the longest any request asked
// for. A sliding log's commands go to Redis as they come: its state is a
// sorted set of its own.
func composeParts(names []string, batch bool) (head, limits, tail string) {
	style := storeTable
	switch {
	case batch:
		style = storeCarry
	case len(names) == 1:
		style = storeOne
	case len(names) <= nestLimits:
		style = storeLocals
	}
	c := newComposer(names, batch, style)
	head = c.head(!batch)
	if batch {
		head += c.batchHead()
	}
	switch {
	case len(names) == 1:
		limits = c.oneLimit()
	case len(names) <= nestLimits:
		limits = c.nestedLimits()
	default:
		limits = c.closureLimits()
	}
	if !batch {
		return head, limits, ""
	}
	return head + c.hoisted.String(), limits, c.batchTail()
}

// oneLimit returns the decision of one limit: its stages inline, with no
// closure to allocate.
func (c *composer) oneLimit() string {
	var src strings.Builder
	l := c.limits[0]
	if c.batch && c.hashed > 0 {
		src.WriteString(fullReply)
	}
	src.WriteString(c.load(l) + c.decide(l))
	if !c.batch {
		src.WriteString(tooMany(c.hashed, "not peek"))
	}
	src.WriteString("if peek or not fits then\n")
	src.WriteString(c.report(l))
	if c.batch {
		fmt.Fprintf(&src, "%s = rem, retry, reset\nreturn\nend\n", c.replyOf(0))
		src.WriteString(c.commit(l))
		fmt.Fprintf(&src, "%s = rem, 0, reset\n", c.replyOf(0))
	} else {
		src.WriteString("return {rem, retry, reset}\nend\n")
		src.WriteString(c.commit(l))
		src.WriteString("return {rem, 0, reset}\n")
	}
	return src.String()
}

// nestedLimits returns the decision of a few limits: every limit's load
// and decide in a block of its own, each block inside the one before, so
// that in the innermost every limit's locals are in scope (a later
// limit's hiding an earlier one's of the same name only until its block
// ends) and it is known whether all admit. Each block then ends with its
// limit's report or commit, the innermost first: no closure to allocate
// per limit, where closureLimits' cost a request one each and one upvalue
// per local they capture.
//
// A decision script keeps its reply's numbers and its HSET's arguments
// in locals (out1…, hset1…), and makes its reply's table once, at its
// end: no table for the HSET, and none filled slot by slot, the
// innermost limit's first (an empty Lua table filled from a later index
// on keeps those entries in its hash part, to be rehashed as the earlier
// ones come). About 0.5 Redis µs of a bucket + window Policy's 10.5
// (redis-benchmark). (A batch's replies grow in powers of two, so a
// request's slots are mostly in its array part already.)
func (c *composer) nestedLimits() string {
	var src strings.Builder
	src.WriteString("local all = true\n")
	if c.batch && c.hashed > 0 {
		src.WriteString(fullReply)
	}
	if !c.batch {
		fmt.Fprintf(&src, "local httl = 0\nlocal %s\n", numbered("out", 3*len(c.limits)))
		if c.hashed > 0 {
			fmt.Fprintf(&src, "local %s\n", numbered("hset", 2*c.hashed))
		}
	}
	ends := make([]string, len(c.limits))
	for i, l := range c.limits {
		fmt.Fprintf(&src, "do\n-- limit %d: %s\n", l.n, l.name)
		src.WriteString(c.load(l) + c.decide(l))
		src.WriteString("all = all and fits\n")
		ends[i] = "if peek or not all then\n" + c.report(l) +
			fmt.Sprintf("%s = rem, retry, reset\nelse\n", c.replyOf(i)) +
			c.commit(l) + fmt.Sprintf("%s = rem, 0, reset\nend\nend\n", c.replyOf(i))
	}
	if !c.batch {
		src.WriteString(tooMany(c.hashed, "not peek"))
	}
	for i := len(ends) - 1; i >= 0; i-- {
		src.WriteString(ends[i])
	}
	if !c.batch {
		if c.hashed > 0 {
			fmt.Fprintf(&src, hsetNested, numbered("hset", 2*c.hashed))
		}
		fmt.Fprintf(&src, "return {%s}\n", numbered("out", 3*len(c.limits)))
	}
	return src.String()
}

// closureLimits returns the decision of many limits: every limit's load
// and decide, each in a block of its own that leaves its report and
// commit behind as one closure (decided(true) commits, decided(false)
// reports: one closure to allocate per limit, not two); then either
// every report or every commit. The closures are a local each, or, past
// localLimits limits, in tables: Lua allows a function 200 locals, and a
// Policy may have more limits than that.
func (c *composer) closureLimits() string {
	var src strings.Builder
	tables := len(c.limits) > localLimits
	decided := func(n int) string {
		if tables {
			return fmt.Sprintf("decided[%d]", n)
		}
		return fmt.Sprintf("decided%d", n)
	}
	src.WriteString("local all = true\n")
	if c.batch && c.hashed > 0 {
		src.WriteString(fullReply)
	}
	if tables {
		src.WriteString("local decided = {}\n")
	}
	if !c.batch {
		src.WriteString("local hset, httl = {}, 0\n")
	}
	for _, l := range c.limits {
		if !tables {
			fmt.Fprintf(&src, "local decided%d\n", l.n)
		}
		fmt.Fprintf(&src, "do\n-- limit %d: %s\n", l.n, l.name)
		src.WriteString(c.load(l) + c.decide(l))
		fmt.Fprintf(&src, "all = all and fits\n%s = function(charge)\nif not charge then\n", decided(l.n))
		src.WriteString(c.report(l))
		src.WriteString("return rem, retry, reset\nend\n")
		src.WriteString(c.commit(l))
		src.WriteString("return rem, 0, reset\nend\nend\n")
	}
	ret := "return out\n"
	if c.batch {
		ret = "return\n"
	} else {
		src.WriteString(tooMany(c.hashed, "not peek"))
		src.WriteString("local out = {}\n")
	}
	src.WriteString("if peek or not all then\n")
	for i, l := range c.limits {
		fmt.Fprintf(&src, "%s = %s(false)\n", c.replyOf(i), decided(l.n))
	}
	src.WriteString(ret + "end\n")
	for i, l := range c.limits {
		fmt.Fprintf(&src, "%s = %s(true)\n", c.replyOf(i), decided(l.n))
	}
	if !c.batch {
		src.WriteString(hsetMany)
		src.WriteString(ret)
	}
	return src.String()
}

// batchTail returns a batch's store: every field a request set, encoded
// once from the numbers kept, written with one HSET, and the key's TTL
// once, the longest any request asked for.
func (c *composer) batchTail() string {
	var src strings.Builder
	src.WriteString("local hset = {}\n")
	for _, l := range c.limits {
		if l.log() {
			continue
		}
		a, f := l.argv+1, l.field
		fmt.Fprintf(&src, "if fown[%d] then\n  hset[#hset + 1] = ARGV[%d]\n", f, a)
		fmt.Fprintf(&src, "  hset[#hset + 1] = ARGV[%d] .. fenc[%d](%s)\nend\n", a+1, f, carried(f, len(l.b.carry.encodeVars)))
	}
	if c.hashed > 0 {
		src.WriteString("local margin = tonumber(ARGV[3])\n")
		src.WriteString(hsetMany)
	}
	return src.String()
}
