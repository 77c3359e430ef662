package luascript

//go:generate go test -run TestGenerated -update

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-ratelimit/ratelimit/store"
)

// A script is composed in stages, each a function of one limit (a
// limitAt) returning Lua text: load reads the limit's state, decide runs
// its body's first part (fits), report its --@report part (rem, retry,
// reset as the state stands), commit its --@commit part (the charge), and
// store writes the state. The arrangements (oneLimit, nestedLimits,
// closureLimits for a decision; ops.go for the booking scripts) put the
// stages of all the limits in order. Each stage has a plain form and a
// conversion one (composer.convert). docs/design/lua-composition.md
// describes the marks the bodies use and the scripts that result.

// limitAt is one limit of a script being composed: its body, and where
// its arguments and its field are.
type limitAt struct {
	name string
	k    *kindBody
	b    body // the variant the script runs
	n    int  // the limit's number, from 1
	// argv is the ARGV index before the limit's arguments.
	argv int
	// field is the limit's place among those kept in the key's hash,
	// from 1; 0 for a Kind that keeps its own sorted set.
	field int
}

// limitsOf places the limits of the named algorithms, in order, in the
// variant of their bodies for convert.
func limitsOf(names []string, convert bool) []limitAt {
	out := make([]limitAt, len(names))
	argv, field := 3, 0
	for i, name := range names {
		k, err := bodyNamed(name)
		if err != nil {
			panic("luascript: " + err.Error()) // checked by For and ForOp
		}
		l := limitAt{name: name, k: k, b: k.of(convert), n: i + 1, argv: argv}
		if !k.log {
			field++
			l.field = field
		}
		out[i] = l
		argv += fixedArgs + k.params
	}
	return out
}

// log reports whether the limit keeps its state in a sorted set.
func (l limitAt) log() bool { return l.k.log }

// sub returns part with the limit's argument references made ARGV
// indices (substitute).
func (l limitAt) sub(part string) string { return substitute(part, l.argv) }

// storeStyle is how a script writes a limit's state kept in the hash.
type storeStyle int

const (
	storeOne    storeStyle = iota // its own HSET and PEXPIRE (hash.lua)
	storeLocals                   // locals hset1…, one HSET at the end (storeNested)
	storeTable                    // the table hset, one HSET at the end (storeMany)
	storeCarry                    // a batch's: the numbers kept, the tail writes
)

// localLimits is the most limits whose closures a script keeps in a
// local each (2 per limit for a decision, 6 for a booking script); past
// it, they go in tables, one lookup slower, within Lua's 200 locals.
const localLimits = 24

// nestLimits is the most limits whose parts a script nests (composeParts)
// rather than leaving closures behind: nested, every limit's locals stay
// live until the innermost block, and Lua allows a function 200 locals
// and 250 registers, which 4 of the largest bodies stay well within.
const nestLimits = 4

// composer holds what the stages of one script share.
type composer struct {
	limits []limitAt
	names  []string
	// convert: the conversion form, reading the states of the kinds
	// letters names besides the limits' own.
	convert bool
	letters string
	// modes: each limit's mode (Modes), in a conversion script.
	modes string
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
	// take is the Lua condition under which the script may add a field
	// to the key's hash, which must have room: a decision's "not peek", a
	// booking's "true"; "false" for the operations that only give back.
	take string
}

// newComposer returns the composer of a script of f for limits of the
// named algorithms, which writes its states in the given style.
func newComposer(f form, names []string, batch bool, store storeStyle) *composer {
	c := &composer{limits: limitsOf(names, f.convert), names: names, convert: f.convert, letters: f.letters, modes: f.modes, batch: batch, store: store, take: "not peek"}
	for _, l := range c.limits {
		if !l.log() {
			c.hashed++
		}
	}
	c.hmget = c.hashed > 1
	c.hoist = batch && len(names) <= nestLimits
	return c
}

