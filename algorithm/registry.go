package algorithm

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Kind is what the code that handles every algorithm needs to know of one
// of them: the Redis scripts, and a store reading a state another
// algorithm wrote. An algorithm's package registers its Kinds from its
// init with [Register], as image formats and database/sql drivers do, so
// that nothing else lists the algorithms.
type Kind struct {
	// Name is the name of its Spec ("gcra").
	Name string
	// Letter is its Tag's Kind, a capital ASCII letter of its own.
	Letter byte
	// Params is how many meaning parameters its Tag has: 1 (P0) or 2 (P0
	// and P1).
	Params int
	// Body is the Lua body of its transition, as [CheckBody] states the
	// contract, or "" for an algorithm the Redis stores do not run.
	Body string
	// Used returns how much of its limit a state written under from (a
	// Tag of this Kind whose parameters are in range) had used at now,
	// as [Used] says. Its result is clamped to [0, MaxLimit].
	Used func(from Tag, s State, now int64) int64
	// StepBack is set for a Kind whose Inherit carries, from a state
	// written under from (of this Kind) by a clock that has since stepped
	// back d µs, a debt that lasts longer under to (of this Kind too)
	// than d: it returns how many µs ([CheckInherit] allows them). nil
	// for the other Kinds.
	StepBack func(to, from Tag, d int64) int64
	// Log is set for an algorithm whose state keeps a [Log] of its
	// admissions, changed in place (the sliding log): its entries are
	// instants and costs, carried as they are ([CheckRule] refuses
	// Proportional), and a booking on it is given back by Unused alone
	// ([ExactUndo]).
	Log bool
	// Describe puts a Tag of this Kind in words, for errors ("GCRA,
	// burst 100, one every 36s"); nil: its String.
	Describe func(Tag) string
	// AsIsBounds is set for a Kind whose Inherit keeps [CheckInherit]'s as-is
	// bounds only in part, carrying a state written under from into to
	// (both Tags of this Kind): it reports whether the upper bound
	// (what remains is at most to's limit less what was used) and the
	// lower one (at least what from had left, when to's limit is at least
	// from's) hold, and by how much the upper one may be exceeded. nil:
	// both hold exactly.
	AsIsBounds func(to, from Tag) (upper, lower bool, slack int64)
}

// registry is the Kinds registered, copied on every Register so that
// readers (Tag.Header, Used) load it without a lock.
type registry struct {
	byLetter [256]*Kind
	byName   map[string]*Kind
}

var (
	kinds      atomic.Pointer[registry]
	registerMu sync.Mutex
)

// Register adds k to the Kinds every store and script knows. It panics
// when k is not valid ([CheckKind]) or its Name or Letter is taken: a
// bug in the registering package, found when it is loaded.
func Register(k Kind) {
	if err := CheckKind(k); err != nil {
		panic(err)
	}
	registerMu.Lock()
	defer registerMu.Unlock()
	old := kinds.Load()
	next := &registry{byName: map[string]*Kind{}}
	if old != nil {
		next.byLetter = old.byLetter
		for name, k := range old.byName {
			next.byName[name] = k
		}
	}
	if next.byLetter[k.Letter] != nil || next.byName[k.Name] != nil {
		panic(fmt.Sprintf("algorithm: Register %q (%c): the name or the letter is taken", k.Name, k.Letter))
	}
	next.byLetter[k.Letter] = &k
	next.byName[k.Name] = &k
	kinds.Store(next)
}

// Kinds returns every registered Kind, by Name.
func Kinds() []Kind {
	r := kinds.Load()
	if r == nil {
		return nil
	}
	all := make([]Kind, 0, len(r.byName))
	for _, k := range r.byName {
		all = append(all, *k)
	}
	slices.SortFunc(all, func(a, b Kind) int { return strings.Compare(a.Name, b.Name) })
	return all
}

// KindNamed returns the registered Kind whose Name is name.
func KindNamed(name string) (Kind, bool) {
	if r := kinds.Load(); r != nil {
		if k := r.byName[name]; k != nil {
			return *k, true
		}
	}
	return Kind{}, false
}

// KindOf returns the registered Kind whose Letter is letter: what a store
// knows of a state of that letter (whether it keeps a Log, its Lua body).
func KindOf(letter byte) (Kind, bool) {
	if k := kindOf(letter); k != nil {
		return *k, true
	}
	return Kind{}, false
}

// kindOf returns the registered Kind whose Letter is letter, or nil.
func kindOf(letter byte) *Kind {
	if r := kinds.Load(); r != nil {
		return r.byLetter[letter]
	}
	return nil
}

