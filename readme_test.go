package ratelimit_test

// TestREADME compiles every ```go block of README.md and of the guides in
// docs/*.md (not docs/design), so that what a newcomer copies from them
// builds exactly as pasted. The convention for those blocks:
//
//   - A block whose first line but comments starts with "package" is a
//     complete file. It is built as a package of its own (a main package is
//     a program that must compile as written, imports included); one that
//     declares a func TestXxx is a test file, vetted and run with go test.
//   - Any other ```go block is a fragment: import declarations, one for
//     every package the fragment names, then statements, built as the body
//     of a function returning error (so a fragment may "return err"), and
//     nothing else: no variable is declared for it, and none of its own is
//     used for it. A fragment that needs a context, a store or a limiter
//     declares it; a variable it declares and does not use fails the test
//     ("declared and not used"), as it would fail the reader who pastes it.
//   - A block is built in the module of this repository that provides the
//     packages it imports: the root module, or an adapter's module (a block
//     importing .../grpcratelimit is built in grpcratelimit/, with that
//     module's go.mod), so blocks may import what that module requires.
//   - A block that is not Go to compile is fenced as something else
//     (```text, ```sh), or preceded by the line
//     "<!-- readme-test: skip (reason) -->".
//
// Compile errors are reported at the Markdown file's lines. Blocks are
// written under a temporary directory, whose name starts with "_" so that
// "./..." never matches it, inside the module that builds them, and built
// with one "go build" and one "go vet" per module. TestREADMEStrict checks
// that a fragment gets no help: an unused variable and an undeclared ctx
// both fail.

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

const rootModule = "github.com/go-ratelimit/ratelimit"

// guideFiles returns the Markdown files whose Go blocks TestREADME builds:
// README.md and docs/*.md.
func guideFiles() ([]string, error) {
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		return nil, err
	}
	return append([]string{"README.md"}, docs...), nil
}

// readmeBlock is one ```go block of a Markdown file.
type readmeBlock struct {
	file string   // the Markdown file, absolute
	line int      // line of the block's first line of code
	code []string // the block's lines
}

func (b readmeBlock) String() string {
	return fmt.Sprintf("%s:%d", filepath.Base(b.file), b.line)
}

func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("builds README's Go blocks with the go command; skipped with -short")
	}
	// In parallel with TestWithBoundedMemory, the package's other long
	// test: this one mostly waits on the go command, that one runs on one
	// processor.
	t.Parallel()
	files, err := guideFiles()
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	for _, name := range files {
		bs, err := readmeGoBlocks(name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "README.md" && len(bs) == 0 {
			t.Fatal("README.md has no ```go blocks; has the fence changed?")
		}
		blocks = append(blocks, bs...)
	}
	buildBlocks(t, blocks, func(t *testing.T, module string, out []byte, err error) {
		t.Errorf("go build/vet of the Go blocks built in module %s: %v\n%s", module, err, out)
	})
}

// TestREADMEStrict checks that TestREADME's fragments get no help: a
// fragment that declares a variable and never uses it, and one that uses
// a ctx it never declares, fail to build, each at its own line.
func TestREADMEStrict(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command; skipped with -short")
	}
	file, err := filepath.Abs("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := []readmeBlock{
		{file: file, line: 1001, code: []string{
			`import "github.com/go-ratelimit/ratelimit/tokenbucket"`,
			``,
			`alg, err := tokenbucket.PerSecond(2)`,
			`if err != nil {`,
			`	return err`,
			`}`,
		}},
		{file: file, line: 2001, code: []string{
			`return ctx.Err()`,
		}},
	}
	failed := false
	buildBlocks(t, blocks, func(t *testing.T, module string, out []byte, err error) {
		failed = true
		for _, want := range []string{
			"README.md:1003: declared and not used: alg",
			"README.md:2001: undefined: ctx",
		} {
			if !strings.Contains(string(out), want) {
				t.Errorf("building the fragments: %q missing from\n%s", want, out)
			}
		}
	})
	if !failed {
		t.Error("a fragment with an unused variable and one with an undeclared ctx built")
	}
}

