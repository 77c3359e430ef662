package luascript

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// MaxGroups is the most groups (keys, each with its limits) one unit of a
// multi script decides: a request of more is decided otherwise by the
// store.
const MaxGroups = 32

// maxGroupLimits is the most limits of one group of a multi script: its
// closures are locals (closureLimits' without tables).
const maxGroupLimits = localLimits

// multiScripts caches the multi scripts, by their kinds.
var multiScripts sync.Map

// MultiKinds returns the multi script for groups whose limits are those
// of the given decision scripts (For's, plain), and the index of each
// script's kind in it (ARGV's kind of a group), or ok false when one
// cannot go in a multi script (not a plain decision, or more than 24
// limits).
//
// A multi script decides units, in order, each all-or-none: a unit is
// groups, each a key with its limits, charged when every limit of every
// group of the unit admits its cost, none otherwise. A unit decides on the
// state the units before it left. The script depends only on the set of
// group kinds (the algorithms of a group's limits), never on the units'
// number or order, so that a server caches few of them.
//
// KEYS are each group's keys in turn, as its decision script declares
// them. ARGV[1] is the number of units, negative for a dry run (nothing
// charged; every unit replies as a denial does); ARGV[2] the number m of
// shared arguments that follow ARGV[3]; ARGV[3] an instant in µs that the
// groups' instants are counted from (its base); ARGV[4…m+3]: each distinct
// tail of the groups' arguments (a decision script's ARGV[3…]: the TTL
// margin, then its limits' state IDs, headers and parameters), once
// however many groups share it. Then per unit its number of groups, and
// per group two arguments: its shape, "k r c n" (its kind's index k, from
// 1, in the order kinds returns; r, the place of its tail: its decision
// script's ARGV[i], i ≥ 3, is this script's ARGV[r + i]; its key count c;
// its cost n, its decision script's ARGV[2]), and its now as an offset
// from the base ("" for the server's clock: its decision script's ARGV[1]
// is the base plus it). The reply is per unit a code, 1
// admitted, 0 denied, -1 a state only a conversion script reads
// (RLCONVERT), -2 a key holding the most states (RLTOOMANY), followed
// when 0 or 1 by each group's {remaining, retry after, reset after} per
// limit. A unit that is denied reports for each limit its state for the
// request's cost.
func MultiKinds(groups ...*Script) (s *Script, kinds []int, ok bool) {
	return MultiKindsTo(nil, groups...)
}

// MultiKindsTo is MultiKinds appending the kinds to dst[:0]; when every
// group is of one kind, it allocates nothing but what dst lacks.
func MultiKindsTo(dst []int, groups ...*Script) (s *Script, kinds []int, ok bool) {
	one := true
	for _, g := range groups {
		if g.form.op != 0 || g.form.batch || g.form.convert || g.Limits > maxGroupLimits {
			return nil, nil, false
		}
		one = one && g.form.names == groups[0].form.names
	}
	kinds = dst[:0]
	if len(groups) == 0 {
		return nil, nil, false
	}
	if one {
		for range groups {
			kinds = append(kinds, 1)
		}
		return multiScript(groups[0].form.names, []string{groups[0].form.names}), kinds, true
	}
	var names []string
	for _, g := range groups {
		if !slices.Contains(names, g.form.names) {
			names = append(names, g.form.names)
		}
	}
	slices.Sort(names)
	for _, g := range groups {
		kinds = append(kinds, slices.Index(names, g.form.names)+1)
	}
	return multiScript(strings.Join(names, "|"), names), kinds, true
}

// multiScript returns the multi script of the kinds names, whose key is k,
// composed on first use.
func multiScript(k string, names []string) *Script {
	if s, ok := multiScripts.Load(k); ok {
		return s.(*Script)
	}
	source := foldReads(tidy(composeMulti(names)))
	sum := sha1.Sum([]byte(source))
	made := &Script{Name: "multi:" + k, Source: source, SHA1: hex.EncodeToString(sum[:])}
	v, _ := multiScripts.LoadOrStore(k, made)
	return v.(*Script)
}

