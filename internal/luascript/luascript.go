// Package luascript holds the Lua scripts that run each algorithm's
// transition inside Redis, shared by the go-redis and rueidis stores.
//
// A script is the prelude (prelude.lua: KEYS, ARGV and reply layout, the
// clock) followed by algorithm bodies, one per limit the script decides
// for. Each body mirrors the Go transition of the same algorithm, operation
// for operation, and is written once: the script of one limit and the
// scripts composing several are put together from the same text.
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
	"github.com/go-ratelimit/ratelimit/store"
)

var (
	//go:embed prelude.lua
	prelude string
	//go:embed tokenbucket.lua
	tokenBucket string
	//go:embed tokenbucket-interval.lua
	intervalBucket string
	//go:embed slidinglog.lua
	slidingLog string
	//go:embed fixedwindow.lua
	fixedWindow string
	//go:embed gcra.lua
	gcra string
	//go:embed slidingwindow.lua
	slidingWindow string
)

// Script is a script deciding for one limit or several on one key.
type Script struct {
	// Name names the algorithms the script runs, in order, joined by "+".
	Name string
	// Source is the whole script text.
	Source string
	// SHA1 is the hex SHA-1 of Source, for EVALSHA.
	SHA1 string
	// Limits is how many limits the script decides for: the number of
	// KEYS it takes, and a third of the number of integers it replies.
	Limits int
}

// body is one algorithm's body, split into its three parts.
type body struct {
	decide, report, commit string
	params                 int // $1…$params
}

var (
	bodies = map[string]body{}
	single = map[string]*Script{} // by algorithm name
	// composed caches the scripts of several limits, by Name.
	composed sync.Map
)

var paramRef = regexp.MustCompile(`\$([1-9])`)

func init() {
	for name, text := range map[string]string{
		"tokenbucket":          tokenBucket,
		"tokenbucket-interval": intervalBucket,
		"slidinglog":           slidingLog,
		"fixedwindow":          fixedWindow,
		"gcra":                 gcra,
		"slidingwindow":        slidingWindow,
	} {
		b, err := split(text)
		if err != nil {
			panic(fmt.Sprintf("luascript: %s.lua: %v", name, err)) // a bug in an embedded file
		}
		bodies[name] = b
		single[name] = compose([]string{name})
	}
}

// split cuts a body at its "--@report" and "--@commit" lines and counts
// the parameters it names.
func split(text string) (body, error) {
	decide, rest, ok := strings.Cut(text, "\n--@report\n")
	if !ok {
		return body{}, fmt.Errorf("no --@report line")
	}
	report, commit, ok := strings.Cut(rest, "\n--@commit\n")
	if !ok {
		return body{}, fmt.Errorf("no --@commit line after --@report")
	}
	b := body{decide: decide + "\n", report: report + "\n", commit: commit}
	for _, m := range paramRef.FindAllStringSubmatch(text, -1) {
		b.params = max(b.params, int(m[1][0]-'0'))
	}
	return b, nil
}

// compose puts together the script deciding for limits of the named
// algorithms, in order. Every name has a body.
func compose(names []string) *Script {
	var src strings.Builder
	src.WriteString(prelude)
	argv := 3 // the ARGV index before the next limit's parameters
	withArgs := func(b body, part string) string {
		base := argv
		return paramRef.ReplaceAllStringFunc(part, func(ref string) string {
			return strconv.Itoa(base + int(ref[1]-'0'))
		})
	}
	if len(names) == 1 {
		// One limit: the parts inline, with no closure to allocate.
		b := bodies[names[0]]
		src.WriteString("local key = KEYS[1]\n")
		src.WriteString(withArgs(b, b.decide))
		src.WriteString("if peek or not fits then\n")
		src.WriteString(withArgs(b, b.report))
		src.WriteString("return {rem, retry, reset}\nend\n")
		src.WriteString(withArgs(b, b.commit))
		src.WriteString("return {rem, 0, reset}\n")
	} else {
		// Several: every limit's first part, each in a block of its own
		// that leaves its report and commit parts behind as closures;
		// then either every report or every commit.
		src.WriteString("local all = true\n")
		for i, name := range names {
			b := bodies[name]
			n := i + 1
			fmt.Fprintf(&src, "local report%d, commit%d\ndo\n-- limit %d: %s\nlocal key = KEYS[%d]\n", n, n, n, name, n)
			src.WriteString(withArgs(b, b.decide))
			fmt.Fprintf(&src, "all = all and fits\nreport%d = function()\n", n)
			src.WriteString(withArgs(b, b.report))
			fmt.Fprintf(&src, "return rem, retry, reset\nend\ncommit%d = function()\n", n)
			src.WriteString(withArgs(b, b.commit))
			src.WriteString("return rem, reset\nend\nend\n")
			argv += b.params
		}
		src.WriteString("local out = {}\nif peek or not all then\n")
		for i := range names {
			fmt.Fprintf(&src, "out[%d], out[%d], out[%d] = report%d()\n", 3*i+1, 3*i+2, 3*i+3, i+1)
		}
		src.WriteString("return out\nend\n")
		for i := range names {
			fmt.Fprintf(&src, "out[%d], out[%d] = commit%d()\nout[%d] = 0\n", 3*i+1, 3*i+3, i+1, 3*i+2)
		}
		src.WriteString("return out\n")
	}
	sum := sha1.Sum([]byte(src.String()))
	return &Script{Name: strings.Join(names, "+"), Source: src.String(), SHA1: hex.EncodeToString(sum[:]), Limits: len(names)}
}

// Scripts returns the script of one limit of every algorithm, for tests
// and for preloading.
func Scripts() []*Script {
	out := make([]*Script, 0, len(single))
	for _, s := range single {
		out = append(out, s)
	}
	return out
}

// For returns the script deciding for limits of the given specs, in order,
// and their parameters encoded as script arguments (ARGV[4] onward), or an
// error wrapping store.ErrAlgorithmUnsupported.
func For(specs ...algorithm.Spec) (*Script, []string, error) {
	if len(specs) == 0 {
		return nil, nil, fmt.Errorf("%w: no limits", algorithm.ErrInvalidConfig)
	}
	names := make([]string, len(specs))
	var params []string
	for i, spec := range specs {
		b, ok := bodies[spec.Name]
		if !ok {
			return nil, nil, fmt.Errorf("%w: no Lua script for %q", store.ErrAlgorithmUnsupported, spec.Name)
		}
		if len(spec.Params) != b.params {
			return nil, nil, fmt.Errorf("%w: %q takes %d parameters, got %d", store.ErrAlgorithmUnsupported, spec.Name, b.params, len(spec.Params))
		}
		names[i] = spec.Name
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
