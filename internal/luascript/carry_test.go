package luascript

import (
	"strings"
	"testing"
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
		if _, err := split(bad); err == nil {
			t.Errorf("split accepted:\n%s", bad)
		}
	}
	b, err := split(parse + "local fits = true\n" + tail + "--#encode a\nlocal value = 'x'\n")
	if err != nil || b.carry == nil || b.carry.parse != "a = 1\n" || strings.TrimSpace(b.carry.encode) != "local value = 'x'" {
		t.Fatalf("split: %+v, %v", b.carry, err)
	}
}
