// Package luascript composes the Lua scripts that run each algorithm's
// transition inside Redis, from the bodies the algorithms' packages
// register (algorithm.Kind.Body) and a few shared parts.
//
// A script decides, or runs a booking operation, for one limit or several
// on one key: the prelude (prelude.lua: the request's instant and cost),
// then each limit's stages: its state's load, its body's parts, its
// state's store. Each body mirrors the Go transition of the same
// algorithm, operation for operation, and is written once: the script of
// one limit and the scripts composing several are put together from the
// same text (compose.go, ops.go, batch.go).
//
// Every script comes in two forms. The plain one, which a store runs
// first, reads a limit's own state (its field opens with the limit's
// header) or none, and nothing else: any other state makes it answer
// RLCONVERT, before it writes anything. The conversion form (Script's
// Converting) reads what the plain one leaves: a state of the limit's own
// kind under other parameters, which the body's --#convert regions carry
// by the limit's rule, and, for a limit that starts afresh, what a state
// of another kind had used, by that kind's --@used part, for the kinds the
// plain script named; it refuses the rest with RLMISMATCH. So a script
// holds only the parts its limits need on the path they take.
//
// The marks the bodies use are described in
// docs/design/lua-composition.md; the scripts made for one limit of each
// algorithm are checked in under generated/ (go generate
// ./internal/luascript rewrites them).
package luascript

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-ratelimit/ratelimit/algorithm"
	// Every algorithm of this module registers its Kind: a conversion
	// script reads what any of them left, whichever the program uses.
	_ "github.com/go-ratelimit/ratelimit/algorithms"
	"github.com/go-ratelimit/ratelimit/store"
)

var (
	//go:embed prelude.lua
	prelude string
	//go:embed hash.lua
	hashSource string
	//go:embed set.lua
	setSource string
	//go:embed convert.lua
	convertSource string
	//go:embed used.lua
	usedFrame string

	// The shared parts, by name: a plain script's load of a state kept
	// in the key's hash, its check of a field the key lacks, and its
	// write; a plain script's load of a sorted set; a conversion script's
	// loads and write.
	hashLoad, hashFresh, hashStore = section(hashSource, "load"), section(hashSource, "fresh"), section(hashSource, "store")
	// hashLasting is hashStore for a charge of a body that declares
	// lasts, true when the key's TTL already covers the write.
	hashLasting = section(hashSource, "lasting")
	// hashCounted is hashLasting for a body with a --@counter part: a
	// state of the window of now kept as a counter, its write the
	// --@counted section's in place of the field's HSET.
	hashCounted                  = strings.Replace(hashLasting, storeLine, section(hashSource, "counted"), 1)
	setLoad                      = section(setSource, "load")
	convLoad, convSet, convStore = section(convertSource, "load"), section(convertSource, "set"), section(convertSource, "store")
)

// section returns the part of src after the line "--@name", up to the
// next such line: one of the shared parts an embedded file holds.
func section(src, name string) string {
	_, rest, ok := strings.Cut("\n"+src, "\n--@"+name+"\n")
	if !ok {
		panic("luascript: no section --@" + name) // a bug in an embedded file
	}
	if i := strings.Index(rest, "\n--@"); i >= 0 {
		rest = rest[:i+1]
	}
	return strings.ReplaceAll(rest, "$most", strconv.Itoa(store.MaxStatesPerKey))
}

// Script is a script deciding, or booking, for one limit or several on
// one key.
type Script struct {
	// Name names the algorithms the script runs, in order, joined by "+",
	// after its operation ("book:gcra"), its batch ("batch:…") and its
	// conversion form ("convert:…").
	Name string
	// Source is the whole script text.
	Source string
	// SHA1 is the hex SHA-1 of Source, for EVALSHA.
	SHA1 string
	// Limits is how many limits the script decides for.
	Limits int

	form form
}

// form is what a script is composed of: its operation (0: a decision),
// its limits' algorithms, whether it is a batch, and whether it is the
// conversion form, with the letters of the other kinds whose states it
// reads (their --@used parts).
type form struct {
	op      Op
	names   string // joined by "+"
	batch   bool
	convert bool
	letters string
	// modes are the limits' modes (Modes), which a conversion script
	// holds; "" in a plain script, which reads none.
	modes string
}

func (f form) key() string {
	return fmt.Sprintf("%d/%s/%v/%v/%s/%s", f.op, f.names, f.batch, f.convert, f.letters, f.modes)
}

// name returns the Script's Name of f.
func (f form) name() string {
	n := f.names
	if f.op != 0 {
		n = f.op.String() + ":" + n
	}
	if f.convert {
		if f.letters != "" {
			n = "convert(" + f.letters + "):" + n
		} else {
			n = "convert:" + n
		}
	}
	if f.batch {
		n = "batch:" + n
	}
	return n
}

