package luascript

import (
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// The composer drops comment lines, which would cut a block comment in
// two: no embedded file may use one. And no composed script keeps a
// comment line or a blank one.
func TestNoBlockComments(t *testing.T) {
	texts := map[string]string{"prelude": prelude, "load": loadHash, "store": storeHash}
	for _, k := range algorithm.Kinds() {
		texts[k.Name] = k.Body
	}
	for name, text := range texts {
		if strings.Contains(text, "--[[") || strings.Contains(text, "[[") {
			t.Errorf("%s.lua has a long bracket, which the composer's comment stripping would break", name)
		}
	}
	for _, names := range [][]string{{"tokenbucket"}, {"slidinglog"}, {"gcra", "slidinglog", "fixedwindow"}} {
		s := compose(names)
		for i, line := range strings.SplitAfter(s.Source, "\n") {
			if i == 0 || line == "" {
				continue // the prelude's first line names the script; "" follows the last newline
			}
			if trimmed := strings.TrimSpace(line); trimmed == "" || strings.HasPrefix(trimmed, "--") {
				t.Errorf("script %s keeps the line %q", s.Name, line)
			}
		}
		if len(s.Source) == 0 {
			t.Errorf("script %s is empty", s.Name)
		}
	}
}
