// Package funclen holds a test that keeps the repository's functions
// short.
package funclen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/repotree"
)

// maxLines is the most lines a function of the library may span, from
// its func line to its closing brace (issue 42).
const maxLines = 80

// TestFunctionLength fails on a function or method longer than maxLines
// in any .go file of the repository (every module, cmd/ included) but
// tests and generated files, and lists them.
func TestFunctionLength(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var long []string
	files, err := repotree.GoFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found only %d .go files under %s: not the repository's root?", len(files), root)
	}
	for _, rel := range files {
		if strings.HasSuffix(rel, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if ast.IsGenerated(f) {
			continue
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxLines {
				long = append(long, fmt.Sprintf("%s: %s: %d lines", rel, name(fn), n))
			}
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
