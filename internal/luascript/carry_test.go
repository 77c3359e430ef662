package luascript

import (
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Every body that keeps its state in the hash marks how a batch carries
// it (a body without marks would still be right, reparsed per request,
// but slower).
func TestBodiesCarry(t *testing.T) {
	for name, b := range bodies {
		if b.kind == algorithm.KindSlidingLog {
			if b.carry != nil {
				t.Errorf("%s: a sliding log's state is a sorted set, not a value to carry", name)
			}
			continue
		}
		if b.carry == nil {
			t.Errorf("%s: no --#parse / --#encode marks", name)
			continue
		}
		c := b.carry
		if !strings.Contains(c.encode, "value") {
			t.Errorf("%s: the encode region does not set value", name)
		}
		for _, v := range c.encodeVars {
			if strings.ContainsAny(v, " +-*/()") {
				t.Errorf("%s: --#encode names %q, not a variable (the region becomes a function of them)", name, v)
			}
		}
	}
}

func TestSplitCarryMarks(t *testing.T) {
	base := "local x = 1\n--@report\nlocal rem = 1\n--@commit\nlocal ttl = 2\n"
	for _, bad := range []string{
		base + "--#encode x\nlocal value = ''\n",                                                     // no --#parse
		"local a\n--#parse a\na = 1\n" + base[len("local x = 1\n"):],                                 // no --#parsed, no --#encode
		"local a\n--#parse a\na = 1\n--#parsed\n" + base[len("local x = 1\n"):],                      // no --#encode
		"local a\n--#parse a\na = 1\n--#parsed\n" + base[len("local x = 1\n"):] + "--#encode a, b\n", // counts differ
	} {
		if _, err := split(bad); err == nil {
			t.Errorf("split accepted:\n%s", bad)
		}
	}
	good := "local a\n--#parse a\na = 1\n--#parsed\nlocal fits = true\n--@report\nlocal rem = 1\n--@commit\nlocal ttl = 2\n--#encode a\nlocal value = 'x'\n"
	b, err := split(good)
	if err != nil || b.carry == nil || b.carry.parse != "a = 1\n" || strings.TrimSpace(b.carry.encode) != "local value = 'x'" {
		t.Fatalf("split: %+v, %v", b.carry, err)
	}
}