// buildBlocks builds blocks, each in the module that provides what it
// imports, and calls fail for each module whose blocks do not build or
// vet, with the module's subtest. It reports a block it cannot place
// with t.Errorf.
func buildBlocks(t *testing.T, blocks []readmeBlock, fail func(t *testing.T, module string, out []byte, err error)) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	// Sort the blocks into packages, by module directory.
	type module struct {
		dir       string
		fragments []string          // files of the fragments package
		programs  map[string]string // package directory → file
	}
	modules := map[string]*module{}
	for i, b := range blocks {
		src, imports, err := blockSource(b, fmt.Sprintf("block%d", i))
		if err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		dir, err := moduleDirOf(imports)
		if err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		m := modules[dir]
		if m == nil {
			m = &module{dir: dir, programs: map[string]string{}}
			modules[dir] = m
		}
		if src.complete {
			m.programs[fmt.Sprintf("block%d", i)] = src.text
		} else {
			m.fragments = append(m.fragments, src.text)
		}
	}

	// One subtest per module, in parallel: most of the time is the go
	// command's.
	t.Run("modules", func(t *testing.T) {
		for _, dir := range slices.Sorted(maps.Keys(modules)) {
			m := modules[dir]
			name := filepath.ToSlash(dir)
			if name == "." {
				name = "core"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				tmp, err := os.MkdirTemp(m.dir, "_readmetest")
				if err != nil {
					t.Fatal(err)
				}
				defer os.RemoveAll(tmp)
				var pkgs []string
				write := func(pkg, name, text string) {
					t.Helper()
					dir := filepath.Join(tmp, pkg)
					if err := os.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if len(m.fragments) > 0 {
					for i, f := range m.fragments {
						write("fragments", fmt.Sprintf("fragment%d.go", i), f)
					}
					pkgs = append(pkgs, "./"+filepath.Base(tmp)+"/fragments")
				}
				var tests []string // packages of blocks that are tests, to run
				for _, pkg := range slices.Sorted(maps.Keys(m.programs)) {
					text := m.programs[pkg]
					if isTestFile(text) {
						write(pkg, "block_test.go", text)
						tests = append(tests, "./"+filepath.Base(tmp)+"/"+pkg)
						continue
					}
					write(pkg, "main.go", text)
					pkgs = append(pkgs, "./"+filepath.Base(tmp)+"/"+pkg)
				}
				// go build of one main package writes its binary into the
				// working directory (a module of the repository) unless
				// told where: nowhere (-o /dev/null builds and discards).
				// -gcflags=-e reports every error, not the first ten.
				for _, args := range [][]string{{"build", "-gcflags=-e", "-o", os.DevNull}, {"vet"}, {"test", "-count=1"}} {
					targets := pkgs
					switch args[0] {
					case "vet":
						targets = append(slices.Clone(pkgs), tests...)
					case "test":
						targets = tests
					}
					if len(targets) == 0 {
						continue
					}
					cmd := exec.Command(goCmd, append(args, targets...)...)
					cmd.Dir = m.dir
					cmd.Env = append(os.Environ(), "GOWORK=off")
					if out, err := cmd.CombinedOutput(); err != nil {
						fail(t, m.dir, out, err)
						return
					}
				}
			})
		}
	})
}

