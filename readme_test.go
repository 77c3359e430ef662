package ratelimit_test

// TestREADME compiles every ```go block of README.md, so that what a
// newcomer copies from it builds. The convention for README blocks:
//
//   - A block whose first line starts with "package" is a complete file. It
//     is built as a package of its own (a main package is a program that
//     must compile as written, imports included).
//   - Any other ```go block is a fragment: import declarations, one for
//     every package the fragment names, then statements. The imports go at
//     the top of a file and the statements into the body of a function
//     returning error (so a fragment may "return err"), in a package whose
//     variables stand for what the prose around a fragment assumes: ctx,
//     key, alg, st, redisStore, lim, p, mux and api (see fragmentPreamble;
//     add there what a new fragment assumes). Variables a fragment declares
//     at its top level need not be used: the test uses them.
//   - A block is built in the module of this repository that provides the
//     packages it imports: the root module, or an adapter's module (a block
//     importing .../grpcratelimit is built in grpcratelimit/, with that
//     module's go.mod), so blocks may import what that module requires.
//   - A block that is not Go to compile is fenced as something else
//     (```text, ```sh), or preceded by the line
//     "<!-- readme-test: skip (reason) -->".
//
// Compile errors are reported at README.md's lines. Blocks are written
// under a temporary directory, whose name starts with "_" so that
// "./..." never matches it, inside the module that builds them, and built
// with one "go build" and one "go vet" per module.

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
	"slices"
	"strings"
	"testing"
)

// fragmentPreamble declares what fragments may use without declaring it.
// Add to it rather than to a fragment when the prose around a block
// assumes something it does not show.
const fragmentPreamble = `package fragments

import (
	"context"
	"net/http"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

var (
	ctx        context.Context            // a request's context
	key        string                     // a request's key
	alg        algorithm.Algorithm        // any algorithm, e.g. from tokenbucket.New
	st         store.Store[string]        // any store
	redisStore store.Store[string]        // a goredisstore or rueidisstore Store
	lim        *ratelimit.Limiter[string] // a Limiter
	p          *ratelimit.Policy[string]  // a Policy
	mux        *http.ServeMux             // the server's mux
	api        http.Handler               // the handler to limit
)
`

const rootModule = "github.com/go-ratelimit/ratelimit"

// readmeBlock is one ```go block of README.md.
type readmeBlock struct {
	line int      // README line of the block's first line of code
	code []string // the block's lines
}

func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("builds README's Go blocks with the go command; skipped with -short")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	blocks, err := readmeGoBlocks("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go blocks; has the fence changed?")
	}

	// Sort the blocks into packages, by module directory.
	type module struct {
		dir       string
		fragments []string          // files of the fragments package
		programs  map[string]string // package directory → file
	}
	modules := map[string]*module{}
	for _, b := range blocks {
		src, imports, err := blockSource(b)
		if err != nil {
			t.Errorf("README.md:%d: %v", b.line, err)
			continue
		}
		dir, err := moduleDirOf(imports)
		if err != nil {
			t.Errorf("README.md:%d: %v", b.line, err)
			continue
		}
		m := modules[dir]
		if m == nil {
			m = &module{dir: dir, programs: map[string]string{}}
			modules[dir] = m
		}
		if src.complete {
			m.programs[fmt.Sprintf("line%d", b.line)] = src.text
		} else {
			m.fragments = append(m.fragments, src.text)
		}
	}

	readme, err := filepath.Abs("README.md")
	if err != nil {
		t.Fatal(err)
	}
	// One subtest per module, in parallel: most of the time is the go
	// command's.
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
				// Positions in README.md, whatever the directory.
				text = strings.ReplaceAll(text, "//line README.md:", "//line "+readme+":")
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if len(m.fragments) > 0 {
				write("fragments", "preamble.go", fragmentPreamble)
				for i, f := range m.fragments {
					write("fragments", fmt.Sprintf("fragment%d.go", i), f)
				}
				pkgs = append(pkgs, "./"+filepath.Base(tmp)+"/fragments")
			}
			for _, pkg := range slices.Sorted(maps.Keys(m.programs)) {
				write(pkg, "main.go", m.programs[pkg])
				pkgs = append(pkgs, "./"+filepath.Base(tmp)+"/"+pkg)
			}
			// go build of one main package writes its binary into the
			// working directory (a module of the repository) unless told
			// where: nowhere (-o /dev/null builds and discards).
			for _, args := range [][]string{{"build", "-o", os.DevNull}, {"vet"}} {
				verb := args[0]
				cmd := exec.Command(goCmd, append(args, pkgs...)...)
				cmd.Dir = m.dir
				cmd.Env = append(os.Environ(), "GOWORK=off")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("go %s of README.md's blocks in module %s: %v\n%s", verb, m.dir, err, out)
				}
			}
		})
	}
}

// readmeGoBlocks returns the ```go blocks of the Markdown file name, but
// those preceded by a "<!-- readme-test: skip" line.
func readmeGoBlocks(name string) ([]readmeBlock, error) {
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
			cur = &readmeBlock{line: n + 1}
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
func blockSource(b readmeBlock) (blockFile, []string, error) {
	first := 0
	for first < len(b.code) && strings.TrimSpace(b.code[first]) == "" {
		first++
	}
	if first < len(b.code) && strings.HasPrefix(b.code[first], "package ") {
		text := fmt.Sprintf("//line README.md:%d\n%s\n", b.line, strings.Join(b.code, "\n"))
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
	fn := fmt.Sprintf("readmeLine%d", b.line)
	head := fmt.Sprintf("package fragments\n\n//line README.md:%d\n%s\n\nfunc %s() error {\n", b.line, strings.Join(b.code[:i], "\n"), fn)
	text := fmt.Sprintf("%s//line README.md:%d\n%s\n}\n", head, b.line+i, strings.Join(b.code[i:], "\n"))
	imports, err := importsOf(text)
	if err != nil {
		return blockFile{}, nil, err
	}
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
	// Use what each top-level statement declares on the line after it, as
	// the prose after the fragment would: code lines i+k of the block hold
	// statements; uses[k] is what to insert after line k.
	uses := map[int][]string{}
	for _, s := range body {
		var names []*ast.Ident
		switch s := s.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				for _, e := range s.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						names = append(names, id)
					}
				}
			}
		case *ast.DeclStmt:
			if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, spec := range g.Specs {
					names = append(names, spec.(*ast.ValueSpec).Names...)
				}
			}
		}
		k := fset.PositionFor(s.End(), true).Line - (b.line + i)
		for _, id := range names {
			if id.Name != "_" {
				uses[k] = append(uses[k], "_ = "+id.Name)
			}
		}
	}
	var out strings.Builder
	out.WriteString(head)
	fmt.Fprintf(&out, "//line README.md:%d\n", b.line+i)
	for k, line := range b.code[i:] {
		out.WriteString(line + "\n")
		if u := uses[k]; len(u) > 0 {
			fmt.Fprintf(&out, "%s\n//line README.md:%d\n", strings.Join(u, "; "), b.line+i+k+1)
		}
	}
	// The function returns an error, so that a fragment may.
	if n := len(body); n == 0 || !isReturn(body[n-1]) {
		out.WriteString("return nil\n")
	}
	out.WriteString("}\n")
	return blockFile{text: out.String()}, imports, nil
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
