// Package luascript holds the Lua scripts that run each algorithm's
// transition inside Redis, shared by the go-redis and rueidis stores.
//
// A script is the prelude (prelude.lua: KEYS, ARGV and reply layout, the
// clock) followed by algorithm bodies, one per limit the script decides
// for. Each body mirrors the Go transition of the same algorithm, operation
// for operation, and is written once: the script of one limit and the
// scripts composing several are put together from the same text, in
// stages (compose.go). The marks the bodies use (--@report, --#setup,
// $id…) are described once, in docs/design/lua-composition.md; the
// scripts made for one limit of each algorithm are checked in under
// generated/ (go generate ./internal/luascript rewrites them).
package luascript

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/go-ratelimit/ratelimit/algorithm"
	_ "github.com/go-ratelimit/ratelimit/algorithms" // registers every algorithm's Kind and body
	"github.com/go-ratelimit/ratelimit/store"
)

var (
	//go:embed prelude.lua
	prelude string
	//go:embed load.lua
	loadHash string
	//go:embed store.lua
	storeHash string
	//go:embed used.lua
	usedState string
)

// Script is a script deciding for one limit or several on one key.
type Script struct {
	// Name names the algorithms the script runs, in order, joined by "+".
	Name string
	// Source is the whole script text.
	Source string
	// SHA1 is the hex SHA-1 of Source, for EVALSHA.
	SHA1 string
	// Limits is how many limits the script decides for: a third of the
	// number of integers it replies.
	Limits int
}

// body is one algorithm's body, split into its parts: the three every
// decision runs, then those of the booking scripts (ops.go), "" where the
// body has none.
type body struct {
	decide, report, commit string
	// book, refund, unused and earliest are the --@book, --@refund,
	// --@unused and --@earliest parts (docs/design/scheduling.md §4.4).
	book, refund, unused, earliest string
	params                         int  // $1…$params
	kind                           byte // its algorithm.Tag's Kind
	// log: its Kind keeps a Log, a sorted set of its own on Redis,
	// rather than a field of the key's hash.
	log bool
	// undo is the --@undo part (docs/design/refund-by-handle.md).
	undo string
	// carry is how a batch keeps the state in Lua numbers from one request
	// to the next, for a body that marks it (every string-state body).
	carry *carry
	// setup is the body's lines that read only its parameters, which a
	// batch runs once rather than per request, for a body that marks them.
	setup *setup
}

// setup is a body's region, at the start of its decide part, from
// "--#setup a, b" to "--#setupend": lines that set the locals a, b from
// the body's parameters alone (its ARGV, constants, functions of their
// arguments), nothing that varies between requests. A decision script
// runs them as written; a batch of few limits (composeParts) runs them
// once, before its requests, and each request takes the locals' values.
type setup struct {
	vars   []string
	region string // the marked lines, marks included, as decide holds them
	text   string // the lines between the marks
}

// perRequest finds, in a setup region, what varies between requests: the
// request's time, cost and ARGV[1] or ARGV[2], and what the load found.
var perRequest = regexp.MustCompile(`\b(now|cost|peek|state|at|old0|old1|wipe|afresh|carried|other|hkey)\b|ARGV\[[12]\]`)

// carry holds a body's two marked regions. In its decide part, the lines
// between "--#parse a, b" and "--#parsed" read its state's body (state,
// from at) into the numbers a, b (locals declared before them); in its
// commit part, the lines from "--#encode x, y" to the part's end set
// value, the state's body, from the numbers x, y (and the body's
// parameters, nothing else that varies between requests). Encoding x, y
// and parsing the result gives x, y back, exactly.
//
// A decision script runs the parts as written. A batch parses a field
// only until a request of the batch writes it: then it keeps the numbers
// that request encoded (fcv1, fcv2… in the batch's tables), which later
// requests take in place of the parse, and encodes once, in its tail,
// with the encode region made a function of those numbers.
type carry struct {
	parseVars, encodeVars []string
	// decide = beforeParse + parse + afterParse;
	// commit = beforeEncode + encode.
	beforeParse, parse, afterParse string
	beforeEncode, encode           string
}

