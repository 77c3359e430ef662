// Package funclen holds a test that keeps the repository's functions
// short.
package funclen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the most lines a function of the library may span, from
// its func line to its closing brace (issue 42).
const maxLines = 80

// pending are the functions over maxLines that another change of issue
// 42 is splitting, by file and name; remove an entry when it lands.
var pending = map[string]bool{
	"internal/redistable/redistable.go: Open": true,
}

// TestFunctionLength fails on a function or method longer than maxLines
// in any .go file of the repository (every module, cmd/ included) but
// tests, generated files and pending, and lists them.
func TestFunctionLength(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var long []string
	seen := map[string]bool{}
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// As the go tool, skip names starting with "." or "_": TestREADME
			// builds its blocks in a "_readmetest" directory meanwhile.
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		files++
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			rel, _ := filepath.Rel(root, path)
			at := filepath.ToSlash(rel) + ": " + name(fn)
			if pending[at] {
				seen[at] = true
				if n <= maxLines {
					t.Logf("%s is %d lines now: remove it from pending", at, n)
				}
				continue
			}
			if n > maxLines {
				long = append(long, fmt.Sprintf("%s: %d lines", at, n))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("found only %d .go files under %s: not the repository's root?", files, root)
	}
	for at := range pending {
		if !seen[at] {
			t.Logf("%s is gone: remove it from pending", at)
		}
	}
	if len(long) > 0 {
		t.Errorf("%d functions are longer than %d lines; split them along their steps:\n%s", len(long), maxLines, strings.Join(long, "\n"))
	}
}

// name returns fn's name, with its receiver's type for a method.
func name(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	if idx, ok := typ.(*ast.IndexListExpr); ok {
		typ = idx.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
