package ratelimit_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The root package is what a newcomer reads first: its whole
// documentation, `go doc -all .`, stays readable in one sitting (issue 51).
// A new exported declaration has to earn its place against these bounds.
const (
	maxDocLines        = 350
	maxDocDeclarations = 75
)

// declLine matches the first line of a declaration in go doc's output;
// a const or var group counts once.
var declLine = regexp.MustCompile(`(?m)^(func|type|var|const) `)

func TestRootDocumentationSize(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go doc")
	}
	out, err := exec.Command("go", "doc", "-all", ".").Output()
	if err != nil {
		t.Fatalf("go doc -all .: %v", err)
	}
	lines := strings.Count(string(out), "\n")
	decls := len(declLine.FindAll(out, -1))
	t.Logf("go doc -all . : %d lines, %d declarations", lines, decls)
	if lines > maxDocLines {
		t.Errorf("go doc -all . has %d lines, at most %d", lines, maxDocLines)
	}
	if decls > maxDocDeclarations {
		t.Errorf("go doc -all . has %d declarations, at most %d", decls, maxDocDeclarations)
	}
}
