package luascript

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// kindBody is a registered Kind's Lua body as the composer uses it: cut
// into parts, once for the scripts that read the limit's own state alone
// (plain) and once for those that convert what else they find (convert).
type kindBody struct {
	name   string
	letter byte
	// log: the Kind keeps a Log, which the Redis scripts keep in a sorted
	// set of its own rather than in a field of the key's hash.
	log bool
	// meaning is how many parameters its header has (Kind.Params);
	// params how many arguments its body reads ($1…$params).
	meaning, params int
	plain, convert  body
	// used is its --@used part: what a state of this Kind had used, for a
	// limit of another kind that starts it afresh (used.lua).
	used string
}

// body is one variant of a Kind's body, split into its parts: the three
// every decision runs, then those of the booking scripts (ops.go), ""
// where the body has none.
type body struct {
	decide, report, commit string
	// book, refund, unused and earliest are the --@book, --@refund,
	// --@unused and --@earliest parts (docs/design/scheduling.md §4.4).
	book, refund, unused, earliest string
	// undo is the --@undo part (docs/design/refund-by-handle.md).
	undo string
	// owe is the --@owe part: a Settle's shortfall charged past the
	// limit (Go: algorithm.Settler.Owe). Optional: a limit whose body has
	// none cannot be settled up or down on Redis (ErrAlgorithmUnsupported).
	owe string
	// carry is how a batch keeps the state in Lua numbers from one request
	// to the next, for a body that marks it (every string-state body).
	carry *carry
	// setup is the body's lines that read only its parameters, which a
	// batch runs once rather than per request, for a body that marks them.
	setup *setup
	// lean is the --@lean part: the common case of a decision alone, for
	// a multi script (multi.go, leanPath), "" for a body without one.
	lean string
	// counter is the --@counter part: the common case of a decision on a
	// state kept as a counter (docs/design/counter-window.md), for a
	// multi script and a plain decision; "" for a body without one. Its
	// body's commit sets counter, which its charge's write reads
	// (hash.lua's --@counted).
	counter string
	// lasts: the decide part declares the local lasts, true when the
	// key's TTL already covers what a charge writes (compose.go, commit).
	lasts bool
}