// scripts caches the composed scripts, by form.
var scripts sync.Map

// scriptOf returns the script of f, composed on first use.
func scriptOf(f form) *Script {
	k := f.key()
	if s, ok := scripts.Load(k); ok {
		return s.(*Script)
	}
	s, _ := scripts.LoadOrStore(k, composeForm(f))
	return s.(*Script)
}

// composeForm composes the script of f, whose limits all have bodies.
func composeForm(f form) *Script {
	names := strings.Split(f.names, "+")
	var source string
	switch {
	case f.batch && f.op != 0:
		source = composeOpBatch(f, names)
	case f.batch:
		source = composeBatch(f, names)
	case f.op != 0:
		source = composeOp(f, names)
	default:
		source = composeDecision(f, names)
	}
	source = foldReads(tidy(source))
	sum := sha1.Sum([]byte(source))
	return &Script{Name: f.name(), Source: source, SHA1: hex.EncodeToString(sum[:]), Limits: len(names), form: f}
}

// Converting returns the conversion form of s (see the package
// documentation) for limits of these modes (Modes) that also reads the
// states of the kinds whose letters are in letters (an RLCONVERT reply's,
// Conversion): s itself when it is one that reads them all already.
func (s *Script) Converting(letters, modes string) *Script {
	f := s.form
	if f.names == "" || len(modes) != s.Limits {
		return s // not a script of limits (Reset), or modes of other limits
	}
	f.modes = modes
	set := []byte(f.letters)
	for _, l := range []byte(letters) {
		if l >= 'A' && l <= 'Z' && !slices.Contains(set, l) && !f.ownKind(l) {
			set = append(set, l)
		}
	}
	slices.Sort(set)
	if f.convert && string(set) == f.letters && modes == s.form.modes {
		return s
	}
	f.convert, f.letters = true, string(set)
	return scriptOf(f)
}

// ownKind reports whether every limit of f is of the kind of letter l: a
// state of that kind is then its own under other parameters, which the
// limits' bodies carry, and no --@used part is needed for it.
func (f form) ownKind(l byte) bool {
	for name := range strings.SplitSeq(f.names, "+") {
		if b, err := bodyNamed(name); err != nil || b.letter != l {
			return false
		}
	}
	return true
}

// conversionReply finds an RLCONVERT error reply: what a plain script
// answers for a state it does not read, with the letters of the kinds it
// found.
var conversionReply = regexp.MustCompile(`^RLCONVERT ?([A-Z]*)$`)

// Conversion reports whether err is a plain script's answer that the
// key holds a state only the conversion form reads (Script.Converting):
// an RLCONVERT reply, with the letters of the kinds found. Nothing was
// written. The error's text is the server's, as either client library
// returns it.
func Conversion(err error) (letters string, ok bool) {
	if err == nil {
		return "", false
	}
	if m := conversionReply.FindStringSubmatch(err.Error()); m != nil {
		return m[1], true
	}
	return "", false
}

// ErrConversion is returned, wrapped, by a conversion script that
// answered RLCONVERT for kinds it already reads: a bug, never a decision.
var ErrConversion = errors.New("luascript: a conversion script asked for a kind it reads")

// Limit is what a script needs to know of one limit besides the key.
type Limit struct {
	// Spec names the algorithm and its parameters.
	Spec algorithm.Spec
	// Tag is the algorithm's Tag, of the Kind of Spec.Name's body; its
	// Header is written in front of the limit's state.
	Tag algorithm.Tag
	// ID is the field of the key's hash that holds the state, or, for a
	// Kind that keeps a Log, what follows "#" in its sorted set's name.
	ID string
	// Rule carries a state written under another Tag of the same Kind.
	Rule algorithm.Rule
	// ResetOnMismatch starts afresh, instead of refusing with an
	// RLMISMATCH error, a state the limit cannot read: charged with what
	// a state of another kind had used (algorithm.Carry).
	ResetOnMismatch bool
}

// LimitOf returns the Limit of alg under the state ID id, with the AsIs
// rule; its Tag is the zero Tag when alg is not algorithm.Tagged (and For
// refuses it).
func LimitOf(alg algorithm.Algorithm, id string) Limit {
	tag, _ := algorithm.TagOf(alg)
	return Limit{Spec: alg.Spec(), Tag: tag, ID: id}
}

// Header returns what l's state starts with: its Tag's Header, or, for a
// Kind that keeps a Log, the member its sorted set holds at score -inf
// ("#", then the header without its colon: "#L1000000").
func (l Limit) Header() string {
	h := l.Tag.Header()
	if k, ok := algorithm.KindOf(l.Tag.Kind); ok && k.Log && h != "" {
		return "#" + h[:len(h)-1]
	}
	return h
}

