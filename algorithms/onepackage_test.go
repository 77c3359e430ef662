package algorithms_test

import (
	"bufio"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/repotree"
)

// TestOnePlace checks issue 42's and 51's "an algorithm is one package",
// for every registered algorithm (its package is the directory holding
// its Lua body, <name>.lua):
//
//   - its package is named (its import path, or its name as an
//     identifier or a string in code) in at most 2 library files of the
//     repository outside it: the list (package algorithms) and the
//     conformance kit's reference models (store/storetest/model.go).
//     Library files are the .go files of packages other than main,
//     _test.go files and cmd/ aside;
//   - no .lua file outside it names it in code (the scripts checked in
//     under generated/ directories, which the composer makes from the
//     bodies, aside);
//   - no library file and no .lua file outside the algorithms' packages
//     holds a Kind's letter as a literal ('T', "T"): what a store needs
//     of a Kind it asks the registry (algorithm.KindOf) or the Kind's
//     own hooks, never tests its letter.
//
// Comment lines are not code. The first count in shell, for gcra:
//
//	grep -rnE 'ratelimit/gcra"|\bgcra\b' --include=*.go . | grep -v '_test\.go:' |
//	  grep -v '^\./cmd/' | grep -v '^\./gcra/' | grep -vE '^[^:]+:[0-9]+:\s*//' |
//	  cut -d: -f1 | sort -u
func TestOnePlace(t *testing.T) {
	const most = 2
	goFiles, err := repotree.GoFiles("..")
	if err != nil {
		t.Fatal(err)
	}
	luaFiles, err := repotree.Files("..", ".lua")
	if err != nil {
		t.Fatal(err)
	}
	var library []string
	for _, rel := range goFiles {
		if !strings.HasPrefix(rel, "cmd/") && !strings.HasSuffix(rel, "_test.go") && !isMain(t, rel) {
			library = append(library, rel)
		}
	}
	luaFiles = slices.DeleteFunc(luaFiles, func(rel string) bool { return slices.Contains(strings.Split(rel, "/"), "generated") })

	var dirs, letters []string
	for _, k := range algorithm.Kinds() {
		dir := ""
		for _, rel := range luaFiles {
			if path.Base(rel) == k.Name+".lua" {
				dir = path.Dir(rel)
			}
		}
		if dir == "" {
			t.Errorf("%s: no %s.lua in the repository: where is its package?", k.Name, k.Name)
			continue
		}
		if !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
		letters = append(letters, string(k.Letter))
	}
	if len(dirs) < 5 || len(letters) < 6 {
		t.Fatalf("found the packages %v and the letters %v: want the six algorithms' at least", dirs, letters)
	}
	inside := func(rel string, dirs ...string) bool {
		for _, d := range dirs {
			if strings.HasPrefix(rel, d+"/") {
				return true
			}
		}
		return false
	}

	for _, dir := range dirs {
		name := path.Base(dir)
		named := regexp.MustCompile(`ratelimit/` + name + `"|\b` + name + `\b`)
		var files []string
		for _, rel := range library {
			if !inside(rel, dir) && names(t, rel, "//", named) {
				files = append(files, rel)
			}
		}
		if len(files) > most {
			t.Errorf("%s is named in %d library files outside its package, want at most %d: %s", name, len(files), most, strings.Join(files, ", "))
		}
		for _, rel := range luaFiles {
			if !inside(rel, dir) && names(t, rel, "--", named) {
				t.Errorf("%s names %s in code: what a script needs of an algorithm comes from its package", rel, name)
			}
		}
	}

	set := "[" + strings.Join(letters, "") + "]"
	goLetter, luaLetter := regexp.MustCompile(`'`+set+`'`), regexp.MustCompile(`['"]`+set+`['"]`)
	for _, rel := range library {
		if !inside(rel, dirs...) && names(t, rel, "//", goLetter) {
			t.Errorf("%s holds a Kind's letter (one of %v): ask the registry, or the Kind's hooks", rel, letters)
		}
	}
	for _, rel := range luaFiles {
		if !inside(rel, dirs...) && names(t, rel, "--", luaLetter) {
			t.Errorf("%s holds a Kind's letter (one of %v): ask the Kind's own Lua", rel, letters)
		}
	}
}

// isMain reports whether the Go file at rel (from the repository's root)
// is of a program, package main.
func isMain(t *testing.T, rel string) bool {
	return names(t, rel, "//", regexp.MustCompile(`^package main$`))
}

// names reports whether a line of the file at rel (from the repository's
// root) that is not a comment (starting with comment) matches named.
func names(t *testing.T, rel, comment string, named *regexp.Regexp) bool {
	f, err := os.Open(filepath.Join("..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, comment) && named.MatchString(line) {
			return true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return false
}