// of returns the variant of b for a plain or a conversion script.
func (b *kindBody) of(convert bool) body {
	if convert {
		return b.convert
	}
	return b.plain
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
var perRequest = regexp.MustCompile(`\b(now|cost|peek|state|at|old0|old1|wipe|afresh|carried|other|hkey|head|proportional)\b|ARGV\[[12]\]`)

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

// maxCarried is the most numbers a body's state carries.
const maxCarried = 3

var (
	bodiesMu sync.Mutex
	bodies   = map[string]*kindBody{} // by Kind name
)

// bodyNamed returns the body of the registered Kind named name, split on
// first use: the registry is read when a script is composed, not when
// this package is loaded, so that a Kind registered later (by a test's
// own package) is composed like the others.
func bodyNamed(name string) (*kindBody, error) {
	bodiesMu.Lock()
	defer bodiesMu.Unlock()
	if b, ok := bodies[name]; ok {
		return b, nil
	}
	k, ok := algorithm.KindNamed(name)
	if !ok || k.Body == "" {
		return nil, fmt.Errorf("no Lua body for %q", name)
	}
	b, err := splitKind(k)
	if err != nil {
		return nil, fmt.Errorf("%s.lua: %w", name, err)
	}
	bodies[name] = b
	return b, nil
}

// bodyOfLetter returns the body of the registered Kind whose letter is
// letter, or nil when none has a body.
func bodyOfLetter(letter byte) *kindBody {
	k, ok := algorithm.KindOf(letter)
	if !ok {
		return nil
	}
	b, err := bodyNamed(k.Name)
	if err != nil {
		return nil
	}
	return b
}

// splitKind splits k's body into its plain and conversion variants.
func splitKind(k algorithm.Kind) (*kindBody, error) {
	kb := &kindBody{name: k.Name, letter: k.Letter, log: k.Log, meaning: k.Params}
	for _, convert := range []bool{false, true} {
		text, err := variantOf(k.Body, convert, k.Log)
		if err != nil {
			return nil, err
		}
		b, used, err := split(text)
		if err != nil {
			return nil, err
		}
		if convert {
			kb.convert, kb.used = b, used
		} else {
			kb.plain = b
		}
		if (b.carry == nil) != k.Log {
			return nil, fmt.Errorf("a state kept in the hash needs --#parse and --#encode marks, and only there")
		}
	}
	for _, m := range paramRef.FindAllStringSubmatch(k.Body, -1) {
		kb.params = max(kb.params, int(m[1][0]-'0'))
	}
	return kb, nil
}

// variantOf returns a body's text for a plain script (convert false) or a
// conversion one: the lines between "--#convert" and "--#converted" only in
// the conversion script, those between "--#plain" and the "--#convert" that
// ends them only in the plain one, and a line "--#unreadable <what>" (in a
// branch taken when the state cannot be read) made the variant's answer:
// the plain script's RLCONVERT, for the conversion script to read it
// again; the conversion script's RLMISMATCH refusal, whose text ends with
// the Lua expression what, unless the limit starts afresh.
func variantOf(text string, convert, log bool) (string, error) {
	var out strings.Builder
	region := "" // "plain", "convert" or ""
	n, indent := 0, ""
	for line := range strings.Lines(text) {
		n++
		mark := strings.TrimSpace(line)
		switch {
		case mark == "--#plain":
			if region != "" {
				return "", fmt.Errorf("line %d: --#plain inside another region", n)
			}
			region = "plain"
			continue
		case mark == "--#convert":
			if region == "convert" {
				return "", fmt.Errorf("line %d: --#convert inside another", n)
			}
			region = "convert"
			continue
		case mark == "--#converted":
			if region != "convert" {
				return "", fmt.Errorf("line %d: --#converted without --#convert", n)
			}
			region = ""
			continue
		case strings.HasPrefix(mark, "--#unreadable "):
			if region != "" {
				return "", fmt.Errorf("line %d: --#unreadable inside a region", n)
			}
			// In the branch the line before opens: indented one step more.
			out.WriteString(unreadable(indent+"  ", strings.TrimPrefix(mark, "--#unreadable "), convert, log))
			continue
		}
		if region == "" || (region == "convert") == convert {
			out.WriteString(line)
			if mark != "" && !strings.HasPrefix(mark, "--") {
				indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
			}
		}
	}
	if region != "" {
		return "", fmt.Errorf("a --#%s region does not end", region)
	}
	return out.String(), nil
}

// unreadable returns the lines a "--#unreadable what" mark stands for,
// indented by indent: see variantOf.
func unreadable(indent, what string, convert, log bool) string {
	if !convert {
		letter := "1, 1"
		if log {
			letter = "2, 2" // the header member: "#" and the header
		}
		return fmt.Sprintf("%sreturn redis.error_reply('RLCONVERT ' .. string.sub(ARGV[$hdr], %s))\n", indent, letter)
	}
	where := "hkey .. ' field ' .. ARGV[$id]"
	if log {
		where = "zkey"
	}
	return fmt.Sprintf("%sif not afresh then\n%s  return redis.error_reply('RLMISMATCH ' .. %s .. %s)\n%send\n", indent, indent, where, what, indent)
}

// split cuts a body at its "--@name" lines (--@report and --@commit, in
// that order, then any of --@book, --@refund, --@unused, --@earliest,
// --@undo, --@owe and --@used), and reads its --#setup and carry marks; it
// returns the --@used part apart.
func split(text string) (body, string, error) {
	b, used, err := splitParts(text)
	if err != nil {
		return body{}, "", err
	}
	if b.setup, err = splitSetup(b.decide); err != nil {
		return body{}, "", err
	}
	if b.carry, err = splitCarry(b.decide, b.commit); err != nil {
		return body{}, "", err
	}
	b.lasts = lastsDecl.MatchString(b.decide)
	return b, used, nil
}

// lastsDecl finds a decide part's declaration of lasts (body.lasts).
var lastsDecl = regexp.MustCompile(`(?m)^\s*local [^=\n]*\blasts\b`)

// splitParts cuts a body at its "--@name" lines into its parts.
func splitParts(text string) (body, string, error) {
	var b body
	var used string
	parts := map[string]*string{
		"report": &b.report, "commit": &b.commit, "lean": &b.lean, "counter": &b.counter,
		"book": &b.book, "refund": &b.refund, "unused": &b.unused, "earliest": &b.earliest, "undo": &b.undo, "owe": &b.owe,
		"used": &used,
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
			return body{}, "", fmt.Errorf("part --@%s unknown or repeated", name)
		}
		names = append(names, name)
		cur, rest = p, tail
		*cur = "\n" // taken: a repeat is refused even before it is filled
	}
	if len(names) < 2 || names[0] != "report" || names[1] != "commit" {
		return body{}, "", fmt.Errorf("want --@report then --@commit first, got %v", names)
	}
	return b, strings.TrimPrefix(used, "\n"), nil
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
	if m := perRequest.FindString(codeOnly(inner)); m != "" {
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

// codeOnly returns src without its comments: the lines' text after "--",
// and lines that are comments alone. No body uses a block comment
// (TestNoBlockComments).
func codeOnly(src string) string {
	var out strings.Builder
	for line := range strings.Lines(src) {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i] + "\n"
		}
		if strings.TrimSpace(line) != "" {
			out.WriteString(line)
		}
	}
	return out.String()
}
