package algorithms_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
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
	for _, name := range []string{"gcra", "slidingwindow", "fixedwindow"} {
		named := regexp.MustCompile(`ratelimit/` + name + `"|\b` + name + `\b`)
		var files []string
		err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel := filepath.ToSlash(strings.TrimPrefix(path, ".."+string(filepath.Separator)))
			if d.IsDir() {
				// As the go tool, skip testdata and names starting with "." or "_"
				// (TestREADME builds its blocks in a "_readmetest" directory
				// while this test may run).
				if rel == "cmd" || rel == name || d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) && path != ".." {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
				return nil
			}
			if names(t, path, named) {
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
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
