package luascript

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// Op is an operation of the booking scripts, besides the decision
// scripts' Take and Peek (docs/design/scheduling.md §4).
type Op uint8

const (
	// OpBook books ARGV[2] units at the earliest instant every limit
	// admits them, when that instant is at most maxDelay µs from now
	// (the argument after the limits'). It replies strings: "1" (booked)
	// or "0", the instant, each limit's remaining, retry after and reset
	// after, then each limit's value before and after the booking (""
	// when absent, or for a sliding log, which is given back by its
	// Unused instead).
	OpBook Op = iota + 1
	// OpRefund gives back up to ARGV[2] units to every limit, and replies
	// each limit's remaining, retry after (for a cost of 1) and reset
	// after, as integers.
	OpRefund
	// OpCancel gives back a booking of ARGV[2] units due at the instant
	// after the limits' arguments, followed by each limit's values before
	// and after the booking (as OpBook replied them): a limit whose state
	// is still the one after gets the one before back; any other gets its
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
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// opScripts caches the booking scripts, by op and Name.
var opScripts sync.Map

// ForOp returns the script of op for the limits, in order, and their
// arguments (as For's); the caller appends op's own (see Op). It returns
// an error wrapping store.ErrAlgorithmUnsupported when an algorithm has
// no part for op.
func ForOp(op Op, limits ...Limit) (*Script, []string, error) {
	if op < OpBook || op > OpUndo {
		return nil, nil, fmt.Errorf("%w: %v", store.ErrAlgorithmUnsupported, op)
	}
	decision, params, err := For(limits...)
	if err != nil {
		return nil, nil, err
	}
	names := strings.Split(decision.Name, "+")
	for _, name := range names {
		b := bodies[name]
		if b.book == "" || b.refund == "" {
			return nil, nil, fmt.Errorf("%w: %q has no Lua parts to book and refund", store.ErrAlgorithmUnsupported, name)
		}
	}
	key := op.String() + ":" + decision.Name
	if s, ok := opScripts.Load(key); ok {
		return s.(*Script), params, nil
	}
	s, _ := opScripts.LoadOrStore(key, composeOp(op, names))
	return s.(*Script), params, nil
}

// composeOp puts together op's script for limits of the named algorithms.
// Every limit's load and decide parts run first (for a cost of 1 in a
// refund), then, for a booking, its report part. The op's own parts
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
func composeOp(op Op, names []string) *Script {
	var src strings.Builder
	fmt.Fprintf(&src, "-- %s: %s\n", op, strings.Join(names, "+"))
	src.WriteString(prelude)
	src.WriteString("local hkey = KEYS[1]\nlocal held = false\n") // load.lua
	src.WriteString(usedHead(names))
	logs := 0
	nested := len(names) <= nestLimits
	for _, name := range names {
		b := bodies[name]
		if b.kind == algorithm.KindSlidingLog {
			logs++
		}
		if b.earliest != "" {
			nested = false
		}
	}
	if logs == len(names) {
		fmt.Fprintf(&src, "if #KEYS == %d then\n  hkey = string.sub(hkey, 1, #hkey - (ARGV[%d] == '' and 2 or #ARGV[%d]))\nend\n", logs, 3+1, 3+1)
	}
	// opa: the first of the op's own arguments, after every limit's.
	opa := 3
	for _, name := range names {
		opa += fixedArgs + bodies[name].params
	}
	opa++
	// Several limits in the hash are read with one HMGET, as in a
	// decision script.
	fieldArgs := hashFields(names)
	hmget := len(fieldArgs) > 1
	if hmget {
		src.WriteString(hmgetLine(fieldArgs))
	}
	field := 0 // the limit's place among those kept in the hash, from 1
	src.WriteString("local bcost = cost\n")
	// keyed: a refund by key (the --@refund parts give nothing back of a
	// booking not yet due); a cancel's or an undo's gives back its own.
	fmt.Fprintf(&src, "local keyed = %v\n", op == OpRefund)
	if op == OpRefund {
		src.WriteString("local refundn = cost\ncost = 1\n")
	}
	src.WriteString("local hset, httl = {}, 0\n")
	// The reply, its slots made at once (a nested op fills them from the
	// last limit's on).
	switch op {
	case OpBook:
		fmt.Fprintf(&src, "local out = {%s}\nlocal bact = now\n", slots("''", 2+5*len(names)))
	case OpRefund:
		fmt.Fprintf(&src, "local out = {%s}\n", slots("0", 3*len(names)))
	case OpCancel, OpUndo:
		fmt.Fprintf(&src, "local out = {%s}\nlocal cact = tonumber(ARGV[%d])\n", slots("0", len(names)), opa)
	}
	// Each limit's closures are locals, or, past localLimits limits, in
	// tables: Lua allows a function 200 locals, 6 per limit here. Nested,
	// a limit's report and its state as read are locals of the script's.
	tables := len(names) > localLimits
	slot := func(name string, n int) string {
		if tables {
			return fmt.Sprintf("%s[%d]", name, n)
		}
		return fmt.Sprintf("%s%d", name, n)
	}
	rep := func(n, k int) string {
		if nested {
			return fmt.Sprintf("rep%d_%d", n, k)
		}
		return fmt.Sprintf("%s[%d]", slot("rep", n), k)
	}
	if tables {
		src.WriteString("local rep, earliest, book, refund, unused, undo, raw = {}, {}, {}, {}, {}, {}, {}\n")
	}
	if nested {
		for i := range names {
			if op != OpRefund {
				fmt.Fprintf(&src, "local raw%d\n", i+1)
			}
			if op == OpBook {
				fmt.Fprintf(&src, "local %s, %s, %s\n", rep(i+1, 1), rep(i+1, 2), rep(i+1, 3))
			}
		}
	}
	parts := make([]map[string]opPart, len(names))
	// define makes limit n's part name: a closure, or, nested, a part
	// that call writes where it is called.
	define := func(n int, name string, p opPart) {
		parts[n-1][name] = p
		if !nested {
			fmt.Fprintf(&src, "%s = function(%s)\n%sreturn %s\nend\n", slot(name, n), p.params, p.body, p.results)
		}
	}
	// call writes the call of limit n's part name with args, its results
	// assigned to into (which must not be a name the part declares).
	call := func(n int, name, args, into string) string {
		if !nested {
			return fmt.Sprintf("%s = %s(%s)\n", into, slot(name, n), args)
		}
		return parts[n-1][name].inline(args, into)
	}
	idArgs := make([]int, len(names)) // the ARGV index of each limit's state ID
	argv := 3
	for i, name := range names {
		b := bodies[name]
		n := i + 1
		idArgs[i] = argv + 1
		parts[i] = map[string]opPart{}
		log := b.kind == algorithm.KindSlidingLog
		sub := func(p string) string { return substitute(p, argv, n) }
		if !nested && !tables {
			if op == OpUndo {
				// Its own parts only: Lua allows a function 200 locals.
				fmt.Fprintf(&src, "local rep%d, refund%d, unused%d, undo%d, raw%d\n", n, n, n, n, n)
			} else {
				fmt.Fprintf(&src, "local rep%d, earliest%d, book%d, refund%d, unused%d, raw%d\n", n, n, n, n, n, n)
			}
		}
		fmt.Fprintf(&src, "do\n-- limit %d: %s\n", n, name)
		if log {
			src.WriteString(sub(zkeyOf))
			src.WriteString(sub(b.decide))
		} else {
			field++
			load := loadHash
			if hmget {
				load = loadFrom(field)
			}
			src.WriteString(sub(load + b.decide))
			if op != OpRefund {
				fmt.Fprintf(&src, "%s = state or ''\n", slot("raw", n))
			}
		}
		// Only the parts op calls are made.
		if op == OpBook {
			// The report part, in a block: its locals must not hide the
			// body's from the parts below.
			if nested {
				fmt.Fprintf(&src, "do\n%s\n%s, %s, %s = rem, retry, reset\nend\n", sub(b.report), rep(n, 1), rep(n, 2), rep(n, 3))
			} else {
				fmt.Fprintf(&src, "do\n%s\n%s = {rem, retry, reset}\nend\n", sub(b.report), slot("rep", n))
			}
			earliest := b.earliest
			if earliest == "" {
				earliest = fmt.Sprintf("local act = math.max(from, now + %s)\n", rep(n, 2))
			}
			define(n, "earliest", opPart{"from", sub(earliest) + "\n", "act"})
			// book: the part, then (for a state in the hash) the write,
			// and the value after, which a cancel compares.
			if log {
				define(n, "book", opPart{"act", sub(b.book) + "\n", "rem, reset, ''"})
			} else {
				// A booking on another kind's state replies no value after
				// it: its cancel gives back its unused units rather than
				// put back a state of another kind (Go: not ExactUndo).
				define(n, "book", opPart{"act", sub(b.book) + "\n" + sub(wipeFirst+storeMany) + "\n", fmt.Sprintf("rem, reset, (other and '' or ARGV[%d] .. value)", argv+2)})
			}
		}
		// A state of another kind (load.lua's carried, or the log's) gives
		// nothing back and is not written: the limit reports it as it
		// reads it (Go: the memory store's Refund and Cancel).
		if op == OpRefund || op == OpCancel || op == OpUndo {
			body := sub(b.refund) + "\n"
			if !log {
				body += fmt.Sprintf("if value then\n%s\nend\n", sub(wipeFirst+storeMany))
			}
			body = "local crem, cretry, creset\nif carried > 0 then\n" + sub(b.report) + "\ncrem, cretry, creset = rem, retry, reset\nelse\n" +
				body + "crem, cretry, creset = rem, retry, reset\nend\n"
			define(n, "refund", opPart{"n", body, "crem, cretry, creset"})
		}
		if op == OpUndo {
			undo := b.undo
			if undo == "" {
				undo = "local give = 0\n"
			}
			undo = "local ugive = 0\nif carried == 0 then\n" + undo + "\nugive = give\nend\n"
			define(n, "undo", opPart{"act, bcost", sub(undo) + "\n", "ugive"})
		}
		if op == OpCancel || op == OpUndo {
			unused := b.unused
			if unused == "" {
				unused = "local give = 0\n"
			}
			unused = "local cgive = 0\nif carried == 0 then\n" + unused + "\ncgive = give\nend\n"
			define(n, "unused", opPart{"act, bcost", sub(unused) + "\n", "cgive"})
		}
		if !nested {
			src.WriteString("end\n")
		}
		argv += fixedArgs + b.params
	}
	num := func(x string) string { return "string.format('%.0f', " + x + ")" }
	if op == OpBook {
		src.WriteString(tooMany(len(fieldArgs), "true"))
		// The search of algorithm.EarliestAll: the latest of the limits'
		// earliest instants, again until none moves it, at most
		// algorithm.MaxBookingRounds rounds and until now + maxDelay. A
		// booking that is not made replies each limit's report; nothing
		// has been written.
		fmt.Fprintf(&src, "local latest = now + tonumber(ARGV[%d])\nlocal act, ok, ea = now, false, nil\nfor _ = 1, %d do\n  local nxt = act\n", opa, algorithm.MaxBookingRounds)
		for i := range names {
			fmt.Fprintf(&src, "%s  nxt = math.max(nxt, ea)\n", call(i+1, "earliest", "act", "ea"))
		}
		src.WriteString("  if nxt > latest then\n    act = nxt\n    break\n  end\n  if nxt == act then\n    ok = true\n    break\n  end\n  act = nxt\nend\n")
		src.WriteString("out[2] = " + num("act") + "\nif not ok then\nout[1] = '0'\n")
		for i := range names {
			n := i + 1
			fmt.Fprintf(&src, "out[%d], out[%d], out[%d] = %s, %s, %s\n", 3*i+3, 3*i+4, 3*i+5, num(rep(n, 1)), num(rep(n, 2)), num(rep(n, 3)))
		}
		src.WriteString("return out\nend\nout[1] = '1'\nbact = act\n")
	}
	// end writes limit n's end: its booking, its refund, or its share of
	// a cancel.
	end := func(n int, name string) {
		i := n - 1
		switch op {
		case OpBook:
			base := 3 + 3*len(names) + 2*i
			fmt.Fprintf(&src, "do\nlocal brem, breset, bpost\n%sout[%d], out[%d], out[%d] = %s, %s, %s\nout[%d], out[%d] = %s or '', bpost\nend\n",
				call(n, "book", "bact", "brem, breset, bpost"), 3*i+3, 3*i+4, 3*i+5, num("brem"), num("bact - now"), num("breset"), base, base+1, slot("raw", n))
		case OpRefund:
			src.WriteString(call(n, "refund", "refundn", fmt.Sprintf("out[%d], out[%d], out[%d]", 3*i+1, 3*i+2, 3*i+3)))
		case OpCancel, OpUndo:
			idArg := idArgs[i]
			pre, post := opa+1+2*i, opa+2+2*i
			if op == OpCancel {
				src.WriteString("if cact > now then\n")
			} else {
				src.WriteString("do\n") // due or not: an undo gives back either way
			}
			if bodies[name].kind != algorithm.KindSlidingLog {
				// The state is still the one the booking left: the one
				// before comes back, exactly.
				fmt.Fprintf(&src, "  if ARGV[%d] ~= '' and %s == ARGV[%d] then\n", post, slot("raw", n), post)
				fmt.Fprintf(&src, "    if ARGV[%d] == '' then\n      redis.call('HDEL', hkey, ARGV[%d])\n    else\n      redis.call('HSET', hkey, ARGV[%d], ARGV[%d])\n    end\n    out[%d] = bcost\n  else\n", pre, idArg, idArg, pre, n)
			} else {
				src.WriteString("  do\n")
			}
			give := call(n, "unused", "cact, bcost", "given")
			if op == OpUndo {
				give = "if cact > now then\n" + give + "else\n" + call(n, "undo", "cact, bcost", "given") + "end\n"
			}
			fmt.Fprintf(&src, "local given\n%sif given > 0 then\n%send\nout[%d] = given\nend\nend\n", give, call(n, "refund", "given", "local _"), n)
		}
	}
	if nested {
		for i := len(names) - 1; i >= 0; i-- {
			end(i+1, names[i])
			src.WriteString("end\n")
		}
	} else {
		for i, name := range names {
			end(i+1, name)
		}
	}
	src.WriteString(hsetMany)
	src.WriteString("return out\n")
	source := withoutComments(src.String())
	sum := sha1.Sum([]byte(source))
	return &Script{Name: op.String() + ":" + strings.Join(names, "+"), Source: source, SHA1: hex.EncodeToString(sum[:]), Limits: len(names)}
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