// Mode returns the limit's mode: "0" as-is, "1" proportional, "2" and
// "3" the same starting afresh on a state it cannot read.
func (l Limit) Mode() string {
	m := byte('0') + byte(l.Rule&1)
	if l.ResetOnMismatch {
		m += 2
	}
	return string(m)
}

// Modes returns the modes of the limits, in order (Limit.Mode): what the
// conversion form of their scripts is composed for.
func Modes(limits ...Limit) string {
	var b strings.Builder
	for _, l := range limits {
		b.WriteString(l.Mode())
	}
	return b.String()
}

// fixedArgs is how many arguments every limit has before its algorithm's
// parameters: its state ID and its header.
const fixedArgs = 2

// For returns the plain decision script of the limits, in order, and
// their arguments (ARGV[4] onward: each limit's state ID and header, then
// its algorithm's parameters), or an error wrapping
// store.ErrAlgorithmUnsupported or algorithm.ErrInvalidConfig. The
// limits' rules and whether they start afresh (Modes) shape only the
// conversion form (Script.Converting), which holds them.
func For(limits ...Limit) (*Script, []string, error) {
	names, params, err := check(limits)
	if err != nil {
		return nil, nil, err
	}
	return scriptOf(form{names: names}), params, nil
}

// check checks that every limit has a body that takes its parameters and
// a Tag of its Kind, and returns their names joined by "+" and their
// arguments.
func check(limits []Limit) (string, []string, error) {
	if len(limits) == 0 {
		return "", nil, fmt.Errorf("%w: no limits", algorithm.ErrInvalidConfig)
	}
	names := make([]string, len(limits))
	var params []string
	for i, l := range limits {
		spec := l.Spec
		b, err := bodyNamed(spec.Name)
		if err != nil {
			return "", nil, fmt.Errorf("%w: %v", store.ErrAlgorithmUnsupported, err)
		}
		if len(spec.Params) != b.params {
			return "", nil, fmt.Errorf("%w: %q takes %d parameters, got %d", store.ErrAlgorithmUnsupported, spec.Name, b.params, len(spec.Params))
		}
		if l.Tag.Kind != b.letter {
			return "", nil, fmt.Errorf("%w: %q states need an algorithm.Tag of Kind %q, got %v", store.ErrAlgorithmUnsupported, spec.Name, b.letter, l.Tag)
		}
		if l.Rule > algorithm.Proportional || (l.Rule == algorithm.Proportional && b.log) {
			return "", nil, fmt.Errorf("%w: rule %v for %q", algorithm.ErrInvalidConfig, l.Rule, spec.Name)
		}
		names[i] = spec.Name
		params = append(params, l.ID, l.Header())
		for _, p := range spec.Params {
			// The shortest text that parses back to the same double, without
			// an exponent (gopher-lua, inside miniredis, cannot parse one).
			params = append(params, strconv.FormatFloat(p, 'f', -1, 64))
		}
	}
	return strings.Join(names, "+"), params, nil
}

// Scripts returns the plain decision script of one limit of every
// registered algorithm, for tests and for preloading.
func Scripts() []*Script {
	var out []*Script
	for _, k := range algorithm.Kinds() {
		if k.Body != "" {
			out = append(out, scriptOf(form{names: k.Name}))
		}
	}
	return out
}

// Reset is the script that forgets a key's state under some state IDs:
// KEYS[1] is the key's hash, KEYS[2…] the sorted sets of the IDs (where
// a Kind that keeps a Log keeps its state), ARGV[3…] the IDs. It deletes
// the IDs' fields of the hash, the counters they point at, and the sorted
// sets, and replies an empty array.
var Reset = func() *Script {
	src := foldReads(`-- Reset: forget a key's state under some state IDs.
local ids = {}
for i = 3, #ARGV do
  ids[#ids + 1] = ARGV[i]
  local _ = redis.pcall('HGET', KEYS[1], ARGV[i]) -- read as rlfold reads it: its counter removed
end
redis.call('HDEL', KEYS[1], unpack(ids))
if #KEYS > 1 then
  redis.call('UNLINK', unpack(KEYS, 2))
end
return {}
`)
	sum := sha1.Sum([]byte(src))
	return &Script{Name: "reset", Source: src, SHA1: hex.EncodeToString(sum[:])}
}()

// HashKey and LogKey name a key's state: base is the prefix and the
// encoded key in braces ("ratelimit:{user:1}"). A state kept in the
// key's hash is the field of its ID in base + "#"; a Kind that keeps a
// Log keeps its state in a sorted set of its own, base + "#" + id, or
// base + "#{}" for the empty ID (no ID has a brace, so no ID's sorted set
// is the hash).
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