// head returns the lines before any limit's: the key's names, what the
// loads share (held, and bare in a plain script), a conversion script's
// usedOf, and for several limits in the hash their one HMGET. held
// declares held, which a batch sets in its own head.
//
// KEYS holds the keys the script must find on the node it runs on: the
// hash when a limit keeps its state there, then each sorted set of a Kind
// that keeps a Log (the store declares no more, so that a Limiter's
// script has one key, which a Redis Cluster slot migration never answers
// TRYAGAIN). Other names (the hash for a script of sets alone, a sorted
// set where a hash limit looks for another kind's state on a miss) are
// derived from it. Callers that pass every name (the hash, then one
// sorted set per limit) get the same script.
func (c *composer) head(held bool) string {
	var src strings.Builder
	src.WriteString("local hkey = KEYS[1]\n")
	if held && c.hashed > 0 {
		if c.convert {
			src.WriteString("-- held: the key's hash held a field this script read, so it has a TTL.\nlocal held = false\n")
		} else {
			src.WriteString("-- held: the key's hash held a field this script read, so it has a TTL;\n-- bare: the key holds nothing.\nlocal held, bare = false, false\n")
		}
	}
	if c.convert {
		src.WriteString(c.usedOf())
	}
	if c.hashed == 0 {
		// Sets alone: KEYS[1] is the first one's sorted set, the hash's
		// name followed by its ID ("{}" for the empty one).
		fmt.Fprintf(&src, "if #KEYS == %d then\n  hkey = string.sub(hkey, 1, #hkey - (ARGV[%d] == '' and 2 or #ARGV[%d]))\nend\n", len(c.limits), 3+1, 3+1)
	}
	if c.hmget {
		src.WriteString(c.hmgetLine())
	}
	return src.String()
}

// usedOf returns used.lua with a branch for each kind whose letter is in
// the composer's letters: its --@used part, or, for a letter no package
// registered a body for, a state read as fully used (a field) or as none
// (a set), as Go's algorithm.Used and the sets' readers take them.
func (c *composer) usedOf() string {
	var kinds strings.Builder
	for _, l := range []byte(c.letters) {
		fmt.Fprintf(&kinds, "  if k == '%c' then\n    known = true\n", l)
		b := bodyOfLetter(l)
		switch {
		case b == nil:
			// No algorithm of this store reads it: refused (false) unless
			// the limit starts afresh.
			kinds.WriteString("    if not afresh then\n      return false\n    end\n    if not fv then\n      used = 0\n    end\n")
		case b.log:
			fmt.Fprintf(&kinds, "    if fv then\n      used = nil\n    elseif %s then\n-- %s\n%s    else\n      used = 0\n    end\n", paramsIn(b.meaning), b.name, b.used)
		default:
			fmt.Fprintf(&kinds, "    if fv and %s then\n-- %s\n%s    elseif not fv then\n      used = 0\n    end\n", paramsIn(b.meaning), b.name, b.used)
		}
		kinds.WriteString("  end\n")
	}
	return strings.Replace(usedFrame, "--@kinds\n", kinds.String(), 1)
}

// paramsIn is the condition that a header's parameters, p0 and p1, are as
// many as meaning and within [1, 2^48], as algorithm.Used checks them.
func paramsIn(meaning int) string {
	if meaning == 2 {
		return "p0 and p0 >= 1 and p0 <= 281474976710656 and p1 and p1 >= 1 and p1 <= 281474976710656"
	}
	return "p0 and p0 >= 1 and p0 <= 281474976710656 and p1 == nil"
}

// hashFields returns the ARGV index of the state ID of each limit that
// keeps its state in the key's hash, in order.
func (c *composer) hashFields() []int {
	var fields []int
	for _, l := range c.limits {
		if !l.log() {
			fields = append(fields, l.argv+1)
		}
	}
	return fields
}