// carried names the numbers a batch carries for the field-th limit kept
// in the hash: "fcv1[field], fcv2[field]" for two.
func carried(field, n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("fcv%d[%d]", i+1, field)
	}
	return strings.Join(names, ", ")
}

// localLimits is the most limits whose closures a script keeps in a
// local each (2 per limit for a decision, 6 for a booking script); past
// it, they go in tables, one lookup slower, within Lua's 200 locals.
const localLimits = 24

// nestLimits is the most limits whose parts a script nests (composeParts)
// rather than leaving closures behind: nested, every limit's locals stay
// live until the innermost block, and Lua allows a function 200 locals
// and 250 registers, which 4 of the largest bodies stay well within.
const nestLimits = 4

// maxCarried is the most numbers a body's state carries.
const maxCarried = 3

var (
	bodies = map[string]body{}
	single = map[string]*Script{} // by algorithm name
	// composed caches the scripts of several limits, by Name.
	composed sync.Map
)

// fixedArgs is how many arguments every limit has before its algorithm's
// parameters: its state ID, its header and its mode.
const fixedArgs = 3

var (
	paramRef = regexp.MustCompile(`\$([1-9])`)
	fixedRef = regexp.MustCompile(`\$(id|hdr|mode)\b`)
	luaName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// usedLine marks where load.lua and slidinglog.lua take what a state of
// another kind had used: a call of used.lua's usedOf, which the script's
// head defines (usedHead).
const (
	usedLine = "--#used\n"
	usedCall = "carried = usedOf(fv, fz, $zkey, now)\n"
)

// usedHead returns used.lua for the head of a script deciding for limits
// of the named algorithms: usedOf, made only when one of the limits
// resets on mismatch (its mode argument is "2" or "3").
func usedHead(names []string) string {
	modes := make([]string, len(names))
	argv := 3
	for i, name := range names {
		modes[i] = fmt.Sprintf("ARGV[%d] >= '2'", argv+3)
		argv += fixedArgs + bodies[name].params
	}
	return strings.Replace(usedState, "\nif $afresh then\n", "\nif "+strings.Join(modes, " or ")+" then\n", 1)
}

func init() {
	if !strings.Contains(loadHash, usedLine) || !strings.Contains(usedState, "\nif $afresh then\n") {
		panic("luascript: load.lua needs a --#used line, used.lua $afresh") // a bug in an embedded file
	}
	loadHash = strings.Replace(loadHash, usedLine, usedCall, 1)
	// Every script carries used.lua, which runs only on a switch of
	// algorithm: without its indentation it is a quarter shorter (4.7 KB).
	var used strings.Builder
	for line := range strings.Lines(usedState) {
		used.WriteString(strings.TrimLeft(line, " "))
	}
	usedState = used.String()
	for _, line := range []string{hgetLine, heldLine} {
		if !strings.Contains(loadHash, line) {
			panic("luascript: load.lua: no line " + strings.TrimSpace(line)) // a bug in an embedded file
		}
	}
	for _, k := range algorithm.Kinds() {
		if k.Body == "" {
			continue
		}
		name := k.Name
		if k.Log && !strings.Contains(k.Body, usedLine) {
			panic("luascript: " + name + ".lua needs a --#used line") // a bug in an embedded file
		}
		b, err := split(strings.Replace(k.Body, usedLine, usedCall, 1))
		if err != nil {
			panic(fmt.Sprintf("luascript: %s.lua: %v", name, err)) // a bug in an embedded file
		}
		b.kind, b.log = k.Letter, k.Log
		if (b.carry == nil) != b.log {
			panic(fmt.Sprintf("luascript: %s.lua: a state kept in the hash needs --#parse and --#encode marks, and only there", name)) // a bug in an embedded file
		}
		bodies[name] = b
		single[name] = compose([]string{name})
	}
	reset := "-- Reset: forget a key's state under some state IDs.\n" + resetSource
	sum := sha1.Sum([]byte(reset))
	Reset = &Script{Name: "reset", Source: reset, SHA1: hex.EncodeToString(sum[:])}
}

// split cuts a body at its "--@name" lines (--@report and --@commit, in
// that order, then any of --@book, --@refund, --@unused, --@earliest and
// --@undo), counts the parameters it names, and reads its --#setup and carry
// marks.
func split(text string) (body, error) {
	b, err := splitParts(text)
	if err != nil {
		return body{}, err
	}
	for _, m := range paramRef.FindAllStringSubmatch(text, -1) {
		b.params = max(b.params, int(m[1][0]-'0'))
	}
	if b.setup, err = splitSetup(b.decide); err != nil {
		return body{}, err
	}
	if b.carry, err = splitCarry(b.decide, b.commit); err != nil {
		return body{}, err
	}
	return b, nil
}

// splitParts cuts a body at its "--@name" lines into its parts.
func splitParts(text string) (body, error) {
	var b body
	parts := map[string]*string{
		"report": &b.report, "commit": &b.commit,
		"book": &b.book, "refund": &b.refund, "unused": &b.unused, "earliest": &b.earliest, "undo": &b.undo,
	}
	rest := text
	cur := &b.decide
	var names []string
	for {
		before, after, ok := strings.Cut(rest, "\n--@")
		if !ok {
			*cur = rest + "\n"
			break
		}
		*cur = before + "\n"
		name, tail, _ := strings.Cut(after, "\n")
		p, known := parts[name]
		if !known || *p != "" {
			return body{}, fmt.Errorf("part --@%s unknown or repeated", name)
		}
		names = append(names, name)
		cur, rest = p, tail
		*cur = "\n" // taken: a repeat is refused even before it is filled
	}
	if len(names) < 2 || names[0] != "report" || names[1] != "commit" {
		return body{}, fmt.Errorf("want --@report then --@commit first, got %v", names)
	}
	return b, nil
}

// splitSetup reads the "--#setup" region of a decide part, or nil when
// it has none.
func splitSetup(decide string) (*setup, error) {
	_, rest, ok := strings.Cut("\n"+decide, "\n--#setup ")
	if !ok {
		return nil, nil
	}
	vars, rest, _ := strings.Cut(rest, "\n")
	inner, _, ok := strings.Cut(rest, "--#setupend\n")
	if !ok {
		return nil, fmt.Errorf("--#setup without --#setupend in the decide part")
	}
	su := &setup{vars: strings.Split(vars, ", "), region: "--#setup " + vars + "\n" + inner + "--#setupend\n", text: inner}
	for _, v := range su.vars {
		if !luaName.MatchString(v) {
			return nil, fmt.Errorf("--#setup: %q is not a name", v)
		}
	}
	if m := perRequest.FindString(withoutComments("--\n" + inner)); m != "" {
		return nil, fmt.Errorf("--#setup: the region reads %s, which varies between requests", m)
	}
	return su, nil
}

// splitCarry reads the "--#parse" region of a decide part and the
// "--#encode" one of its commit part, or nil when it has neither.
func splitCarry(decide, commit string) (*carry, error) {
	if !strings.Contains(decide, "\n--#parse ") && !strings.Contains(commit, "\n--#encode ") {
		return nil, nil
	}
	c := &carry{}
	var vars, rest, tail string
	var ok bool
	if c.beforeParse, rest, ok = strings.Cut(decide, "\n--#parse "); !ok {
		return nil, fmt.Errorf("--#encode without --#parse")
	}
	if vars, rest, ok = strings.Cut(rest, "\n"); !ok {
		return nil, fmt.Errorf("--#parse: no lines")
	}
	c.parseVars = strings.Split(vars, ", ")
	if c.parse, tail, ok = strings.Cut(rest, "\n--#parsed\n"); !ok {
		return nil, fmt.Errorf("--#parse without --#parsed")
	}
	c.beforeParse += "\n"
	c.parse += "\n"
	c.afterParse = tail
	if c.beforeEncode, rest, ok = strings.Cut(commit, "\n--#encode "); !ok {
		return nil, fmt.Errorf("--#parse without --#encode")
	}
	if vars, c.encode, ok = strings.Cut(rest, "\n"); !ok {
		return nil, fmt.Errorf("--#encode: no lines")
	}
	c.beforeEncode += "\n"
	c.encodeVars = strings.Split(vars, ", ")
	return c, c.check()
}

// check refuses carry marks a batch could not use: the encode region
// becomes a function of its numbers, which returns value, so they must
// be names, as many as the parse's, and it must set value.
func (c *carry) check() error {
	if len(c.parseVars) != len(c.encodeVars) || len(c.parseVars) > maxCarried {
		return fmt.Errorf("--#parse %v and --#encode %v: not as many numbers, or more than %d", c.parseVars, c.encodeVars, maxCarried)
	}
	for _, v := range append(c.parseVars, c.encodeVars...) {
		if !luaName.MatchString(v) {
			return fmt.Errorf("--#parse / --#encode: %q is not a name", v)
		}
	}
	if !strings.Contains(c.encode, "value =") {
		return fmt.Errorf("--#encode: the region does not set value")
	}
	return nil
}

// compose puts together the script deciding for limits of the named
// algorithms, in order. Every name has a body.
func compose(names []string) *Script {
	var src strings.Builder
	src.WriteString(prelude)
	head, limits, _ := composeParts(names, false)
	src.WriteString(head)
	src.WriteString(limits)
	source := withoutComments(src.String())
	sum := sha1.Sum([]byte(source))
	return &Script{Name: strings.Join(names, "+"), Source: source, SHA1: hex.EncodeToString(sum[:]), Limits: len(names)}
}

// hashFields returns the ARGV index of the state ID of each of the named
// limits that keeps its state in the key's hash (every one but a sliding
// log), in order.
func hashFields(names []string) []int {
	var fields []int
	at := 3
	for _, name := range names {
		b := bodies[name]
		if !b.log {
			fields = append(fields, at+1)
		}
		at += fixedArgs + b.params
	}
	return fields
}

// hmgetLine reads the fields of several limits kept in the hash with one
// HMGET, before any limit's load: each load then takes its value from the
// reply, hv (loadFrom), instead of an HGET of its own. An error reply
// (WRONGTYPE: the key is not a hash) stands for every field, as HGET's
// would have. Up to 32 fields go as the call's arguments; more through a
// table (a call's arguments take a register each, and Lua allows a
// function 250, which a Policy of a few hundred limits would pass).
func hmgetLine(fieldArgs []int) string {
	ids := make([]string, len(fieldArgs))
	for i, a := range fieldArgs {
		ids[i] = fmt.Sprintf("ARGV[%d]", a)
	}
	args := strings.Join(ids, ", ")
	if len(ids) > 32 {
		args = "unpack({" + args + "})"
	}
	return fmt.Sprintf("local hv = redis.pcall('HMGET', hkey, %s)\nif hv.err then\n  hv = {err = hv}\nend\n", args)
}

// loadFrom is load.lua for the limit whose field is the field-th kept in
// the hash (from 1), reading it from hmgetLine's reply.
func loadFrom(field int) string {
	return strings.Replace(loadHash, hgetLine, fmt.Sprintf("local v = hv.err or hv[%d]\n", field), 1)
}

// substitute returns a part of a limit's body with its references to its
// arguments made ARGV indices, for a limit whose arguments follow ARGV
// index argv: $id, $hdr, $mode, then $1… its algorithm's parameters; and
// $zkey the name of its ID's sorted set.
func substitute(part string, argv int) string {
	part = strings.ReplaceAll(part, "$zkey", "("+zkeyName+")")
	part = paramRef.ReplaceAllStringFunc(part, func(ref string) string {
		return strconv.Itoa(argv + fixedArgs + int(ref[1]-'0'))
	})
	return fixedRef.ReplaceAllStringFunc(part, func(ref string) string {
		switch ref {
		case "$id":
			return strconv.Itoa(argv + 1)
		case "$hdr":
			return strconv.Itoa(argv + 2)
		}
		return strconv.Itoa(argv + 3) // $mode
	})
}

// zkeyName is the Lua expression naming the sorted set of a limit's ID
// ($id) on the key whose hash is hkey; zkeyOf names it once, as zkey.
const (
	zkeyName = "hkey .. (ARGV[$id] == '' and '{}' or ARGV[$id])"
	zkeyOf   = "local zkey = " + zkeyName + "\n"
)

// withoutComments returns src without its lines that are comments alone
// (but the first, which names the script for whoever reads it on a
// server) and its blank lines: the bodies' documentation is for readers
// of the .lua files, not for every server that loads the script (and an
// emulator such as miniredis parses the script on every call). No body
// uses a block comment (--[[), which this would break; a test checks.
func withoutComments(src string) string {
	var out strings.Builder
	out.Grow(len(src))
	first := true
	for line := range strings.Lines(src) {
		trimmed := strings.TrimSpace(line)
		if !first && (trimmed == "" || strings.HasPrefix(trimmed, "--")) {
			continue
		}
		first = false
		out.WriteString(line)
	}
	return out.String()
}

// hgetLine is load.lua's read of its field, which a script of several
// string-state limits replaces by a look into its one HMGET's reply.
const hgetLine = "local v = redis.pcall('HGET', hkey, ARGV[$id])\n"

// heldLine is load.lua's note that the key held the field (held, which
// the script's head declares). A batch's head sets held from its own
// read, and its loads drop the line.
const heldLine = "    held = true\n"

// heldOf is a batch's held: whether the key's hash held any of the
// fields its head read into fcur (an error reply, WRONGTYPE, is a table).
const heldOf = "local held = false\nfor i = 1, #fcur do\n  if type(fcur[i]) == 'string' then\n    held = true\n  end\nend\n"

// tooMany returns the lines that refuse, when cond holds (a Take's, a
// booking's), a request that would add a field to a key's hash holding
// store.MaxStatesPerKey fields, whether or not it is admitted: an error
// reply "RLTOOMANY", before anything is written. A script of hashed
// limits kept in the hash knows which of its fields the key lacks from
// its read (held for one, hv for several); the count of the hash's
// fields, HLEN, is read only then. A key that is not a hash (an error
// reply) is refused by the loads, or wiped (afresh), so it adds nothing.
func tooMany(hashed int, cond string) string {
	switch hashed {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("if %s and not held then\n  local miss = 1\n%send\n", cond, refuseFull)
	}
	return fmt.Sprintf("if %s and not hv.err then\n  local miss = 0\n  for i = 1, %d do\n    if not hv[i] then\n      miss = miss + 1\n    end\n  end\n  if miss > 0 then\n%s  end\nend\n", cond, hashed, refuseFull)
}

// refuseFull is tooMany's refusal of miss new fields.
var refuseFull = fmt.Sprintf(`  local hn = redis.pcall('HLEN', hkey)
  if type(hn) == 'number' and hn + miss > %d then
    return redis.error_reply('RLTOOMANY ' .. hkey .. ' holds ' .. hn .. ' fields; a key keeps at most %d')
  end
`, store.MaxStatesPerKey, store.MaxStatesPerKey)

// batchFull is tooMany for a batch's head: full is the refusal of every
// request of the batch (a Take, which would add a field whether or not
// it is admitted), or nil. Each request starts with fullReply.
func batchFull(hashed int) string {
	if hashed == 0 {
		return ""
	}
	return fmt.Sprintf("local full = (function()\n  local miss = 0\n  for i = 1, %d do\n    if fcur[i] == false then\n      miss = miss + 1\n    end\n  end\n  if miss > 0 then\n%s  end\nend)()\n", hashed, refuseFull)
}

// fullReply is a batch request's refusal when its head found the key full.
const fullReply = "if full then\n  return full\nend\n"

// wipeFirst removes, before a limit's state is written, what its load
// found in the way and started afresh over (wipe): the key, when it is
// not a hash, or the sorted set of the same ID (a sliding log's).
const wipeFirst = `if wipe == 1 and redis.call('TYPE', hkey)['ok'] ~= 'hash' then
  redis.call('DEL', hkey)
elseif wipe == 2 then
  redis.call('DEL', $zkey)
end
`

// storeMany is store.lua for a limit of several: the field joins hset,
// written by hsetMany with the longest TTL.
const storeMany = `hset[#hset + 1] = ARGV[$id]
hset[#hset + 1] = ARGV[$hdr] .. value
if ttl > httl then
  httl = ttl
end
`

// storeNested is storeMany in a nested Policy, where every field kept
// in the hash is written when any is (all limits admit): the limit's
// field and value go to their own locals, hset1… (the field's place
// times two, less one, and times two).
const storeNested = `hset%d, hset%d = ARGV[$id], ARGV[$hdr] .. value
if ttl > httl then
  httl = ttl
end
`

// hsetNested is hsetMany for storeNested's locals, given as the call's
// arguments (no table, no unpack).
const hsetNested = "if hset1 then\n  redis.call('HSET', hkey, %s)\n" + expireHash + "end\n"

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
// key's TTL once, as store.lua does for one.
const hsetMany = "if #hset > 0 then\n  redis.call('HSET', hkey, unpack(hset))\n" + expireHash + "end\n"

// expireHash extends the key's TTL to the longest the fields written
// asked for (httl), plus the margin, never shortening it, with one
// PEXPIRE as store.lua does.
const expireHash = `  httl = httl + margin
  if held then
    redis.call('PEXPIRE', hkey, httl, 'GT')
  elseif redis.call('PEXPIRE', hkey, httl, 'NX') == 0 then
    redis.call('PEXPIRE', hkey, httl, 'GT')
  end
`

// Scripts returns the script of one limit of every algorithm, for tests
// and for preloading.
func Scripts() []*Script {
	out := make([]*Script, 0, len(single))
	for _, s := range single {
		out = append(out, s)
	}
	return out
}

// Limit is what a script needs to know of one limit besides the key.
type Limit struct {
	// Spec names the algorithm and its parameters.
	Spec algorithm.Spec
	// Tag is the algorithm's Tag, of the Kind of Spec.Name's body; its
	// Header is written in front of the limit's state.
	Tag algorithm.Tag
	// ID is the field of the key's hash that holds the state, or, for the
	// sliding log, what follows "#" in its sorted set's name.
	ID string
	// Rule carries a state written under another Tag of the same Kind.
	Rule algorithm.Rule
	// ResetOnMismatch starts afresh, instead of refusing with an
	// RLMISMATCH error, a state the limit cannot read: charged with what
	// a state of another kind had used (used.lua, algorithm.Carry).
	ResetOnMismatch bool
}

// LimitOf returns the Limit of alg under the state ID id, with the AsIs
// rule; its Tag is the zero Tag when alg is not algorithm.Tagged (and For
// refuses it).
func LimitOf(alg algorithm.Algorithm, id string) Limit {
	tag, _ := algorithm.TagOf(alg)
	return Limit{Spec: alg.Spec(), Tag: tag, ID: id}
}

// Header returns what l's state starts with: its Tag's Header, or, for
// the sliding log, the member its sorted set holds at score -inf
// ("#L" and the window in µs).
func (l Limit) Header() string {
	h := l.Tag.Header()
	if k, ok := algorithm.KindOf(l.Tag.Kind); ok && k.Log && h != "" {
		return "#" + h[:len(h)-1]
	}
	return h
}

// Mode returns the limit's mode argument: "0" as-is, "1" proportional,
// "2" and "3" the same starting afresh on a state it cannot read.
func (l Limit) Mode() string {
	m := byte('0') + byte(l.Rule&1)
	if l.ResetOnMismatch {
		m += 2
	}
	return string(m)
}

// For returns the script deciding for the limits, in order, and their
// arguments (ARGV[4] onward: each limit's state ID, header and mode, then
// its algorithm's parameters), or an error wrapping
// store.ErrAlgorithmUnsupported.
func For(limits ...Limit) (*Script, []string, error) {
	if len(limits) == 0 {
		return nil, nil, fmt.Errorf("%w: no limits", algorithm.ErrInvalidConfig)
	}
	names := make([]string, len(limits))
	var params []string
	for i, l := range limits {
		spec := l.Spec
		b, ok := bodies[spec.Name]
		if !ok {
			return nil, nil, fmt.Errorf("%w: no Lua script for %q", store.ErrAlgorithmUnsupported, spec.Name)
		}
		if len(spec.Params) != b.params {
			return nil, nil, fmt.Errorf("%w: %q takes %d parameters, got %d", store.ErrAlgorithmUnsupported, spec.Name, b.params, len(spec.Params))
		}
		if l.Tag.Kind != b.kind {
			return nil, nil, fmt.Errorf("%w: %q states need an algorithm.Tag of Kind %q, got %v", store.ErrAlgorithmUnsupported, spec.Name, b.kind, l.Tag)
		}
		if l.Rule > algorithm.Proportional || (l.Rule == algorithm.Proportional && b.log) {
			return nil, nil, fmt.Errorf("%w: rule %v for %q", algorithm.ErrInvalidConfig, l.Rule, spec.Name)
		}
		names[i] = spec.Name
		params = append(params, l.ID, l.Header(), l.Mode())
		for _, p := range spec.Params {
			// The shortest text that parses back to the same double, without
			// an exponent (gopher-lua, inside miniredis, cannot parse one).
			params = append(params, strconv.FormatFloat(p, 'f', -1, 64))
		}
	}
	if len(names) == 1 {
		return single[names[0]], params, nil
	}
	name := strings.Join(names, "+")
	if s, ok := composed.Load(name); ok {
		return s.(*Script), params, nil
	}
	s, _ := composed.LoadOrStore(name, compose(names))
	return s.(*Script), params, nil
}

// Reset is the script that forgets a key's state under some state IDs:
// KEYS[1] is the key's hash, KEYS[2…] the sorted sets of the IDs (where
// a sliding log keeps its state), ARGV[3…] the IDs. It deletes the IDs'
// fields of the hash, and the sorted sets, and replies an empty array.
var Reset *Script

const resetSource = `local ids = {}
for i = 3, #ARGV do
  ids[#ids + 1] = ARGV[i]
end
redis.call('HDEL', KEYS[1], unpack(ids))
if #KEYS > 1 then
  redis.call('UNLINK', unpack(KEYS, 2))
end
return {}
`

// HashKey and LogKey name a key's state: base is the prefix and the
// encoded key in braces ("ratelimit:{user:1}"). The five string-state
// algorithms keep it in the fields of one hash, base + "#"; a sliding
// log keeps it in a sorted set of its own, base + "#" + id, or
// base + "#{}" for the empty ID (no ID has a brace, so no ID's sorted
// set is the hash).
func HashKey(base string) string { return base + "#" }

// LogKey: see HashKey.
func LogKey(base, id string) string {
	if id == "" {
		return base + "#{}"
	}
	return base + "#" + id
}

// Keys returns the KEYS of a script for limits with these state IDs, on
// the key whose base name is base (see HashKey).
func Keys(base string, ids ...string) []string {
	keys := []string{HashKey(base)}
	for _, id := range ids {
		keys = append(keys, LogKey(base, id))
	}
	return keys
}