// readmeGoBlocks returns the ```go blocks of the Markdown file name, but
// those preceded by a "<!-- readme-test: skip" line.
func readmeGoBlocks(name string) ([]readmeBlock, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		blocks []readmeBlock
		cur    *readmeBlock
		skip   bool
		prev   string
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && strings.TrimSpace(line) == "```":
			if !skip {
				blocks = append(blocks, *cur)
			}
			cur = nil
		case cur != nil:
			cur.code = append(cur.code, line)
		case strings.TrimSpace(line) == "```go":
			cur = &readmeBlock{file: abs, line: n + 1}
			skip = strings.HasPrefix(strings.TrimSpace(prev), "<!-- readme-test: skip")
		}
		prev = line
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: ```go block never closed", name, cur.line-1)
	}
	return blocks, sc.Err()
}

type blockFile struct {
	text     string
	complete bool // a file of its own, not a fragment
}

// blockSource returns the Go file that builds b, and the paths b imports.
// A fragment becomes the function fn of package fragments, its statements
// exactly as written.
func blockSource(b readmeBlock, fn string) (blockFile, []string, error) {
	first := 0
	for first < len(b.code) && strings.TrimSpace(b.code[first]) == "" {
		first++
	}
	for first < len(b.code) && strings.HasPrefix(strings.TrimSpace(b.code[first]), "//") {
		first++ // a complete file's comments and build constraints
	}
	for first < len(b.code) && strings.TrimSpace(b.code[first]) == "" {
		first++
	}
	if first < len(b.code) && strings.HasPrefix(strings.TrimSpace(b.code[first]), "package ") {
		text := fmt.Sprintf("//line %s:%d\n%s\n", b.file, b.line, strings.Join(b.code, "\n"))
		imports, err := importsOf(text)
		return blockFile{text: text, complete: true}, imports, err
	}

	// A fragment: leading import declarations, then statements.
	i := first
imports:
	for i < len(b.code) {
		switch line := strings.TrimSpace(b.code[i]); {
		case line == "import (":
			for i < len(b.code) && strings.TrimSpace(b.code[i]) != ")" {
				i++
			}
			i++
		case line == "" || strings.HasPrefix(line, "import "):
			i++
		default:
			break imports
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "package fragments\n\n//line %s:%d\n%s\n\nfunc %s() error {\n", b.file, b.line, strings.Join(b.code[:i], "\n"), fn)
	fmt.Fprintf(&out, "//line %s:%d\n%s\n", b.file, b.line+i, strings.Join(b.code[i:], "\n"))
	text := out.String() + "}\n"
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "", text, parser.SkipObjectResolution)
	if err != nil {
		return blockFile{}, nil, err
	}
	var body []ast.Stmt
	for _, d := range file.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn {
			body = fd.Body.List
		}
	}
	// The function returns an error, so that a fragment may; one that
	// does not end in a return gets one after its last line.
	if n := len(body); n == 0 || !isReturn(body[n-1]) {
		out.WriteString("return nil\n")
	}
	out.WriteString("}\n")
	imports, err := importsOf(out.String())
	if err != nil {
		return blockFile{}, nil, err
	}
	return blockFile{text: out.String()}, imports, nil
}

// isTestFile reports whether the complete file text declares a test
// function.
func isTestFile(text string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", text, parser.SkipObjectResolution)
	if err != nil {
		return false
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") {
			return true
		}
	}
	return false
}

func isReturn(s ast.Stmt) bool {
	_, ok := s.(*ast.ReturnStmt)
	return ok
}

// importsOf returns the paths the Go file text imports.
func importsOf(text string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", text, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, s := range f.Imports {
		paths = append(paths, strings.Trim(s.Path.Value, "\"`"))
	}
	return paths, nil
}

// moduleDirOf returns the directory of the module of this repository that
// provides the packages of this repository among imports: "." for the root
// module, else the innermost directory with a go.mod on their paths.
func moduleDirOf(imports []string) (string, error) {
	dir := "."
	for _, p := range imports {
		rel, ok := strings.CutPrefix(p, rootModule+"/")
		if !ok {
			continue
		}
		d := "."
		for c := rel; c != "." && c != "/"; c = path.Dir(c) {
			if _, err := os.Stat(filepath.Join(filepath.FromSlash(c), "go.mod")); err == nil {
				d = filepath.FromSlash(c)
				break
			}
		}
		switch {
		case d == ".":
		case dir == ".":
			dir = d
		case dir != d:
			return "", fmt.Errorf("imports packages of modules %s and %s; no module builds both", dir, d)
		}
	}
	return dir, nil
}

// TestREADMELinks checks the relative links of README.md and docs/*.md:
// each names a file or directory of the repository, and an anchor, a
// heading of that file (as GitHub makes anchors of headings), so that
// moving a section cannot leave a link behind.
func TestREADMELinks(t *testing.T) {
	files, err := guideFiles()
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	code := regexp.MustCompile("`[^`]*`")   // inline code holds no links
	anchors := map[string]map[string]bool{} // file → its headings' anchors
	anchorsOf := func(name string) map[string]bool {
		if a, ok := anchors[name]; ok {
			return a
		}
		a := map[string]bool{}
		anchors[name] = a
		text, err := os.ReadFile(name)
		if err != nil {
			return a
		}
		fenced := false
		for _, line := range strings.Split(string(text), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
			}
			if fenced || !strings.HasPrefix(line, "#") {
				continue
			}
			a[githubAnchor(strings.TrimLeft(line, "# "))] = true
		}
		return a
	}
	for _, name := range files {
		text, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		fenced := false
		for n, line := range strings.Split(string(text), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			line = code.ReplaceAllString(line, "")
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				if file == "" {
					file = name
				} else {
					file = filepath.Join(filepath.Dir(name), filepath.FromSlash(file))
				}
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: link %s: no file %s", name, n+1, target, file)
					continue
				}
				if anchor != "" && !anchorsOf(file)[anchor] {
					t.Errorf("%s:%d: link %s: no heading of %s has the anchor %q", name, n+1, target, file, anchor)
				}
			}
		}
	}
}

// githubAnchor returns the anchor GitHub gives a Markdown heading: lower
// case, punctuation but hyphens and underscores dropped, spaces made
// hyphens.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