// hmgetLine reads the fields of several limits kept in the hash with one
// HMGET, before any limit's load: each load then takes its value from the
// reply, hv, instead of an HGET of its own. In a conversion script, an
// error reply (WRONGTYPE: the key is not a hash) stands for every field,
// as HGET's would have; a plain one lets it end the script (the store
// then runs the conversion script). Up to 32 fields go as the call's
// arguments; more through a table (a call's arguments take a register
// each, and Lua allows a function 250, which a Policy of a few hundred
// limits would pass).
func (c *composer) hmgetLine() string {
	fields := c.hashFields()
	ids := make([]string, len(fields))
	for i, a := range fields {
		ids[i] = fmt.Sprintf("ARGV[%d]", a)
	}
	args := strings.Join(ids, ", ")
	if len(ids) > 32 {
		args = "unpack({" + args + "})"
	}
	nums := make([]string, len(fields))
	for i, a := range fields {
		nums[i] = fmt.Sprint(a)
	}
	// Each field read as rlfold reads it (foldReads).
	fold := fmt.Sprintf("if not hv.err then\n  for i, a in ipairs({%s}) do\n    hv[i] = rlfold(hkey, ARGV[a], hv[i])\n  end\nend\n", strings.Join(nums, ", "))
	if !c.convert {
		return fmt.Sprintf("local hv = redis.pcall('HMGET', hkey, %s)\nif hv.err then\n  return redis.error_reply('RLCONVERT ') -- the key is not a hash\nend\n", args) + fold
	}
	return fmt.Sprintf("local hv = redis.pcall('HMGET', hkey, %s)\nif hv.err then\n  hv = {err = hv}\nend\n", args) + fold
}

// hgetLine is the loads' read of their field, which a script of several
// limits in the hash replaces by a look into its one HMGET's reply, and a
// batch by one into its head's read (fcur).
const (
	hgetLine     = "local state = redis.pcall('HGET', hkey, ARGV[$id])\n"
	convHgetLine = "  local v = redis.pcall('HGET', hkey, ARGV[$id])\n"
	heldLine     = "  held = true\n"
	convHeldLine = "    held = true\n"
	// storeLine is a charge's write of its field, which a body with a
	// counter part writes as hash.lua's --@counted (hashCounted).
	storeLine = "redis.call('HSET', hkey, ARGV[$id], shdr .. value)\n"
)

func init() {
	for _, c := range []struct{ src, line string }{
		{hashLoad, hgetLine}, {hashLoad, heldLine}, {convLoad, convHgetLine}, {convLoad, convHeldLine}, {hashLasting, storeLine},
	} {
		if !strings.Contains(c.src, c.line) {
			panic("luascript: a shared load has no line " + strings.TrimSpace(c.line)) // a bug in an embedded file
		}
	}
}

// load returns the limit's load: a sorted set's (set.lua, or the
// conversion's); a field's, read with HGET, from the script's HMGET when
// it has one, or, in a batch, from fcur.
func (c *composer) load(l limitAt) string {
	intro := fmt.Sprintf("-- Limit %d (%s).\n", l.n, l.name)
	if l.log() {
		if c.convert {
			return intro + l.sub(c.mode(l, convSet))
		}
		return intro + l.sub(setLoad)
	}
	src, get, held := hashLoad, hgetLine, heldLine
	if c.convert {
		src, get, held = c.mode(l, convLoad), convHgetLine, convHeldLine
	}
	indent := get[:len(get)-len(strings.TrimLeft(get, " "))]
	v := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(get), "local"))
	v, _, _ = strings.Cut(v, " =")
	switch {
	case c.batch:
		src = strings.NewReplacer(get, fmt.Sprintf("%slocal %s = fcur[%d]\n", indent, v, l.field), held, "").Replace(src)
	case c.hmget:
		if c.convert {
			src = strings.Replace(src, get, fmt.Sprintf("%slocal %s = hv.err or hv[%d]\n", indent, v, l.field), 1)
		} else {
			src = strings.Replace(src, get, fmt.Sprintf("%slocal %s = hv[%d]\n", indent, v, l.field), 1)
		}
	}
	if !c.convert && !c.batch && !c.hmget {
		src += strings.ReplaceAll(hashFresh, "$take", c.take)
	}
	return intro + l.sub(src)
}