// multiHead opens a multi script: what it is.
const multiHead = `-- Multi: units of requests, each unit several keys with their own
-- limits, decided in order, each unit all-or-none; composed by
-- internal/luascript (docs/design/lua-composition.md, luascript.MultiKinds).
-- KEYS: each group's keys in turn, as its decision script declares them.
-- ARGV[1]: the number of units (negative: a dry run, charging nothing);
-- ARGV[2]: m; ARGV[3]: the base the groups' instants count from; then m
-- arguments the groups share: each distinct tail of a group's arguments as
-- its decision script takes them (the TTL margin, each limit's state ID,
-- header and parameters), once. Then per unit its number of groups, and
-- per group its shape "k r c n": its kind k, r (its decision script's
-- ARGV[i], i >= 3, is A[r + i]), its key count c and its cost n; and its
-- now, an offset from the base ('' for the server's clock).
-- It replies per unit a code (1 admitted, 0 denied, -1 RLCONVERT, -2
-- RLTOOMANY) and, for 1 or 0, each group's {remaining, retry after µs,
-- reset after µs} per limit.
--
-- kind[k](o, ko, keyc, g, r, carg) decides group g of a unit, of kind
-- k, as its decision script would, its ARGV[1] being base + A[o + 1]
-- (none for '') and its ARGV[2] carg, its ARGV[i] for i >= 3
-- A[r + i], and its KEYS[i] K[ko + i], writing nothing: it runs every
-- limit's load and decide, leaving its report and commit behind as
-- closures, and returns whether all its limits admit and its finish,
-- which puts their reports in out from r0 + 1 (width[k] values) or
-- commits them all and writes the key's hash; or an error reply. A kind
-- of one limit whose body has a counter part decides its common case by
-- that alone, in the loop, with no closure: when the unit may still be
-- admitted, it charges the counter and puts its reply in out as charged,
-- and keeps in pend what to give back should a later group refuse the
-- unit.
--
-- num(s) is tonumber(s), remembered: the arguments repeat (each group's
-- counts, cost and parameters), and a table look-up costs a fraction of
-- the string's conversion; shapes[s] is a shape's {k, r, c, n, n's
-- text}, remembered (costs repeat too);
-- idx(i) is string.format('%d', i), the last one remembered (a window's
-- index repeats from group to group; not a table by index: some Luas,
-- miniredis's, grow a table's array part to an integer key).
-- An instant is not remembered (each differs): it is a short offset
-- from the base, quick to convert.
local A, K = ARGV, KEYS
local math, redis, string, type, tonumber = math, redis, string, type, tonumber -- locals: no global look-ups
local kind, width = {}, {}
local nums, shapes = {}, {}
local lidx, lstr = nil, nil -- the index idx gave last, and its text
local function num(s)
  local v = nums[s]
  if v == nil then
    v = tonumber(s)
    nums[s] = v
  end
  return v
end
local function idx(i)
  if i ~= lidx then
    lidx, lstr = i, string.format('%d', i)
  end
  return lstr
end
local base = tonumber(A[3])
local dry = false -- a dry run: nothing charged
`