// CheckKind returns what makes k unfit to register, or nil: a Name that
// is no Lua name (letters, digits, '-' and '_'), a Letter that is no
// capital ASCII letter, Params other than 1 or 2, no Used, or a Body
// that breaks the composition contract ([CheckBody]).
func CheckKind(k Kind) error {
	switch {
	case !kindName.MatchString(k.Name):
		return fmt.Errorf("algorithm: Register %q: the name must be lower-case letters, digits and '-'", k.Name)
	case k.Letter < 'A' || k.Letter > 'Z':
		return fmt.Errorf("algorithm: Register %q: the letter %q is not a capital ASCII letter", k.Name, k.Letter)
	case k.Params != 1 && k.Params != 2:
		return fmt.Errorf("algorithm: Register %q: a Tag has 1 or 2 meaning parameters, not %d", k.Name, k.Params)
	case k.Used == nil:
		return fmt.Errorf("algorithm: Register %q: no Used", k.Name)
	}
	if k.Body != "" {
		if err := CheckBody(k.Body); err != nil {
			return fmt.Errorf("algorithm: Register %q: %s.lua: %w", k.Name, k.Name, err)
		}
	}
	return nil
}

var kindName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// The marks of the composition contract.
var (
	partMark  = regexp.MustCompile(`(?m)^--@(.*)$`)
	regionRef = regexp.MustCompile(`(?m)^--#(\w+)`)
	dollarRef = regexp.MustCompile(`\$(\w*)`)
	argvRef   = regexp.MustCompile(`ARGV\[([^\]]*)\]`)
	luaName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	fitsSet   = regexp.MustCompile(`\bfits\s*=[^=]`)
)

// bodyParts are the parts a body may have after its decide part: report
// and commit, in that order, then any of the others, as the composer
// (internal/luascript) cuts them.
var bodyParts = []string{"report", "commit", "book", "refund", "unused", "earliest", "undo", "owe", "used", "lean", "counter"}

// CheckBody returns what makes body break the composition contract the
// script composer (internal/luascript) relies on, or nil. The contract,
// described in full in docs/design/lua-composition.md (§3, §4):
//
//   - parts: the decide part, which sets fits, then lines "--@report"
//     and "--@commit", then any of "--@book", "--@refund", "--@unused",
//     "--@earliest", "--@undo" and "--@used" (what a state of this Kind
//     had used, for a limit of another kind that starts it afresh) and
//     "--@lean" (its common case alone, for a booking of one limit
//     (the composer's bookLean): from state, a string of the limit's own
//     header (maybe with a generation) whose body starts at at, now and
//     cost, it sets lean
//     when it decided, fits, the reply as the state stands, r1, r2, r3,
//     and charged, c1, c2, c3, and value, the body a charge writes, whose
//     key's TTL must already last, needed only when fits and not dry, a
//     dry run; it may convert numbers with num, tonumber remembered for
//     the call) and "--@counter" (the common case of a state kept as a
//     counter, for a multi script and a plain decision of one limit:
//     docs/design/counter-window.md; it charges the counter, the field
//     of the key's hash $cpre and the window's index, by costarg, the
//     cost's text, when charge, and sets lean, fits, charged, cfield,
//     rem and ends; it may give an index's text with idx, string.format('%d')
//     remembered; its commit part then sets counter, the
//     window's index when the charged state may be kept as a counter);
//     each once;
//   - what it reads: its limit's arguments alone, as ARGV[$1] … ARGV[$9]
//     (its parameters, which the composer numbers), ARGV[$id] and
//     ARGV[$hdr], the limit's number $n, its sorted
//     set's name $zkey, its counters' fields' start $cpre and the store's
//     TTL margin $margin: no other $
//     name, no other ARGV, and no KEYS;
//   - regions: "--#setup a, b" … "--#setupend" at most once, in the
//     decide part; a state kept in the key's hash is read between
//     "--#parse a, b" and "--#parsed" in the decide part and written from
//     "--#encode x, y" (as many names, at most 3) to the end of the
//     commit part, which sets value. Each names Lua names;
//   - conversion: lines between "--#convert" and "--#converted" run only
//     in the scripts that convert a state written under another header,
//     those between "--#plain" and the "--#convert" after it only in the
//     others; a line "--#unreadable <what>" stands for the answer to a
//     state the body cannot read.
func CheckBody(body string) error {
	decide, commit, err := checkParts(body)
	if err != nil {
		return err
	}
	if err := checkReads(body); err != nil {
		return err
	}
	return checkMarks(body, decide, commit)
}

// checkParts checks the parts of body and returns its decide and commit
// parts.
func checkParts(body string) (decide, commit string, err error) {
	marks := partMark.FindAllStringSubmatchIndex(body, -1)
	var names []string
	for _, m := range marks {
		name := body[m[2]:m[3]]
		if !slices.Contains(bodyParts, name) {
			return "", "", fmt.Errorf("line %d: unknown part --@%s (want one of %s)", line(body, m[0]), name, strings.Join(bodyParts, ", "))
		}
		if slices.Contains(names, name) {
			return "", "", fmt.Errorf("line %d: part --@%s repeated", line(body, m[0]), name)
		}
		names = append(names, name)
	}
	if len(names) < 2 || names[0] != "report" || names[1] != "commit" {
		return "", "", fmt.Errorf("the parts are %v: want --@report and --@commit after the decide part", names)
	}
	decide = body[:marks[0][0]]
	if !fitsSet.MatchString(decide) {
		return "", "", fmt.Errorf("the decide part does not set fits (whether the cost fits at now)")
	}
	commit = body[marks[1][1]:]
	if len(marks) > 2 {
		commit = body[marks[1][1]:marks[2][0]]
	}
	return decide, commit, nil
}