// mode returns a conversion load with the limit's mode in it: $afresh,
// whether it starts afresh a state it cannot read, and $proportional,
// whether it carries one of its own kind by the proportional rule.
func (c *composer) mode(l limitAt, load string) string {
	m := byte('0')
	if l.n <= len(c.modes) {
		m = c.modes[l.n-1]
	}
	return strings.NewReplacer("$afresh", fmt.Sprint(m >= '2'), "$proportional", fmt.Sprint(m == '1' || m == '3')).Replace(load)
}

// fresh returns a plain script's check of the fields the key lacks when
// it reads several with one HMGET, after every limit's load and before
// any write (see freshMany). A plain script of one limit in the hash
// checks in that limit's load (hash.lua); a conversion script's loads
// and tooMany check, and a batch's head.
func (c *composer) fresh() string {
	if c.convert || c.batch || !c.hmget {
		return ""
	}
	return c.freshMany("hv", c.take)
}

// freshMany returns the check of the fields missing from reply (hv, or a
// batch's fcur, by the field's place), which refuses a new field when
// take holds and the key has no room: see hash.lua's. Loops over the
// fields' ARGV indices, not a line per field: a Policy may have hundreds.
func (c *composer) freshMany(reply, take string) string {
	ids := make([]string, 0, c.hashed)
	for _, a := range c.hashFields() {
		ids = append(ids, fmt.Sprint(a))
	}
	return fmt.Sprintf(`-- Fields the key lacks: a key that holds nothing is bare, and gets its
-- TTL outright; otherwise a sorted set of a missing field's ID (another
-- kind's state) is for the conversion script, and a Take must leave the key
-- at most %d fields.
local lack = {}
for i, a in ipairs({%s}) do
  if not %s[i] then
    lack[#lack + 1] = hkey .. (ARGV[a] == '' and '{}' or ARGV[a])
  end
end
if #lack > 0 then
  if redis.call('EXISTS', hkey, unpack(lack)) == 0 then
    bare = true
  else
    for _, z in ipairs(lack) do
      if redis.call('EXISTS', z) == 1 then
        local m = redis.pcall('ZRANGE', z, 0, 0)
        return redis.error_reply('RLCONVERT ' .. (type(m[1]) == 'string' and string.match(m[1], '^#(%%u)') or ''))
      end
    end
    if %s then
      local hn = redis.call('HLEN', hkey)
      if hn + #lack > %d then
        return redis.error_reply('RLTOOMANY ' .. hkey .. ' holds ' .. hn .. ' fields; a key keeps at most %d')
      end
    end
  end
end
`, maxStates, strings.Join(ids, ", "), reply, take, maxStates, maxStates)
}

