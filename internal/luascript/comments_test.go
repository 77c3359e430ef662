package luascript

import (
	"regexp"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// unsubstituted finds a body's reference the composer left ($1, $id…);
// a Lua pattern's anchor ('…$') is no reference.
var unsubstituted = regexp.MustCompile(`\$[A-Za-z0-9]`)

// The composer keeps the bodies' comments but drops its own marks (--#,
// --@ lines); a block comment would hide a mark, so no embedded file may
// use one. No composed script keeps a mark, nor two blank lines in a row.
func TestNoBlockComments(t *testing.T) {
	texts := map[string]string{"prelude": prelude, "hash": hashSource, "set": setSource, "convert": convertSource, "used": usedFrame,
		"batch": batchSource, "opbatch": opBatchSource}
	for _, k := range algorithm.Kinds() {
		texts[k.Name] = k.Body
	}
	for name, text := range texts {
		if strings.Contains(text, "--[[") || strings.Contains(text, "[[") {
			t.Errorf("%s.lua has a long bracket, which would hide the composer's marks", name)
		}
	}
	for name, src := range generatedScripts() {
		if strings.Contains(src, "\n\n\n") {
			t.Errorf("%s keeps two blank lines in a row", name)
		}
		for line := range strings.Lines(src) {
			if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "--#") || strings.HasPrefix(trimmed, "--@") || unsubstituted.MatchString(line) {
				t.Errorf("%s keeps the line %q", name, line)
			}
		}
	}
}
