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
)

func (op Op) String() string {
	switch op {
	case OpBook:
		return "book"
	case OpRefund:
		return "refund"
	case OpCancel:
		return "cancel"
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
	if op < OpBook || op > OpCancel {
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
// refund), then its report part for a booking; the op's own parts
// (earliest, book, refund, unused) are functions of a few arguments. With
// several limits each runs in a block of its own that leaves the op's
// parts behind as closures, which the op then calls. With one, the parts
// are written where the op calls them, in a block that binds their
// arguments: no closure to allocate, and the body's locals are the
// script's (a booking's Redis time fell by about a quarter).
func composeOp(op Op, names []string) *Script {
	var src strings.Builder
	fmt.Fprintf(&src, "-- %s: %s\n", op, strings.Join(names, "+"))
	src.WriteString(prelude)
	src.WriteString("local hkey = KEYS[1]\n")
	logs := 0
	for _, name := range names {
		if bodies[name].kind == algorithm.KindSlidingLog {
			logs++
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
	src.WriteString("local bcost = cost\n")
	if op == OpRefund {
		src.WriteString("local refundn = cost\ncost = 1\n")
	}
	src.WriteString("local hset, httl = {}, 0\n")
	inline := len(names) == 1
	// Each limit's closures are locals, or, past localLimits limits, in
	// tables: Lua allows a function 200 locals, 6 per limit here.
	tables := len(names) > localLimits
	slot := func(name string, n int) string {
		if tables {
			return fmt.Sprintf("%s[%d]", name, n)
		}
		return fmt.Sprintf("%s%d", name, n)
	}
	// rep is the k-th number of limit n's report: its table's, or, inline,
	// a local's.
	rep := func(n, k int) string {
		if inline {
			return fmt.Sprintf("rep%d_%d", n, k)
		}
		return fmt.Sprintf("%s[%d]", slot("rep", n), k)
	}
	if tables {
		src.WriteString("local rep, earliest, book, refund, unused, raw = {}, {}, {}, {}, {}, {}\n")
	}
	// parts: each limit's op parts, by name, as functions (part): with
	// several limits defined as closures here, called below; inline,
	// written where they are called.
	type part struct {
		params, body, results string
	}
	parts := make([]map[string]part, len(names))
	define := func(n int, name string, p part) {
		parts[n-1][name] = p
		if !inline {
			fmt.Fprintf(&src, "%s = function(%s)\n%sreturn %s\nend\n", slot(name, n), p.params, p.body, p.results)
		}
	}
	// call writes the call of limit n's part name with args, its results
	// assigned to into: a call of the closure, or, inline, the part in a
	// block that binds its parameters (when they are not the args' names)
	// and assigns its results. into must not be a name the part declares.
	call := func(n int, name, args, into string) string {
		p := parts[n-1][name]
		if !inline {
			return fmt.Sprintf("%s = %s(%s)\n", into, slot(name, n), args)
		}
		bind := ""
		if p.params != args {
			bind = fmt.Sprintf("local %s = %s\n", p.params, args)
		}
		return fmt.Sprintf("do\n%s%s%s = %s\nend\n", bind, p.body, into, p.results)
	}
	argv := 3
	for i, name := range names {
		b := bodies[name]
		n := i + 1
		parts[i] = map[string]part{}
		log := b.kind == algorithm.KindSlidingLog
		sub := func(p string) string { return substitute(p, argv, n) }
		switch {
		case inline:
			fmt.Fprintf(&src, "local raw%d\n", n)
		case !tables:
			fmt.Fprintf(&src, "local rep%d, earliest%d, book%d, refund%d, unused%d, raw%d\n", n, n, n, n, n, n)
		}
		if !inline {
			fmt.Fprintf(&src, "do\n")
		}
		fmt.Fprintf(&src, "-- limit %d: %s\n", n, name)
		if log {
			src.WriteString(sub(zkeyOf))
			src.WriteString(sub(b.decide))
		} else {
			src.WriteString(sub(loadHash + b.decide))
			if op != OpRefund {
				fmt.Fprintf(&src, "%s = state or ''\n", slot("raw", n))
			}
		}
		// Only the parts op calls are made: a closure costs a call its
		// allocation and an upvalue per local it reads.
		if op == OpBook {
			// The report part, in a block: its locals must not hide the
			// body's from the parts below.
			if inline {
				fmt.Fprintf(&src, "local %s, %s, %s\n", rep(n, 1), rep(n, 2), rep(n, 3))
				fmt.Fprintf(&src, "do\n%s\n%s, %s, %s = rem, retry, reset\nend\n", sub(b.report), rep(n, 1), rep(n, 2), rep(n, 3))
			} else {
				fmt.Fprintf(&src, "do\n%s\n%s = {rem, retry, reset}\nend\n", sub(b.report), slot("rep", n))
			}
			earliest := b.earliest
			if earliest == "" {
				earliest = fmt.Sprintf("local act = math.max(from, now + %s)\n", rep(n, 2))
			}
			define(n, "earliest", part{"from", sub(earliest) + "\n", "act"})
			// book: the part, then (for a state in the hash) the write,
			// and the value after, which a cancel compares.
			if log {
				define(n, "book", part{"act", sub(b.book) + "\n", "rem, reset, ''"})
			} else {
				define(n, "book", part{"act", sub(b.book) + "\n" + sub(wipeFirst+storeMany) + "\n", fmt.Sprintf("rem, reset, ARGV[%d] .. value", argv+2)})
			}
		}
		if op == OpRefund || op == OpCancel {
			body := sub(b.refund) + "\n"
			if !log {
				body += fmt.Sprintf("if value then\n%s\nend\n", sub(wipeFirst+storeMany))
			}
			define(n, "refund", part{"n", body, "rem, retry, reset"})
		}
		if op == OpCancel {
			unused := b.unused
			if unused == "" {
				unused = "local give = 0\n"
			}
			define(n, "unused", part{"act, bcost", sub(unused) + "\n", "give"})
		}
		if !inline {
			src.WriteString("end\n")
		}
		argv += fixedArgs + b.params
	}
	num := func(x string) string { return "string.format('%.0f', " + x + ")" }
	switch op {
	case OpBook:
		// The search of algorithm.EarliestAll: the latest of the limits'
		// earliest instants, again until none moves it, at most
		// algorithm.MaxBookingRounds rounds and until now + maxDelay.
		fmt.Fprintf(&src, "local latest = now + tonumber(ARGV[%d])\nlocal act, ok, ea = now, false, nil\nfor _ = 1, %d do\n  local nxt = act\n", opa, algorithm.MaxBookingRounds)
		for i := range names {
			fmt.Fprintf(&src, "%s  nxt = math.max(nxt, ea)\n", call(i+1, "earliest", "act", "ea"))
		}
		src.WriteString("  if nxt > latest then\n    act = nxt\n    break\n  end\n  if nxt == act then\n    ok = true\n    break\n  end\n  act = nxt\nend\n")
		src.WriteString("local out = {'0', " + num("act") + "}\nif not ok then\n")
		for i := range names {
			n := i + 1
			fmt.Fprintf(&src, "out[%d], out[%d], out[%d] = %s, %s, %s\n", 3*i+3, 3*i+4, 3*i+5, num(rep(n, 1)), num(rep(n, 2)), num(rep(n, 3)))
		}
		fmt.Fprintf(&src, "for i = %d, %d do\n  out[i] = ''\nend\n", 3+3*len(names), 2+5*len(names))
		src.WriteString("return out\nend\nout[1] = '1'\n")
		for i := range names {
			n := i + 1
			base := 3 + 3*len(names) + 2*i
			fmt.Fprintf(&src, "do\nlocal brem, breset, bpost\n%sout[%d], out[%d], out[%d] = %s, %s, %s\nout[%d], out[%d] = %s or '', bpost\nend\n",
				call(n, "book", "act", "brem, breset, bpost"), 3*i+3, 3*i+4, 3*i+5, num("brem"), num("act - now"), num("breset"), base, base+1, slot("raw", n))
		}
		src.WriteString(hsetMany)
		src.WriteString("return out\n")
	case OpRefund:
		src.WriteString("local out = {}\n")
		for i := range names {
			src.WriteString(call(i+1, "refund", "refundn", fmt.Sprintf("out[%d], out[%d], out[%d]", 3*i+1, 3*i+2, 3*i+3)))
		}
		src.WriteString(hsetMany)
		src.WriteString("return out\n")
	case OpCancel:
		fmt.Fprintf(&src, "local act = tonumber(ARGV[%d])\nlocal out = {}\n", opa)
		argv := 3
		for i, name := range names {
			n := i + 1
			b := bodies[name]
			pre, post := opa+1+2*i, opa+2+2*i
			fmt.Fprintf(&src, "out[%d] = 0\nif act > now then\n", n)
			if b.kind != algorithm.KindSlidingLog {
				// The state is still the one the booking left: the one
				// before comes back, exactly.
				fmt.Fprintf(&src, "  if ARGV[%d] ~= '' and %s == ARGV[%d] then\n", post, slot("raw", n), post)
				fmt.Fprintf(&src, "    if ARGV[%d] == '' then\n      redis.call('HDEL', hkey, ARGV[%d])\n    else\n      redis.call('HSET', hkey, ARGV[%d], ARGV[%d])\n    end\n    out[%d] = bcost\n  else\n", pre, argv+1, argv+1, pre, n)
			} else {
				src.WriteString("  do\n")
			}
			fmt.Fprintf(&src, "local given\n%sif given > 0 then\n%send\nout[%d] = given\nend\nend\n", call(n, "unused", "act, bcost", "given"), call(n, "refund", "given", "local _"), n)
			argv += fixedArgs + b.params
		}
		src.WriteString(hsetMany)
		src.WriteString("return out\n")
	}
	source := withoutComments(src.String())
	sum := sha1.Sum([]byte(source))
	return &Script{Name: op.String() + ":" + strings.Join(names, "+"), Source: source, SHA1: hex.EncodeToString(sum[:]), Limits: len(names)}
}