// indentLines returns src with every line indented by indent more.
func indentLines(src, indent string) string {
	var out strings.Builder
	for line := range strings.Lines(src) {
		out.WriteString(indent + line)
	}
	return out.String()
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
// store. A limit alone in its script whose body declares lasts in its
// decide part (true when the TTL the key holds already covers a charge:
// fixedwindow's, for a charge in the window the state counts) skips the
// key's PEXPIRE then (hash.lua's --@lasting); one whose body has a
// --@counter part also keeps a state of the window of now as a counter
// (--@counted). Only a charge: a booking, refund or undo writes states
// whose TTL may reach further, as text.
func (c *composer) commit(l limitAt) string {
	part := l.b.commit
	if c.batch && !l.log() {
		part = l.b.carry.beforeEncode
	}
	store := c.storeOf(l)
	switch {
	case store == hashStore && l.b.counter != "":
		store = hashCounted
	case store == hashStore && l.b.lasts:
		store = hashLasting
	}
	return l.sub(part + store)
}

// storeOf returns the write of a limit's state kept in the hash, in the
// composer's style: hash.lua's (or the conversion's) for one limit; the
// field joining the script's one HSET (storeNested, storeMany) for
// several; in a batch, the state's numbers kept for the next request and
// the tail (carry). A conversion script first removes what the load
// found in the way (wipeFirst). A sorted set is written by its body's
// commit part.
func (c *composer) storeOf(l limitAt) string {
	if l.log() {
		return ""
	}
	wipe := ""
	if c.convert {
		wipe = wipeFirst
	}
	switch c.store {
	case storeCarry:
		k := l.b.carry
		var keep strings.Builder
		vars := strings.Join(k.encodeVars, ", ")
		fmt.Fprintf(&keep, "fown[%d] = true\n%s = %s\n", l.field, carried(l.field, len(k.encodeVars)), vars)
		fmt.Fprintf(&keep, "if not fenc[%d] then\n  fenc[%d] = function(%s)\n%s\nreturn value\nend\nend\n", l.field, l.field, vars, k.encode)
		fmt.Fprintf(&keep, "fcur[%d], fhdr[%d] = shdr, shdr\nif ttl > httl then\n  httl = ttl\nend\n", l.field, l.field)
		return wipe + keep.String()
	case storeLocals:
		return wipe + fmt.Sprintf(storeNested, 2*l.field-1, 2*l.field)
	case storeTable:
		return wipe + storeMany
	}
	if c.convert {
		return wipe + convStore
	}
	return hashStore
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

// composeDecision returns the decision script of f.
func composeDecision(f form, names []string) string {
	head, limits, _ := composeParts(f, names, false)
	return describe(f, names) + prelude + plainLean(f, names) + head + limits
}

// plainLean returns the opening of a plain decision script of one limit
// whose body has a --@counter part, after the prelude: that part, which
// in its common case charges the state's counter (the key's TTL lasts)
// and replies, as the whole decision would; anything else goes on to the
// whole decision. "" for any other script.
func plainLean(f form, names []string) string {
	if f.op != 0 || f.batch || f.convert || len(names) != 1 {
		return ""
	}
	c := newComposer(f, names, false, storeOne)
	l := c.limits[0]
	if l.b.counter == "" || l.log() {
		return ""
	}
	return l.sub("local num = tonumber -- the --@counter part's names (lua-composition.md §3)\n" +
		"local function idx(i)\n  return string.format('%d', i)\nend\n" +
		"do\n  local lean, fits, charged, cfield, rem, ends = false\n  local hkey, charge, costarg = KEYS[1], true, ARGV[2]\n" +
		indentLines(l.b.counter, "  ") + `  if lean then
    return {rem, fits and 0 or ends, ends}
  end
end
`)
}

// leanCore is a lean part run on lstate, a state that opens with the
// limit's own header, in a block of its own: it sets the caller's lean
// and fits (and r1…c3 and value, its locals, which the caller reads
// after it, in the same block).
func leanCore(part string) string {
	return "local state, at, r1, r2, r3, c1, c2, c3, value = lstate, #lhdr + 1\ndo\n" + indentLines(part, "  ") + "end\n"
}

// leanHeader reads lstate's header for a lean part: lhdr, the limit's
// own header as stored, maybe with a generation before its colon
// (";<nonce>", which a booking gives: ops.go), and then the lines that
// follow it, which run when the state is of the limit's own header; nil
// for a state of another header, none, or an error reply (no hash).
const leanHeader = `local lhdr = type(lstate) == 'string' and ARGV[$hdr] or nil
if lhdr and string.find(lstate, lhdr, 1, true) ~= 1 then
  local e = string.byte(lstate, #lhdr) == 59 and string.sub(lstate, 1, #lhdr - 1) == string.sub(lhdr, 1, -2) and
    string.find(lstate, ':', #lhdr, true)
  lhdr = e and string.sub(lstate, 1, e) or nil
end
if lhdr then
`

// leanOpening returns the opening of a script of one limit, l, whose
// body has a lean part, after the prelude: the field read, and when it
// holds a state of the limit's own header (leanHeader), the lean part run
// on it, then ending, which replies in the lean part's common case;
// anything else goes on to the whole script, on the field read (lstate).
func leanOpening(l limitAt, ending string) string {
	return l.sub("local num, dry = tonumber, false -- a lean part's names (lua-composition.md §3)\n" +
		"local lstate = redis.pcall('HGET', KEYS[1], ARGV[$id])\n" + leanHeader + "  local lean, fits = false, nil\n" +
		indentLines(leanCore(l.b.lean), "  ") + indentLines(ending, "  ") + "end\n")
}

// composeParts writes the parts of a script of f deciding for limits of
// the named algorithms: head, which names the keys (and, in a batch,
// reads the limits' fields of the hash once); limits, which decides one
// request and returns its reply; and, in a batch, tail, which writes the
// fields the batch's requests changed (batch.lua puts a batch together).
//
// The decision script (batch false) reads each field in its load and
// writes it in its store. In a batch, the head reads the fields of all
// the limits kept in the hash into a Lua table (fcur, by the field's
// place), each load reads its place there instead of Redis, and each store
// keeps the state's numbers (carry); the tail encodes and writes every
// field that was set with one HSET, and the key's TTL once, the longest
// any request asked for. A sorted set's commands go to Redis as they
// come: its state is a key of its own.
func composeParts(f form, names []string, batch bool) (head, limits, tail string) {
	style := storeTable
	switch {
	case batch:
		style = storeCarry
	case len(names) == 1:
		style = storeOne
	case len(names) <= nestLimits:
		style = storeLocals
	}
	c := newComposer(f, names, batch, style)
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
		src.WriteString(c.tooMany(c.take))
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
		src.WriteString("do\n")
		src.WriteString(c.load(l) + c.decide(l))
		src.WriteString("all = all and fits\n")
		ends[i] = "if peek or not all then\n" + c.report(l) +
			fmt.Sprintf("%s = rem, retry, reset\nelse\n", c.replyOf(i)) +
			c.commit(l) + fmt.Sprintf("%s = rem, 0, reset\nend\nend\n", c.replyOf(i))
	}
	if !c.batch {
		src.WriteString(c.fresh())
		src.WriteString(c.tooMany(c.take))
	}
	for i := len(ends) - 1; i >= 0; i-- {
		src.WriteString(ends[i])
	}
	if !c.batch {
		if c.hashed > 0 {
			fmt.Fprintf(&src, "if hset1 then\n  redis.call('HSET', hkey, %s)\n%send\n", numbered("hset", 2*c.hashed), c.expireHash())
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
		src.WriteString("do\n")
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
		src.WriteString(c.fresh())
		src.WriteString(c.tooMany(c.take))
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
		src.WriteString(c.hsetMany())
		src.WriteString(ret)
	}
	return src.String()
}

// batchHead returns a batch's read of every field kept in the hash into
// fcur, once for all its requests, and its checks of the fields the key
// lacks: a plain batch's (bare, another kind's set, room), or a conversion
// batch's refusal of a key that is full. Tables indexed by the field's
// place, not a local per field: the request's function reads them as
// upvalues, of which Lua allows 60.
func (c *composer) batchHead() string {
	var src strings.Builder
	src.WriteString("local fcur, fown, fenc, fhdr, fcv1, fcv2, fcv3, httl = {}, {}, {}, {}, {}, {}, {}, 0\n")
	for _, l := range c.limits {
		if l.log() {
			continue
		}
		switch {
		case c.hmget && c.convert:
			fmt.Fprintf(&src, "fcur[%d] = hv.err or hv[%d]\n", l.field, l.field)
		case c.hmget:
			fmt.Fprintf(&src, "fcur[%d] = hv[%d]\n", l.field, l.field)
		default:
			fmt.Fprintf(&src, "fcur[%d] = redis.pcall('HGET', hkey, ARGV[%d])\n", l.field, l.argv+1)
		}
	}
	if c.hashed == 0 {
		return src.String()
	}
	if c.convert {
		src.WriteString(heldOf)
		src.WriteString(batchFull(c.hashed))
		return src.String()
	}
	src.WriteString("local held, bare, full = false, false, nil\nfor i = 1, #fcur do\n  if fcur[i] then\n    held = true\n  end\nend\n")
	src.WriteString(strings.NewReplacer("return redis.error_reply('RLTOOMANY", "full = redis.error_reply('RLTOOMANY").Replace(c.freshMany("fcur", "true")))
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
		fmt.Fprintf(&src, "  hset[#hset + 1] = fhdr[%d] .. fenc[%d](%s)\nend\n", f, f, carried(f, len(l.b.carry.encodeVars)))
	}
	if c.hashed > 0 {
		src.WriteString(c.hsetMany())
	}
	return src.String()
}

// heldOf is a conversion batch's held: whether the key's hash held any
// of the fields its head read into fcur (an error reply, WRONGTYPE, is a
// table).
const heldOf = "local held = false\nfor i = 1, #fcur do\n  if type(fcur[i]) == 'string' then\n    held = true\n  end\nend\n"

// maxStates is store.MaxStatesPerKey, for the scripts' checks.
const maxStates = store.MaxStatesPerKey

// tooMany returns a conversion script's lines that refuse, when cond
// holds (a Take's, a booking's), a request that would add a field to a
// key's hash holding store.MaxStatesPerKey fields, whether or not it is
// admitted: an error reply "RLTOOMANY", before anything is written. It
// knows which of its fields the key lacks from its read (held for one, hv
// for several); the count of the hash's fields, HLEN, is read only then.
// A key that is not a hash (an error reply) is refused by the loads, or
// wiped (afresh), so it adds nothing. A plain script checks in fresh.
func (c *composer) tooMany(cond string) string {
	if !c.convert {
		return ""
	}
	switch c.hashed {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("if %s and not held then\n  local miss = 1\n%send\n", cond, refuseFull)
	}
	return fmt.Sprintf("if %s and not hv.err then\n  local miss = 0\n  for i = 1, %d do\n    if not hv[i] then\n      miss = miss + 1\n    end\n  end\n  if miss > 0 then\n%s  end\nend\n", cond, c.hashed, refuseFull)
}

// refuseFull is tooMany's refusal of miss new fields.
var refuseFull = fmt.Sprintf(`  local hn = redis.pcall('HLEN', hkey)
  if type(hn) == 'number' and hn + miss > %d then
    return redis.error_reply('RLTOOMANY ' .. hkey .. ' holds ' .. hn .. ' fields; a key keeps at most %d')
  end
`, maxStates, maxStates)

// batchFull is tooMany for a conversion batch's head: full is the
// refusal of every request of the batch (a Take, which would add a field
// whether or not it is admitted), or nil. Each request starts with
// fullReply.
func batchFull(hashed int) string {
	return fmt.Sprintf("local full = (function()\n  local miss = 0\n  for i = 1, %d do\n    if fcur[i] == false then\n      miss = miss + 1\n    end\n  end\n  if miss > 0 then\n%s  end\nend)()\n", hashed, refuseFull)
}

// fullReply is a batch request's refusal when its head found the key full.
const fullReply = "if full then\n  return full\nend\n"

// wipeFirst removes, before a limit's state is written, what a
// conversion script's load found in the way and started afresh over
// (wipe): the key, when it is not a hash, or the sorted set of the same
// ID (another kind's).
const wipeFirst = `if wipe == 1 and redis.call('TYPE', hkey)['ok'] ~= 'hash' then
  redis.call('DEL', hkey)
elseif wipe == 2 then
  redis.call('DEL', $zkey)
end
`

// storeMany is the store of a limit of several: the field joins hset,
// written by hsetMany with the longest TTL.
const storeMany = `hset[#hset + 1] = ARGV[$id]
hset[#hset + 1] = shdr .. value
if ttl > httl then
  httl = ttl
end
`

// storeNested is storeMany in a nested Policy, where every field kept
// in the hash is written when any is (all limits admit): the limit's
// field and value go to their own locals, hset1… (the field's place
// times two, less one, and times two).
const storeNested = `hset%d, hset%d = ARGV[$id], shdr .. value
if ttl > httl then
  httl = ttl
end
`

// numbered returns the Lua names name1 … namen, separated by commas.
func numbered(name string, n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", name, i+1)
	}
	return strings.Join(names, ", ")
}