// checkReads checks that body reads its limit's arguments alone.
func checkReads(body string) error {
	for _, m := range dollarRef.FindAllStringSubmatchIndex(body, -1) {
		switch ref := body[m[2]:m[3]]; {
		case len(ref) == 1 && ref[0] >= '1' && ref[0] <= '9', ref == "id", ref == "hdr", ref == "n", ref == "zkey", ref == "cpre", ref == "margin":
		case ref == "":
			// A '$' of Lua's own (a pattern's end, "%$"): not a reference.
		default:
			return fmt.Errorf("line %d: $%s: a body reads its parameters as $1…$9 and the limit's $id, $hdr, $n, $zkey, $cpre, $margin", line(body, m[0]), ref)
		}
	}
	for _, m := range argvRef.FindAllStringSubmatchIndex(body, -1) {
		switch ref := body[m[2]:m[3]]; {
		case len(ref) == 2 && ref[0] == '$' && ref[1] >= '1' && ref[1] <= '9', ref == "$id", ref == "$hdr":
		default:
			return fmt.Errorf("line %d: ARGV[%s]: a body reads only its limit's arguments, ARGV[$1]…ARGV[$9], ARGV[$id] and ARGV[$hdr]", line(body, m[0]), ref)
		}
	}
	if i := strings.Index(body, "KEYS["); i >= 0 {
		return fmt.Errorf("line %d: KEYS: a body reaches its keys through the names the composer gives (hkey, a log's zkey)", line(body, i))
	}
	return nil
}

// checkMarks checks the --# marks of body, whose decide and commit parts
// are given.
func checkMarks(body, decide, commit string) error {
	count := map[string]int{}
	for _, m := range regionRef.FindAllStringSubmatchIndex(body, -1) {
		name := body[m[2]:m[3]]
		switch name {
		case "setup", "setupend", "parse", "parsed", "encode":
		case "plain", "convert", "converted", "unreadable":
			continue // as many as the body needs; the composer pairs them
		default:
			return fmt.Errorf("line %d: unknown mark --#%s", line(body, m[0]), name)
		}
		count[name]++
	}
	for name, n := range count {
		if n > 1 {
			return fmt.Errorf("--#%s appears %d times, at most once", name, n)
		}
	}
	if count["setup"] != count["setupend"] {
		return fmt.Errorf("--#setup and --#setupend come in pairs")
	}
	if count["setup"] == 1 {
		vars, err := region(decide, "setup", "setupend")
		if err != nil {
			return err
		}
		if err := luaNames("--#setup", vars); err != nil {
			return err
		}
	}
	if count["parse"]+count["parsed"]+count["encode"] == 0 {
		return nil
	}
	if count["parse"] != 1 || count["parsed"] != 1 || count["encode"] != 1 {
		return fmt.Errorf("a state kept in the hash needs --#parse, --#parsed and --#encode, one each")
	}
	parsed, err := region(decide, "parse", "parsed")
	if err != nil {
		return err
	}
	_, after, ok := strings.Cut(commit, "\n--#encode ")
	if !ok {
		return fmt.Errorf("--#encode must be in the commit part")
	}
	line, region, _ := strings.Cut(after, "\n")
	encoded := strings.Split(line, ", ")
	if err := luaNames("--#parse", parsed); err != nil {
		return err
	}
	if err := luaNames("--#encode", encoded); err != nil {
		return err
	}
	if len(parsed) != len(encoded) || len(parsed) > 3 {
		return fmt.Errorf("--#parse %v and --#encode %v: not as many numbers, or more than 3", parsed, encoded)
	}
	if !strings.Contains(region, "value =") {
		return fmt.Errorf("--#encode: the region to the end of the commit part does not set value")
	}
	return nil
}

// region returns the names on the line "--#open a, b" of part, which must
// be followed, later in part, by a line "--#close".
func region(part, open, close string) ([]string, error) {
	_, after, ok := strings.Cut("\n"+part, "\n--#"+open+" ")
	if !ok {
		return nil, fmt.Errorf("--#%s must be in the decide part, followed by names", open)
	}
	vars, rest, _ := strings.Cut(after, "\n")
	if !strings.Contains("\n"+rest, "\n--#"+close+"\n") {
		return nil, fmt.Errorf("--#%s without --#%s after it in the decide part", open, close)
	}
	return strings.Split(vars, ", "), nil
}

// luaNames returns an error unless every name is a Lua name.
func luaNames(mark string, names []string) error {
	for _, v := range names {
		if !luaName.MatchString(v) {
			return fmt.Errorf("%s: %q is not a Lua name (want names separated by \", \")", mark, v)
		}
	}
	return nil
}

// line returns the 1-based line of body at byte offset i.
func line(body string, i int) int { return strings.Count(body[:i], "\n") + 1 }
