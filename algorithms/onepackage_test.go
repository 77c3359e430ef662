package algorithms_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/repotree"
)

// TestOnePlace checks issue 42's "an algorithm is one package": each of
// gcra, slidingwindow and fixedwindow is named (its import path, or its
// name as an identifier or a string in code) in at most 2 library files
// of the repository outside its own package: comment lines, _test.go
// files and cmd/ aside. The same count in shell:
//
//	grep -rnE 'ratelimit/gcra"|\bgcra\b' --include=*.go . | grep -v '_test\.go:' |
//	  grep -v '^\./cmd/' | grep -v '^\./gcra/' | grep -vE '^[^:]+:[0-9]+:\s*//' |
//	  cut -d: -f1 | sort -u
func TestOnePlace(t *testing.T) {
	const most = 2
	all, err := repotree.GoFiles("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gcra", "slidingwindow", "fixedwindow"} {
		named := regexp.MustCompile(`ratelimit/` + name + `"|\b` + name + `\b`)
		var files []string
		for _, rel := range all {
			if strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, name+"/") || strings.HasSuffix(rel, "_test.go") {
				continue
			}
			if names(t, filepath.Join("..", rel), named) {
				files = append(files, rel)
			}
		}
		slices.Sort(files)
		if len(files) > most {
			t.Errorf("%s is named in %d library files outside its package, want at most %d: %s", name, len(files), most, strings.Join(files, ", "))
		}
	}
}

// names reports whether a line of the file at path that is not a comment
// matches named.
func names(t *testing.T, path string, named *regexp.Regexp) bool {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "//") && named.MatchString(line) {
			return true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return false
}