// slots returns n copies of v, separated by commas: a table
// constructor's list, which makes its array part n long at once.
func slots(v string, n int) string {
	return strings.TrimSuffix(strings.Repeat(v+", ", n), ", ")
}

// hsetMany writes the fields of several limits with one HSET, and the
// key's TTL once, as a single limit's store does.
func (c *composer) hsetMany() string {
	return "if #hset > 0 then\n  redis.call('HSET', hkey, unpack(hset))\n" + c.expireHash() + "end\n"
}

// expireHash extends the key's TTL to the longest the fields written
// asked for (httl), plus the margin, never shortening it, with one
// PEXPIRE as a single limit's store does: outright on a bare key (a
// plain script's), GT on one that held a field, else NX, then GT.
func (c *composer) expireHash() string {
	if c.convert {
		return `  httl = httl + tonumber(ARGV[3])
  if held then
    redis.call('PEXPIRE', hkey, httl, 'GT')
  elseif redis.call('PEXPIRE', hkey, httl, 'NX') == 0 then
    redis.call('PEXPIRE', hkey, httl, 'GT')
  end
`
	}
	return `  httl = httl + tonumber(ARGV[3])
  if bare then
    redis.call('PEXPIRE', hkey, httl)
  elseif held or redis.call('PEXPIRE', hkey, httl, 'NX') == 0 then
    redis.call('PEXPIRE', hkey, httl, 'GT')
  end
`
}

