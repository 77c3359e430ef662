package luascript

import (
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// split cuts a body's carry marks into its regions, and refuses marks that
// do not pair up or that a batch could not use (init refuses a string-state
// body without them, and a sliding log with them).
func TestSplitCarryMarks(t *testing.T) {
	tail := "--@report\nlocal rem = 1\n--@commit\nlocal ttl = 2\n"
	parse := "local a\n--#parse a\na = 1\n--#parsed\n"
	for _, bad := range []string{
		"local x = 1\n" + tail + "--#encode x\nlocal value = ''\n", // no --#parse
		"local a\n--#parse a\na = 1\n" + tail,                      // no --#parsed, no --#encode
		parse + tail,                                               // no --#encode
		parse + tail + "--#encode a, b\nlocal value = ''\n",        // counts differ
		parse + tail + "--#encode a + 1\nlocal value = ''\n",       // not a name
		parse + tail + "--#encode a\nlocal other = ''\n",           // no value
	} {
		if _, _, err := split(bad); err == nil {
			t.Errorf("split accepted:\n%s", bad)
		}
	}
	b, _, err := split(parse + "local fits = true\n" + tail + "--#encode a\nlocal value = 'x'\n")
	if err != nil || b.carry == nil || b.carry.parse != "a = 1\n" || strings.TrimSpace(b.carry.encode) != "local value = 'x'" {
		t.Fatalf("split: %+v, %v", b.carry, err)
	}
}

// split cuts a body's setup marks into its region, and refuses a region
// that does not end, names that are not names, or lines that read what
// varies between requests (a batch runs them once for all its requests).
func TestSplitSetupMarks(t *testing.T) {
	tail := "local fits = true\n--@report\nlocal rem = 1\n--@commit\nlocal ttl = 2\n"
	for _, bad := range []string{
		"--#setup a\nlocal a = tonumber(ARGV[$1])\n" + tail,                    // no --#setupend
		"--#setup a + 1\nlocal a = 1\n--#setupend\n" + tail,                    // not a name
		"--#setup a\nlocal a = now + 1\n--#setupend\n" + tail,                  // the request's time
		"--#setup a\nlocal a = tonumber(ARGV[2])\n--#setupend\n" + tail,        // its cost
		"--#setup a\nlocal a = state and 1 or 2\n--#setupend\n" + tail,         // its state
		"--#setup a\nlocal a = 1\n" + tail + "--#setupend\nlocal value = ''\n", // not in the decide part
	} {
		if _, _, err := split(bad); err == nil {
			t.Errorf("split accepted:\n%s", bad)
		}
	}
	region := "--#setup a, f\nlocal a = tonumber(ARGV[$1]) -- its limit\nlocal function f(x)\n  return x * a\nend\n--#setupend\n"
	b, _, err := split("-- a body\n" + region + tail)
	if err != nil || b.setup == nil || b.setup.region != region || strings.Join(b.setup.vars, " ") != "a f" || !strings.HasPrefix(b.setup.text, "local a =") {
		t.Fatalf("split: %+v, %v", b.setup, err)
	}
	// Every body of this package that marks a setup has it hoisted in a
	// batch: its region is gone from the request's part.
	for _, k := range algorithm.Kinds() {
		name := k.Name
		kb, err := bodyNamed(name)
		if err != nil {
			t.Fatal(err)
		}
		b := kb.plain
		if b.setup == nil {
			t.Errorf("%s.lua: no --#setup region", name)
			continue
		}
		src := Batch(scriptOf(form{names: name})).Source
		if !strings.Contains(src, "local "+strings.Join(b.setup.vars, ", ")+" = s1_") {
			t.Errorf("%s: the batch script does not take its setup from once per batch", name)
		}
	}
}