// KeepsLog reports whether a limit of the named algorithm keeps its
// state in a sorted set of its own (its Kind keeps a Log) rather than in
// a field of the key's hash.
func KeepsLog(name string) bool {
	b, err := bodyNamed(name)
	return err == nil && b.log
}

var (
	paramRef = regexp.MustCompile(`\$([1-9])`)
	fixedRef = regexp.MustCompile(`\$(id|hdr|margin)\b`)
	luaName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// substitute returns a part of a limit's body with its references to its
// arguments made ARGV indices, for a limit whose arguments follow ARGV
// index argv: $id, $hdr, then $1… its algorithm's parameters; $zkey the
// name of its ID's sorted set, and $margin the TTL margin.
func substitute(part string, argv int) string {
	part = strings.ReplaceAll(part, "$zkey", "("+zkeyName+")")
	part = strings.ReplaceAll(part, "$cpre", counterPrefix)
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
		return "tonumber(ARGV[3])" // $margin
	})
}

// zkeyName is the Lua expression naming the sorted set of a limit's ID
// ($id) on the key whose hash is hkey.
const zkeyName = "hkey .. (ARGV[$id] == '' and '{}' or ARGV[$id])"

// counterPrefix is the Lua expression of the name of a limit's counter
// ($id, $hdr: docs/design/counter-window.md), a field of the key's hash,
// before the window's index: the state ID, a brace (no ID has one, so no
// counter is an ID's field) and the limit's header. foldSource's rlfold
// names it alike, from the ID's field.
const counterPrefix = "ARGV[$id] .. '{' .. ARGV[$hdr]"

// hgetCall finds a script's reads of the field of a state ID (an
// argument) of a hash; a --@counter part's read of its counter is not one.
var hgetCall = regexp.MustCompile(`redis\.pcall\('HGET', ([^,()]+), ((?:ARGV|A)\[[^\]()]+\])\)`)

// foldReads returns src with every read of a field through rlfold
// (foldSource), defined after its opening comment: a state kept as a
// counter is one value again wherever a script reads it, so that only the
// --@counter parts and the writes of --@counted know the counter.
func foldReads(src string) string {
	src = hgetCall.ReplaceAllString(src, "rlfold($1, $2, redis.pcall('HGET', $1, $2))")
	if !strings.Contains(src, "rlfold(") {
		return src
	}
	at := 0
	for at < len(src) && strings.HasPrefix(src[at:], "--") {
		end := strings.IndexByte(src[at:], '\n')
		if end < 0 {
			break
		}
		at += end + 1
	}
	return src[:at] + foldSource + src[at:]
}

// foldSource defines rlfold, the read of a field that may point at a
// counter (counterPrefix names it alike).
const foldSource = `-- rlfold(key, id, v): the field id of the hash key, v, with a count kept
-- in a counter (docs/design/counter-window.md: "<header><index> *", the
-- count in the field id{<header><index>) read back: "<header><index>
-- <count>", written back and the counter removed (unless read-only). A
-- count past the header's limit (refusals a full window kept) is the limit.
local function rlfold(key, id, v)
  if type(v) ~= 'string' or string.byte(v, -1) ~= 42 then
    return v
  end
  local h, i = string.match(v, '^(%u[^:]*:)(%-?%d+) %*$')
  if not h then
    return v
  end
  local cf = id .. '{' .. string.gsub(h, ';[^:]*:$', ':') .. i
  local c, l = redis.pcall('HGET', key, cf), string.match(h, '^%u(%d+)')
  c = type(c) == 'string' and c or '0'
  local d = string.match(c, '^0*(%d+)$') -- compared as decimals: past 2^53, some Luas' tonumber is nil
  if l and d and (#d > #l or #d == #l and d > l) then
    c = l -- a full window's count, past the limit by the refusals it kept
  end
  v = h .. i .. ' ' .. c
  if type(redis.pcall('HSET', key, id, v)) == 'number' then
    redis.call('HDEL', key, cf)
  end
  return v
end
`

// tidy returns a composed script without the composer's marks (the
// bodies' "--#" lines) and with no two blank lines in a row, nor one at
// its start or end: the bodies' comments stay, for whoever reads the
// script on a server.
func tidy(src string) string {
	var out strings.Builder
	out.Grow(len(src))
	blank := true
	for line := range strings.Lines(src) {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--#") || strings.HasPrefix(trimmed, "--@") {
			continue
		}
		if trimmed == "" {
			if !blank {
				out.WriteString("\n")
			}
			blank = true
			continue
		}
		blank = false
		out.WriteString(line)
	}
	return strings.TrimRight(out.String(), "\n") + "\n"
}