// opSays is what a script of each op does and replies, for its opening
// comment (the Op constants say more).
var opSays = map[Op]string{
	0: "It replies {remaining, retry after µs, reset after µs} per limit, the\n" +
		"-- cost charged to every limit or to none",
	OpBook: "It books the cost at the earliest instant every limit admits it, at most\n" +
		"-- the argument after the limits' µs ahead, and replies strings: \"1\" or \"0\",\n" +
		"-- the instant, each limit's remaining, retry and reset, then each limit's\n" +
		"-- values before and after",
	OpRefund: "It gives back up to the cost to every limit, and replies each limit's\n" +
		"-- remaining, retry and reset",
	OpCancel: "It gives back a booking of the cost due at the argument after the\n" +
		"-- limits' (then each limit's values before and after it), and replies\n" +
		"-- what each limit gave back",
	OpUndo: "It gives back an admission or a booking of the cost, due at the\n" +
		"-- argument after the limits' (then each limit's values before and after\n" +
		"-- it), and replies what each limit gave back",
	OpSettle: "It settles a booking due at the argument after the limits', of the\n" +
		"-- cost after it, to the cost after that (then each limit's values before\n" +
		"-- and after it and its generation), and replies strings: per limit its\n" +
		"-- value after and its generation",
}

// describe returns the comment that opens a script of f: what it is, its
// KEYS and ARGV, and its replies. A batch's frame says how its ARGV
// differ.
func describe(f form, names []string) string {
	var b strings.Builder
	what := "a decision"
	if f.op != 0 {
		what = "a " + f.op.String()
	}
	if f.batch {
		what = "several requests, each " + what + ","
	}
	files := make([]string, len(names))
	for i, n := range names {
		files[i] = n + ".lua"
	}
	fmt.Fprintf(&b, "-- %s: %s for one key, composed by internal/luascript\n", f.name(), what)
	fmt.Fprintf(&b, "-- from %s (docs/design/lua-composition.md).\n", strings.Join(slicesCompact(files), ", "))
	b.WriteString("-- KEYS[1]: the key's hash (for sorted sets alone, the first set). ARGV:\n" +
		"-- now in Unix µs (\"\": the server's TIME), the cost (0: a peek), the TTL\n" +
		"-- margin in ms, then per limit its state ID, header and parameters.\n")
	b.WriteString("-- " + opSays[f.op])
	if f.convert {
		b.WriteString(". It reads a limit's own kind\n" +
			"-- under other parameters by its rule")
		if f.letters != "" {
			fmt.Fprintf(&b, ", and what states of the kinds %s\n-- had used", f.letters)
		}
		b.WriteString("; it refuses the rest with RLMISMATCH,\n" +
			"-- RLTOOMANY a new field without room, RLCONVERT another kind's state.\n")
	} else {
		b.WriteString("; or, having written nothing,\n" +
			"-- RLCONVERT (a state only the conversion script reads) or RLTOOMANY.\n")
	}
	return b.String()
}

// slicesCompact returns s without repeats, in order.
func slicesCompact(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
