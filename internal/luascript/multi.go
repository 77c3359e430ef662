package luascript

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
)

// MaxGroups is the most groups a multi script decides (Multi): a request
// of more is decided otherwise by the store. Each group's block frees its
// locals when it ends, but the script's text, and the scripts a server
// caches, grow with it.
const MaxGroups = 32

// maxGroupLimits is the most limits of one group of a multi script: its
// closures are locals (closureLimits' without tables).
const maxGroupLimits = localLimits

// multiScripts caches the multi scripts, by their groups' names.
var multiScripts sync.Map

// Multi returns the script that decides several requests together, each
// for its own key by the limits of its own decision script (For's, plain),
// all-or-none: every request is charged when every limit of every
// request admits its cost, none otherwise. ok is false when the groups
// cannot go in one script: none or more than MaxGroups, a script that is
// not a plain decision, or one of more than 24 limits.
//
// KEYS are each group's keys in turn, as its decision script declares
// them. ARGV[1] is the number of groups, negative for a dry run, which
// charges nothing and replies what a denial would (each limit's report for
// its request's cost, RetryAfter 0 where it fits); then, per group, how many
// arguments it has and how many keys, then its arguments as its decision
// script takes them (now, cost, the TTL margin, its limits'). The reply is
// each group's reply in turn, {remaining, retry after, reset after} per
// limit; or, having written nothing, an error reply as a group's decision
// script would give it (RLCONVERT, RLTOOMANY).
func Multi(groups ...*Script) (s *Script, ok bool) {
	if len(groups) == 0 || len(groups) > MaxGroups {
		return nil, false
	}
	names := make([]string, len(groups))
	for i, g := range groups {
		if g.form.op != 0 || g.form.batch || g.form.convert || g.Limits > maxGroupLimits {
			return nil, false
		}
		names[i] = g.form.names
	}
	k := strings.Join(names, "|")
	if s, ok := multiScripts.Load(k); ok {
		return s.(*Script), true
	}
	source := tidy(composeMulti(names))
	sum := sha1.Sum([]byte(source))
	limits := 0
	for _, g := range groups {
		limits += g.Limits
	}
	made := &Script{Name: "multi:" + k, Source: source, SHA1: hex.EncodeToString(sum[:]), Limits: limits}
	v, _ := multiScripts.LoadOrStore(k, made)
	return v.(*Script), true
}

// multiHead opens a multi script: what it is, and the frame its groups'
// blocks run in.
const multiHead = `-- Multi: the decisions of several requests, each for its own key by its
-- own limits, made together by one script, composed by internal/luascript
-- (docs/design/lua-composition.md): every request is charged when every
-- limit of every request admits it, none otherwise.
-- KEYS: each group's keys in turn, as its decision script declares them.
-- ARGV[1]: the number of groups (negative: a dry run, charging nothing,
-- replying as a denial does); then per group its argument count, its
-- key count, and its arguments as its decision script takes them (now,
-- cost, the TTL margin, each limit's state ID, header and parameters).
-- It replies each group's {remaining, retry after µs, reset after µs} per
-- limit in turn; or, having written nothing, RLCONVERT or RLTOOMANY.
--
-- Each group is a block that sees its own ARGV and KEYS, as its decision
-- script would, and runs every limit's load and decide, leaving its report
-- and commit behind as closures (decidedN); its own finish reports or
-- commits them all and writes its key's hash. Nothing is written until
-- every group has decided.
local A, K = ARGV, KEYS
local all = tonumber(A[1]) > 0
local finish = {}
local ao, ko = 2, 0
`

// composeMulti returns the multi script of groups, each the names of its
// limits' algorithms joined by "+".
func composeMulti(groups []string) string {
	var src strings.Builder
	src.WriteString(multiHead)
	for g, joined := range groups {
		names := strings.Split(joined, "+")
		c := newComposer(form{names: joined}, names, false, storeTable)
		fmt.Fprintf(&src, "-- Group %d: %s.\ndo\n", g+1, joined)
		src.WriteString("local argc, keyc = tonumber(A[ao]), tonumber(A[ao + 1])\n")
		src.WriteString("local ARGV = {unpack(A, ao + 2, ao + 1 + argc)}\n")
		src.WriteString("local KEYS = {unpack(K, ko + 1, ko + keyc)}\n")
		src.WriteString("ao, ko = ao + 2 + argc, ko + keyc\n")
		src.WriteString(prelude)
		src.WriteString(c.head(true))
		src.WriteString("local hset, httl = {}, 0\n")
		for _, l := range c.limits {
			fmt.Fprintf(&src, "local decided%d\ndo\n", l.n)
			src.WriteString(c.load(l) + c.decide(l))
			fmt.Fprintf(&src, "all = all and fits\ndecided%d = function(charge)\nif not charge then\n", l.n)
			src.WriteString(c.report(l))
			src.WriteString("return rem, retry, reset\nend\n")
			src.WriteString(c.commit(l))
			src.WriteString("return rem, 0, reset\nend\nend\n")
		}
		src.WriteString(c.fresh())
		src.WriteString(c.tooMany(c.take))
		fmt.Fprintf(&src, "finish[%d] = function(charge, out)\nlocal o = #out\n", g+1)
		for i, l := range c.limits {
			fmt.Fprintf(&src, "out[o + %d], out[o + %d], out[o + %d] = decided%d(charge)\n", 3*i+1, 3*i+2, 3*i+3, l.n)
		}
		src.WriteString("if charge then\n" + c.hsetMany() + "end\nend\nend\n")
	}
	src.WriteString("local out = {}\nfor g = 1, #finish do\n  finish[g](all, out)\nend\nreturn out\n")
	return src.String()
}
