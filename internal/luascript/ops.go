package luascript

import (
	"fmt"
	"strings"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// Op is an operation of the booking scripts, besides the decision
// scripts' Take and Peek (docs/design/scheduling.md §4).
type Op uint8

const (
	// OpBook books ARGV[2] units at the earliest instant every limit
	// admits them, when that instant is at most maxDelay µs from now
	// (the argument after the limits'). The argument after maxDelay is a
	// nonce: a state that has no generation yet gets ";<nonce>" (before
	// its header's colon, hash.lua's shdr; after a sorted set's header
	// member, set.lua), which every later write keeps. It replies strings:
	// "1" (booked) or "0", the instant, each limit's remaining, retry
	// after and reset after, then each limit's value before and after the
	// booking ("" when absent, or for a sliding log, which is given back
	// by its Unused instead; the value before with the generation the
	// booking gave it) and the generation of the state it charged.
	OpBook Op = iota + 1
	// OpRefund gives back up to ARGV[2] units to every limit, and replies
	// each limit's remaining, retry after (for a cost of 1) and reset
	// after, as integers.
	OpRefund
	// OpCancel gives back a booking of ARGV[2] units due at the instant
	// after the limits' arguments, followed by each limit's values before
	// and after the booking and its generation (as OpBook replied them): a
	// limit whose state is of another generation (born again since: a
	// Reset, an expiry), or, in the conversion form, written under other
	// parameters or by another kind, gets nothing; one whose state is
	// still the one after gets the one before back; any other gets its
	// Unused refunded. Nothing once the booking is due. It replies what
	// each limit gave back, as integers.
	OpCancel
	// OpUndo gives back a booking as a Reservation's Refund does, with
	// OpCancel's arguments: before the booking is due, as OpCancel; once
	// due, a limit whose state is still the one after gets the one before
	// back, and any other gets what its --@undo part says (Go: the
	// algorithm's Undo). It replies what each limit gave back, as
	// integers.
	OpUndo
	// OpSettle makes a booking's cost another (a Reservation's Settle),
	// every limit deciding for a cost of 1 (ARGV[2] is "1"). Its arguments
	// after the limits' are the booking's instant, its cost, the cost to
	// settle to, then each limit's values before and after and its
	// generation (as OpCancel's). Below the cost, a limit whose state is
	// of the booking's generation and its own kind and parameters gets
	// the difference back as OpUndo gives (a partial undo: exact while
	// its state is the one after); the rest get nothing. Above it, every
	// limit owes the difference (its --@owe part; Go:
	// algorithm.Settler.Owe) in its state as it is, one made if it has
	// none, except a state of another kind or parameters that reads full.
	// It replies strings, per limit the value after the settle that an
	// exact undo may still compare ("" when none may) and the generation
	// the booking still charges ("" when it charged another). It exists
	// only for limits whose bodies all have an --@owe part.
	OpSettle
)

func (op Op) String() string {
	switch op {
	case OpBook:
		return "book"
	case OpRefund:
		return "refund"
	case OpCancel:
		return "cancel"
	case OpUndo:
		return "undo"
	case OpSettle:
		return "settle"
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// ForOp returns the plain script of op for the limits, in order, and
// their arguments (as For's); the caller appends op's own (see Op). It
// returns an error wrapping store.ErrAlgorithmUnsupported when an
// algorithm has no part for op.
func ForOp(op Op, limits ...Limit) (*Script, []string, error) {
	if op < OpBook || op > OpSettle {
		return nil, nil, fmt.Errorf("%w: %v", store.ErrAlgorithmUnsupported, op)
	}
	names, params, err := check(limits)
	if err != nil {
		return nil, nil, err
	}
	for name := range strings.SplitSeq(names, "+") {
		b, _ := bodyNamed(name)
		if b.plain.book == "" || b.plain.refund == "" {
			return nil, nil, fmt.Errorf("%w: %q has no Lua parts to book and refund", store.ErrAlgorithmUnsupported, name)
		}
		if op == OpSettle && b.plain.owe == "" {
			return nil, nil, fmt.Errorf("%w: %q has no Lua part to settle (--@owe)", store.ErrAlgorithmUnsupported, name)
		}
	}
	return scriptOf(form{op: op, names: names}), params, nil
}

// composeOp puts together op's script for limits of the named algorithms.
// Every limit's load and decide stages run first (for a cost of 1 in a
// refund), then, for a booking, its report. The op's own parts
// (earliest, book, refund, unused) are functions of a few arguments
// (opPart), which the op calls: the search of a booking's instant calls
// every limit's earliest in each round; then each limit books, refunds or
// gives back its unused units (its end).
//
// A few limits (at most nestLimits, each with the default earliest, which
// reads only the limit's report) nest as the decision script's do: each
// limit's block opens inside the one before, the op's search runs in the
// innermost, and each block ends with the limit's end, the innermost
// first, its parts written there in a block that binds their arguments.
// No closure is made: each costs a call its allocation and an upvalue
// per local it reads (a booking of one limit took about a quarter less
// Redis time without them). More limits run each in a block of its own
// that leaves its parts behind as closures, and the ends follow.
func composeOp(f form, names []string) string {
	c := newOpComposer(f, names)
	c.src.WriteString(describe(f, names))
	c.src.WriteString(prelude)
	lean := c.bookLean()
	c.src.WriteString(lean)
	body := len(c.src.String())
	c.src.WriteString(c.head(true))
	c.opHead()
	for _, l := range c.limits {
		c.limit(l)
	}
	c.src.WriteString(c.fresh())
	if f.op == OpBook {
		c.search()
	}
	c.ends()
	c.src.WriteString(c.hsetMany())
	c.src.WriteString("return out\n")
	src := c.src.String()
	if lean != "" {
		// The field was read before the lean part: not again.
		l := c.limits[0]
		src = src[:body] + strings.Replace(src[body:], l.sub(hgetLine), "local state = lstate\n", 1)
	}
	return src
}

// bookLean returns the opening of a booking of one limit whose body has a
// lean part (plainLean's, for a booking): the field read, and when it
// holds a state of the limit's own header (maybe with a generation), the
// lean part run on it. In its common case the booking is made at now, as
// the search would make it (a cost that fits needs no later instant), and
// written and replied as the whole script would: the state given a
// generation when it has none (giveGen), its value before and after, and
// its generation. A cost that does not fit, with no delay allowed, is
// replied as the search's refusal, writing nothing. Anything else takes
// the whole script on the field read (lstate). "" for any other script.
func (c *opComposer) bookLean() string {
	if c.op != OpBook || c.convert || len(c.limits) != 1 {
		return ""
	}
	l := c.limits[0]
	if l.b.lean == "" || l.log() {
		return ""
	}
	return leanOpening(l, fmt.Sprintf(`if lean and fits then
  local shdr, raw = lhdr, lstate
  if lhdr == ARGV[$hdr] then
    shdr = string.sub(lhdr, 1, -2) .. ';' .. ARGV[%d] .. ':'
    raw = shdr .. string.sub(lstate, at)
  end
  local post = shdr .. value
  redis.call('HSET', KEYS[1], ARGV[$id], post)
  return {'1', %s, %s, '0', %s, raw, post, string.sub(shdr, #ARGV[$hdr], -2)}
elseif lean and ARGV[%d] == '0' then
  return {'0', %s, %s, %s, %s, '', '', ''}
end
`, c.opa+1, num("now"), num("c1"), num("c3"), c.opa, num("now + r2"), num("r1"), num("r2"), num("r3")))
}

// opComposer composes an op's script: the decision's stages, and the
// op's parts of each limit, defined as closures or, nested, written
// where they are called.
type opComposer struct {
	*composer
	op Op
	// nested: the limits' blocks nest (at most nestLimits, none with its
	// own earliest); tables: past localLimits limits, each limit's
	// closures are in tables (Lua allows a function 200 locals, 6 per
	// limit here), else locals.
	nested, tables bool
	// opa is the ARGV index of the first of the op's own arguments,
	// after every limit's.
	opa   int
	parts []map[string]opPart
	src   strings.Builder
}

// newOpComposer returns the composer of op's script for the named
// algorithms' limits.
func newOpComposer(f form, names []string) *opComposer {
	c := &opComposer{composer: newComposer(f, names, false, storeTable), op: f.op}
	c.take = "false" // a refund, a cancel or an undo adds no field
	if f.op == OpBook {
		c.take = "true"
	}
	c.nested = len(names) <= nestLimits && f.op != OpSettle // a settle is rare: closures
	for _, l := range c.limits {
		if l.b.earliest != "" {
			c.nested = false
		}
	}
	c.tables = len(names) > localLimits
	last := c.limits[len(c.limits)-1]
	c.opa = last.argv + fixedArgs + last.k.params + 1
	c.parts = make([]map[string]opPart, len(names))
	return c
}

// opHead writes the op's locals: the cost booked (bcost), a refund's
// units (refundn, deciding for a cost of 1), the HSET's table, the
// reply with its slots made at once (a nested op fills them from the
// last limit's on), and each limit's closures, report and state as read
// (nested, a limit's report and its state as read are locals of the
// script's).
func (c *opComposer) opHead() {
	src := &c.src
	src.WriteString("local bcost = cost\n")
	// keyed: a refund by key (the --@refund parts give nothing back of a
	// booking not yet due); a cancel's or an undo's gives back its own.
	fmt.Fprintf(src, "local keyed = %v\n", c.op == OpRefund)
	if c.op == OpBook {
		// The generation a state that has none gets (the nonce).
		fmt.Fprintf(src, "local ngen = ';' .. ARGV[%d]\n", c.opa+1)
	}
	if c.op == OpRefund {
		src.WriteString("local refundn = cost\ncost = 1\n")
	}
	src.WriteString("local hset, httl = {}, 0\n")
	switch c.op {
	case OpBook:
		fmt.Fprintf(src, "local out = {%s}\nlocal bact = now\n", slots("''", 2+6*len(c.limits)))
	case OpRefund:
		fmt.Fprintf(src, "local out = {%s}\n", slots("0", 3*len(c.limits)))
	case OpCancel, OpUndo:
		fmt.Fprintf(src, "local out = {%s}\nlocal cact = tonumber(ARGV[%d])\n", slots("0", len(c.limits)), c.opa)
	case OpSettle:
		// sn: the units owed (above 0) or given back (below).
		fmt.Fprintf(src, "local out = {%s}\nlocal cact = tonumber(ARGV[%d])\nbcost = tonumber(ARGV[%d])\nlocal sn = tonumber(ARGV[%d]) - bcost\n",
			slots("''", 2*len(c.limits)), c.opa, c.opa+1, c.opa+2)
	}
	if c.tables && c.op == OpSettle {
		src.WriteString("local rep, refund, unused, undo, owe, raw = {}, {}, {}, {}, {}, {}\n")
	} else if c.tables {
		src.WriteString("local rep, earliest, book, refund, unused, undo, raw = {}, {}, {}, {}, {}, {}, {}\n")
	}
	if !c.nested {
		// The generations of the states read: one table, not a local per
		// limit (Lua allows a function 200 locals).
		src.WriteString("local rgen = {}\n")
		return
	}
	for _, l := range c.limits {
		if c.op != OpRefund {
			fmt.Fprintf(src, "local raw%d, rgen%d\n", l.n, l.n)
		}
		if c.op == OpBook {
			fmt.Fprintf(src, "local %s, %s, %s\n", c.rep(l.n, 1), c.rep(l.n, 2), c.rep(l.n, 3))
		}
	}
}

// slot names limit n's closure or value name: a local, or in tables
// (rgen, unless nested, always).
func (c *opComposer) slot(name string, n int) string {
	if c.tables || name == "rgen" && !c.nested {
		return fmt.Sprintf("%s[%d]", name, n)
	}
	return fmt.Sprintf("%s%d", name, n)
}

// rep names the k-th number of limit n's report.
func (c *opComposer) rep(n, k int) string {
	if c.nested {
		return fmt.Sprintf("rep%d_%d", n, k)
	}
	return fmt.Sprintf("%s[%d]", c.slot("rep", n), k)
}

// define makes limit n's part name: a closure, or, nested, a part that
// call writes where it is called.
func (c *opComposer) define(n int, name string, p opPart) {
	c.parts[n-1][name] = p
	if !c.nested {
		fmt.Fprintf(&c.src, "%s = function(%s)\n%sreturn %s\nend\n", c.slot(name, n), p.params, p.body, p.results)
	}
}

// call returns the call of limit n's part name with args, its results
// assigned to into (which must not be a name the part declares).
func (c *opComposer) call(n int, name, args, into string) string {
	if !c.nested {
		return fmt.Sprintf("%s = %s(%s)\n", into, c.slot(name, n), args)
	}
	return c.parts[n-1][name].inline(args, into)
}

// limit writes a limit's block: its load and decide (and its state as
// read, which a cancel compares), then the op's parts that op calls.
// Nested, the block stays open until the limit's end.
func (c *opComposer) limit(l limitAt) {
	c.parts[l.n-1] = map[string]opPart{}
	if !c.nested && !c.tables {
		switch c.op {
		case OpUndo:
			// Its own parts only: Lua allows a function 200 locals.
			fmt.Fprintf(&c.src, "local rep%d, refund%d, unused%d, undo%d, raw%d\n", l.n, l.n, l.n, l.n, l.n)
		case OpSettle:
			fmt.Fprintf(&c.src, "local rep%d, refund%d, unused%d, undo%d, owe%d, raw%d\n", l.n, l.n, l.n, l.n, l.n, l.n)
		default:
			fmt.Fprintf(&c.src, "local rep%d, earliest%d, book%d, refund%d, unused%d, raw%d\n", l.n, l.n, l.n, l.n, l.n, l.n)
		}
	}
	c.src.WriteString("do\n")
	c.src.WriteString(c.load(l))
	if c.op == OpBook && !l.log() {
		c.src.WriteString(c.giveGen(l))
	}
	c.src.WriteString(c.decide(l))
	if c.op == OpBook && l.log() {
		c.src.WriteString(c.giveGen(l)) // once the decision read the set: one it refuses stays as it was
	}
	if !l.log() && c.op != OpRefund {
		fmt.Fprintf(&c.src, "%s = state or ''\n", c.slot("raw", l.n))
	}
	if c.op != OpRefund {
		// The state's generation, as the load read it (or giveGen gave it).
		if l.log() {
			fmt.Fprintf(&c.src, "%s = string.sub(hdr, #ARGV[%d] + 1)\n", c.slot("rgen", l.n), l.argv+2)
		} else {
			fmt.Fprintf(&c.src, "%s = string.sub(shdr, #ARGV[%d], -2)\n", c.slot("rgen", l.n), l.argv+2)
		}
	}
	if c.op == OpBook {
		c.defineBook(l)
	}
	if c.op == OpSettle {
		c.defineOwe(l)
	}
	if c.op != OpBook {
		c.defineRefund(l)
	}
	if c.op == OpUndo || c.op == OpSettle {
		c.defineUndo(l)
	}
	if c.op == OpCancel || c.op == OpUndo || c.op == OpSettle {
		c.defineUnused(l)
	}
	if !c.nested {
		c.src.WriteString("end\n")
	}
}

// giveGen returns a booking's lines that give the limit's state a
// generation when it has none (ngen, the booking's nonce): the hash's
// store writes it, and the state as read, which the booking replies as
// its value before and an exact undo puts back, gets it too before its
// header's colon (at moves past it), so that the state put back is still
// of the generation later bookings charged; a sorted set's header member
// is replaced by one that ends with it once the decision has read the
// set (which reads head[1] as the header) and before anything is written
// (the body writes hdr only on a set it makes or converts): a set the
// decision refuses stays as it was. A booking not made leaves the set
// with it: it changes no count, and the set is of the same state.
func (c *opComposer) giveGen(l limitAt) string {
	if !l.log() {
		return l.sub("if shdr == ARGV[$hdr] then\n  shdr = string.sub(shdr, 1, -2) .. ngen .. ':'\n" +
			"  if state then\n    state = string.sub(state, 1, at - 2) .. ngen .. string.sub(state, at - 1)\n    at = at + #ngen\n  end\nend\n")
	}
	replace := "state"
	if c.convert {
		replace = "state and not old0" // the body replaces a converted set's header itself
	}
	return l.sub(fmt.Sprintf("if hdr == ARGV[$hdr] then\n  hdr = hdr .. ngen\n  if %s then\n    redis.call('ZREM', zkey, head[1])\n    head[1] = hdr\n    redis.call('ZADD', zkey, '-inf', hdr)\n  end\nend\n", replace))
}

// defineBook writes a booking's report of the limit, in a block (its
// locals must not hide the body's from the parts below), and defines its
// earliest and book parts: book is the body's --@book part, then (for a
// state in the hash) the store, and the value after, which a cancel
// compares.
func (c *opComposer) defineBook(l limitAt) {
	if c.nested {
		fmt.Fprintf(&c.src, "do\n%s\n%s, %s, %s = rem, retry, reset\nend\n", c.report(l), c.rep(l.n, 1), c.rep(l.n, 2), c.rep(l.n, 3))
	} else {
		fmt.Fprintf(&c.src, "do\n%s\n%s = {rem, retry, reset}\nend\n", c.report(l), c.slot("rep", l.n))
	}
	earliest := l.b.earliest
	if earliest == "" {
		earliest = fmt.Sprintf("local act = math.max(from, now + %s)\n", c.rep(l.n, 2))
	}
	c.define(l.n, "earliest", opPart{"from", l.sub(earliest) + "\n", "act"})
	if l.log() {
		c.define(l.n, "book", opPart{"act", l.sub(l.b.book) + "\n", "rem, reset, ''"})
		return
	}
	// A booking on another kind's state (a conversion script's) replies
	// no value after it: its cancel gives back its unused units rather than
	// put back a state of another kind (Go: not ExactUndo).
	after := "shdr .. value"
	if c.convert {
		after = "(other and '' or " + after + ")"
	}
	c.define(l.n, "book", opPart{"act", l.sub(l.b.book) + "\n" + l.sub(c.storeOf(l)) + "\n", "rem, reset, " + after})
}

// defineRefund defines the limit's refund part: the body's --@refund
// part, then (for a state in the hash) the store when it set a value. A
// state of another kind (load.lua's carried, or the log's) gives nothing
// back and is not written: the limit reports it as it reads it (Go: the
// memory store's Refund and Cancel).
//
// It returns the limit's report and gave, how many it gave back (Go: the
// algorithm's Refund and Undo); a body's part that does not say is taken
// to give n when it writes a value (a sorted set's: always).
func (c *opComposer) defineRefund(l limitAt) {
	body := l.sub(l.b.refund) + "\n"
	switch {
	case strings.Contains(l.b.refund, "gave"):
	case l.log():
		body = "local gave = n\n" + body
	default:
		body += "local gave = 0\nif value then\n  gave = n\nend\n" // no write: nothing given
	}
	if !l.log() {
		body += fmt.Sprintf("if value then\n%s\nend\n", l.sub(c.storeOf(l)))
	}
	if c.convert {
		body = "local crem, cretry, creset, cgave\nif carried > 0 or other or old0 then\n" + c.report(l) + "\ncrem, cretry, creset, cgave = rem, retry, reset, 0\nelse\n" +
			body + "crem, cretry, creset, cgave = rem, retry, reset, gave\nend\n"
		c.define(l.n, "refund", opPart{"n", body, "crem, cretry, creset, cgave"})
		return
	}
	c.define(l.n, "refund", opPart{"n", body, "rem, retry, reset, gave"})
}

// defineUnused defines the limit's unused part for a cancel: the body's
// --@unused part (none: nothing to give), nothing for a state of another
// kind.
func (c *opComposer) defineUnused(l limitAt) {
	unused := l.b.unused
	if unused == "" {
		unused = "local give = 0\n"
	}
	if !c.convert {
		c.define(l.n, "unused", opPart{"act, bcost", l.sub(unused) + "\n", "give"})
		return
	}
	unused = "local cgive = 0\nif carried == 0 and not other and not old0 then\n" + unused + "\ncgive = give\nend\n"
	c.define(l.n, "unused", opPart{"act, bcost", l.sub(unused) + "\n", "cgive"})
}

// defineUndo defines the limit's undo part for a refund through its
// handle once the booking is due: the body's --@undo part (none: nothing
// to give), nothing for a state of another kind or other parameters. Its
// arguments are the booking's instant, its cost (ucost) and how many of
// it to give back (bcost: all of it but in a settle's partial undo). It
// returns give, which the refund part then gives back, and took, what the
// part gave back itself (a log's admission taken from the middle).
func (c *opComposer) defineUndo(l limitAt) {
	undo := l.b.undo
	if undo == "" {
		undo = "local give = 0\n"
	}
	undo = "local took = 0\n" + undo
	if !c.convert {
		c.define(l.n, "undo", opPart{"act, ucost, bcost", l.sub(undo) + "\n", "give, took"})
		return
	}
	undo = "local ugive, utook = 0, 0\nif carried == 0 and not other and not old0 then\n" + undo + "\nugive, utook = give, took\nend\n"
	c.define(l.n, "undo", opPart{"act, ucost, bcost", l.sub(undo) + "\n", "ugive, utook"})
}

// num formats a Lua number x as a booking's reply string: a whole number
// of at most 53 bits by '%d', which costs Redis a fraction of '%.0f'
// (libc's floating-point printing), anything else rounded by '%.0f'.
func num(x string) string {
	return fmt.Sprintf("((%[1]s) %% 1 == 0 and (%[1]s) > -9007199254740992 and (%[1]s) < 9007199254740992 and string.format('%%d', %[1]s) or string.format('%%.0f', %[1]s))", x)
}

// search writes a booking's search, that of algorithm.EarliestAll: the
// latest of the limits' earliest instants, again until none moves it, at
// most algorithm.MaxBookingRounds rounds and until now + maxDelay. A
// booking that is not made replies each limit's report; nothing has been
// written.
func (c *opComposer) search() {
	src := &c.src
	src.WriteString(c.tooMany("true"))
	fmt.Fprintf(src, "local latest = now + tonumber(ARGV[%d])\nlocal act, ok, ea = now, false, nil\nfor _ = 1, %d do\n  local nxt = act\n", c.opa, algorithm.MaxBookingRounds)
	for _, l := range c.limits {
		fmt.Fprintf(src, "%s  nxt = math.max(nxt, ea)\n", c.call(l.n, "earliest", "act", "ea"))
	}
	src.WriteString("  if nxt > latest then\n    act = nxt\n    break\n  end\n  if nxt == act then\n    ok = true\n    break\n  end\n  act = nxt\nend\n")
	src.WriteString("out[2] = " + num("act") + "\nif not ok then\nout[1] = '0'\n")
	for i, l := range c.limits {
		fmt.Fprintf(src, "out[%d], out[%d], out[%d] = %s, %s, %s\n", 3*i+3, 3*i+4, 3*i+5, num(c.rep(l.n, 1)), num(c.rep(l.n, 2)), num(c.rep(l.n, 3)))
	}
	src.WriteString("return out\nend\nout[1] = '1'\nbact = act\n")
}

// ends writes every limit's end: nested, the innermost first, each
// closing its limit's block.
func (c *opComposer) ends() {
	if !c.nested {
		for _, l := range c.limits {
			c.end(l)
		}
		return
	}
	for i := len(c.limits) - 1; i >= 0; i-- {
		c.end(c.limits[i])
		c.src.WriteString("end\n")
	}
}

// end writes the limit's end: its booking, its refund, or its share of a
// cancel.
func (c *opComposer) end(l limitAt) {
	i := l.n - 1
	switch c.op {
	case OpBook:
		base := 3 + 3*len(c.limits) + 3*i
		fmt.Fprintf(&c.src, "do\nlocal brem, breset, bpost\n%sout[%d], out[%d], out[%d] = %s, %s, %s\nout[%d], out[%d], out[%d] = %s or '', bpost, %s\nend\n",
			c.call(l.n, "book", "bact", "brem, breset, bpost"), 3*i+3, 3*i+4, 3*i+5, num("brem"), num("bact - now"), num("breset"), base, base+1, base+2, c.slot("raw", l.n), c.slot("rgen", l.n))
	case OpRefund:
		c.src.WriteString(c.call(l.n, "refund", "refundn", fmt.Sprintf("out[%d], out[%d], out[%d]", 3*i+1, 3*i+2, 3*i+3)))
	case OpCancel, OpUndo:
		c.cancelEnd(l)
	case OpSettle:
		c.settleEnd(l)
	}
}

// defineOwe writes the limit's report for a cost of 1 and whether its
// state is its own (not carried from another kind, nor written under
// other parameters: Go's sameTag), and defines its owe part: the body's
// --@owe part, then (for a state in the hash) the store.
func (c *opComposer) defineOwe(l limitAt) {
	own := "true"
	if c.convert {
		own = "carried == 0 and not other and not old0"
	}
	fmt.Fprintf(&c.src, "do\n%s\n%s = {rem, %s}\nend\n", c.report(l), c.slot("rep", l.n), own)
	body := l.sub(l.b.owe) + "\n"
	if !l.log() {
		body += l.sub(c.storeOf(l)) + "\n"
	}
	c.define(l.n, "owe", opPart{"act, n", body, "true"})
}

// settleEnd writes the limit's share of a settle (see OpSettle; Go: the
// memory store's Settle): its value after and generation into out.
func (c *opComposer) settleEnd(l limitAt) {
	src := &c.src
	post, bgen := c.opa+4+3*(l.n-1), c.opa+5+3*(l.n-1)
	rep := c.slot("rep", l.n)
	fmt.Fprintf(src, "do\nlocal sgen, spost = ARGV[%d], ''\n", bgen)
	fmt.Fprintf(src, "local mine = ARGV[%d] ~= '' and %s == ARGV[%d] and %s[2]\n", bgen, c.slot("rgen", l.n), bgen, rep)
	if l.log() {
		src.WriteString("local exact = false\n") // a log's undo finds its entry
	} else {
		fmt.Fprintf(src, "local exact = mine and ARGV[%d] ~= '' and %s == ARGV[%d]\n", post, c.slot("raw", l.n), post)
	}
	// Up: owed into the state as it is; nothing of it comes back to a
	// state not the booking's; a state of another kind or parameters that
	// reads full is left as it is.
	fmt.Fprintf(src, "if sn > 0 then\nif not mine then\nsgen = ''\nend\nif %s[2] or %s[1] > 0 then\nlocal hn, odone = #hset, false\n%sif exact and #hset > hn then\nspost = hset[#hset]\nend\nend\n",
		rep, rep, c.call(l.n, "owe", "cact, sn", "odone"))
	// Down: a partial undo of -sn units (Go: the algorithm's Undo).
	fmt.Fprintf(src, "elseif mine then\nlocal give, gtook, gr1, gr2, gr3, rgave = 0, 0, 0, 0, 0, 0\nif exact then\ngive = -sn\nelseif cact > now then\n%sgive = math.min(give, -sn)\nelse\n%send\n",
		c.call(l.n, "unused", "cact, bcost", "give"), c.call(l.n, "undo", "cact, bcost, -sn", "give, gtook"))
	fmt.Fprintf(src, "local hn = #hset\nif give > 0 then\n%send\nif exact then\nspost = ARGV[%d]\nif #hset > hn then\nspost = hset[#hset]\nend\nend\nend\n", c.call(l.n, "refund", "give", "gr1, gr2, gr3, rgave"), post)
	fmt.Fprintf(src, "out[%d], out[%d] = spost, sgen\nend\n", 2*l.n-1, 2*l.n)
}

// cancelEnd writes the limit's share of a cancel, before the booking is
// due, or of an undo, due or not: a state still the one the booking left
// gets the one before back, exactly; any other gives back its unused
// units (before the booking is due) or its undo part's (after).
func (c *opComposer) cancelEnd(l limitAt) {
	src := &c.src
	idArg := l.argv + 1
	pre, post, bgen := c.opa+1+3*(l.n-1), c.opa+2+3*(l.n-1), c.opa+3+3*(l.n-1)
	if c.op == OpCancel {
		src.WriteString("if cact > now")
	} else {
		src.WriteString("if true") // due or not: an undo gives back either way
	}
	// Nothing into a state of another generation: born again since.
	fmt.Fprintf(src, " and ARGV[%d] ~= '' and %s == ARGV[%d] then\n", bgen, c.slot("rgen", l.n), bgen)
	if l.log() {
		src.WriteString("  do\n")
	} else {
		fmt.Fprintf(src, "  if ARGV[%d] ~= '' and %s == ARGV[%d] then\n", post, c.slot("raw", l.n), post)
		// What it gives back is what a refund of the cost gives the state
		// the booking left (Go: the algorithm's exact Undo), whose write
		// is dropped from hset: the state before is put back instead.
		fmt.Fprintf(src, "    local hn, er1, er2, er3, egave = #hset, 0, 0, 0, 0\n%s    for i = #hset, hn + 1, -1 do\n      hset[i] = nil\n    end\n", c.call(l.n, "refund", "bcost", "er1, er2, er3, egave"))
		fmt.Fprintf(src, "    if ARGV[%d] == '' then\n      redis.call('HDEL', hkey, ARGV[%d])\n    else\n      redis.call('HSET', hkey, ARGV[%d], ARGV[%d])\n    end\n    out[%d] = egave\n  else\n", pre, idArg, idArg, pre, l.n)
	}
	give := c.call(l.n, "unused", "cact, bcost", "given")
	if c.op == OpUndo {
		give = "if cact > now then\n" + give + "else\n" + c.call(l.n, "undo", "cact, bcost, bcost", "given, gtook") + "end\n"
	}
	fmt.Fprintf(src, "local given, gtook, gr1, gr2, gr3, rgave = 0, 0, 0, 0, 0, 0\n%sif given > 0 then\n%send\nout[%d] = rgave + gtook\nend\nend\n", give, c.call(l.n, "refund", "given", "gr1, gr2, gr3, rgave"), l.n)
}

// opPart is one of a limit's op parts as a function: its parameters, its
// body, and the expressions it returns (which its body declares).
type opPart struct {
	params, body, results string
}

// inline returns the part written where it is called with args, in a
// block that binds its parameters to them (unless they are the args'
// own names) and assigns its results to into.
func (p opPart) inline(args, into string) string {
	bind := ""
	if p.params != args {
		bind = fmt.Sprintf("local %s = %s\n", p.params, args)
	}
	return fmt.Sprintf("do\n%s%s%s = %s\nend\n", bind, p.body, into, p.results)
}