// multiLoop runs the units; its "--@leans" line is where the lean kinds'
// reading goes (leanInline), which sets lean when it decided the group.
const multiLoop = `local units = num(A[1])
dry = units < 0
if dry then
  units = -units
end
local ao, ko = 4 + num(A[2]), 0
-- out: the reply, op its length, top the furthest a unit wrote in it;
-- fins: the finish and place in out of each group its kind's function
-- decided, of the unit at hand; pend: its lean groups' charges, given
-- back when the unit is refused, and their replies' places.
local out, op, top, fins, pend = {}, 0, 0, {}, {}
local pnow, pnowarg = 0, nil -- the last offset converted, and its instant
for u = 1, units do
  local n = num(A[ao])
  ao = ao + 1
  local all, failed, cp, nf, np = true, nil, op + 1, 0, 0
  op = cp
  for g = 1, n do
    local sh = shapes[A[ao]]
    if sh == nil then
      local k, r, c, n = string.match(A[ao], '^(%d+) (%d+) (%d+) (%d+)$')
      sh = {tonumber(k), tonumber(r), tonumber(c), tonumber(n), n}
      shapes[A[ao]] = sh
    end
    local keyc = sh[3]
    if not failed then
      local k, r = sh[1], sh[2]
      local lean, fits = false, nil
--@leans
      if lean then
        all = all and fits
      else
        local fin
        fits, fin = kind[k](ao, ko, keyc, g, r, sh[5])
        if type(fits) == 'table' then
          failed = fits
        else
          all = all and fits
          fins[nf + 1], fins[nf + 2] = fin, op
          nf, op = nf + 2, op + width[k]
        end
      end
    end
    ao, ko = ao + 2, ko + keyc
  end
  local charge = all and not dry and not failed
  if not charge then
    for i = 1, np, 4 do
      redis.call('HINCRBY', pend[i], pend[i + 1], -pend[i + 2]) -- given back
      out[pend[i + 3]] = out[pend[i + 3]] + pend[i + 2] -- as the state stands: only the remaining differs
    end
  end
  if op > top then
    top = op
  end
  if failed then
    out[cp] = string.sub(failed.err or '', 1, 9) == 'RLCONVERT' and -1 or -2
    op = cp
  else
    out[cp] = charge and 1 or 0
    for i = 1, nf, 2 do
      fins[i](charge, out, fins[i + 1])
    end
  end
end
for i = op + 1, top do
  out[i] = nil -- a failed unit's reports
end
return out
`

// leanInline returns the multi loop's reading of a group of lean kind k
// (one limit whose body has a --@counter part): that part, in the loop,
// with no call of the kind's function. When it decided (lean) and charged
// (it fits and every group of the unit before it did, outside a dry run),
// its reply goes into out as charged and its charge into pend, given back
// when a later group refuses the unit (then the reply's remaining is the
// state's as it stands). Its arguments and keys are the group's, as a
// kind's body reads them (inPlace), o being ao; an empty offset is the
// server's clock. The groups of a unit share their instant: an offset is
// converted once.
func leanInline(k int, part string) string {
	return fmt.Sprintf(`if k == %d then
  local o = ao
  local now, cost = ARGV[1], sh[4]
  if now == pnowarg then
    now = pnow
  elseif now == '' then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  else
    pnowarg = now
    now = base + tonumber(now)
    pnow = now
  end
  local peek = cost == 0
  local hkey, charge, costarg, charged, cfield, rem, ends = KEYS[1], all and not dry, sh[5], false
`, k) + indentLines("do\n"+indentLines(part, "  ")+"end\n", "  ") + `  if lean then
    out[op + 1], out[op + 2], out[op + 3] = rem, fits and 0 or ends, ends
    if charged and g < n then
      pend[np + 1], pend[np + 2], pend[np + 3], pend[np + 4] = hkey, cfield, cost, op + 1
      np = np + 4
    end
    op = op + 3
  end
end
`
}

// numHit writes a lean part's num(x) as a table look-up first: a call
// of num for each argument costs more than the look-up that mostly finds
// it.
var numHit = regexp.MustCompile(`\bnum\(([A-Za-z_]\w*(?:\[[^\]()]*\])?)\)`)

// idxHit is numHit for idx(x): the last index's text, without a call.
var idxHit = regexp.MustCompile(`\bidx\(([A-Za-z_]\w*)\)`)

// multiPrelude is the prelude of a group of a multi script: its now is
// the base plus its offset, none for an empty offset (the server's clock).
var multiPrelude = func() string {
	const own = "local now = tonumber(ARGV[1])\n"
	if !strings.HasPrefix(prelude[strings.Index(prelude, "local now"):], own) {
		panic("luascript: the prelude does not open with " + own)
	}
	return strings.Replace(prelude, own, "local now = A[o + 1]\nnow = now ~= '' and base + tonumber(now) or nil\n", 1)
}()

// inPlace returns a group's decision text reading its arguments and keys
// where they are in the multi script's own ARGV and KEYS (A and K): its
// ARGV[1] is A[o + 1], its ARGV[2] (its cost, in its shape) carg, its other ARGV[i] (the
// tail that groups share) A[r + i], its KEYS[i] K[ko + i], and #KEYS
// keyc. No table is made per group to hold them. Its arguments' numbers
// are num's.
func inPlace(text string) string {
	text = strings.ReplaceAll(ownArg.ReplaceAllString(text, "A[o + $1]"), "A[o + 2]", "carg")
	return strings.NewReplacer("#KEYS", "keyc", "tonumber(carg)", "num(carg)", "tonumber(A[", "num(A[", "tonumber(ARGV[", "num(A[r + ", "ARGV[", "A[r + ", "KEYS[", "K[ko + ").Replace(text)
}

// ownArg finds a group's references to its own arguments, ARGV[1] and
// ARGV[2] (its now and cost); the others are the tail it shares.
var ownArg = regexp.MustCompile(`ARGV\[([12])\]`)

// composeMulti returns the multi script of group kinds, each the names
// of its limits' algorithms joined by "+".
func composeMulti(kinds []string) string {
	var src, leans strings.Builder
	src.WriteString(multiHead)
	for k, joined := range kinds {
		names := strings.Split(joined, "+")
		style := storeTable // the limits' fields join hset, written by finish
		if len(names) == 1 {
			style = storeOne // its own HSET and PEXPIRE, in its commit
		}
		c := newComposer(form{names: joined}, names, false, style)
		fmt.Fprintf(&src, "-- Kind %d: %s.\nwidth[%d] = %d\nkind[%d] = function(o, ko, keyc, g, r, carg)\n", k+1, joined, k+1, 3*len(names), k+1)
		var body strings.Builder
		body.WriteString(multiPrelude)
		if len(c.limits) == 1 && c.limits[0].b.counter != "" && style == storeOne {
			lean := numHit.ReplaceAllString(inPlace(c.limits[0].sub(leanInline(k+1, c.limits[0].b.counter))), "(nums[$1] or num($1))")
			leans.WriteString(idxHit.ReplaceAllString(lean, "($1 == lidx and lstr or idx($1))"))
		}
		body.WriteString(c.head(true))
		body.WriteString("local all = true\n")
		if style == storeTable {
			body.WriteString("local hset, httl = {}, 0\n")
		}
		for _, l := range c.limits {
			fmt.Fprintf(&body, "local decided%d\ndo\n", l.n)
			body.WriteString(c.load(l) + c.decide(l))
			fmt.Fprintf(&body, "all = all and fits\ndecided%d = function(charge)\nif not charge then\n", l.n)
			body.WriteString(c.report(l))
			body.WriteString("return rem, retry, reset\nend\n")
			body.WriteString(c.commit(l))
			body.WriteString("return rem, 0, reset\nend\nend\n")
		}
		body.WriteString(c.fresh())
		body.WriteString(c.tooMany(c.take))
		body.WriteString("return all, function(charge, out, r0)\n")
		for i, l := range c.limits {
			fmt.Fprintf(&body, "out[r0 + %d], out[r0 + %d], out[r0 + %d] = decided%d(charge)\n", 3*i+1, 3*i+2, 3*i+3, l.n)
		}
		if style == storeTable {
			body.WriteString("if charge then\n" + c.hsetMany() + "end\n")
		}
		body.WriteString("end\n")
		src.WriteString(inPlace(body.String()))
		src.WriteString("end\n")
	}
	src.WriteString(strings.Replace(multiLoop, "--@leans\n", indentLines(leans.String(), "      "), 1))
	return src.String()
}
