package tokenbucket_test

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/repotree"
)

// TestNoIntegerDivisionRate checks that no Go file of this repository, and
// no Go block of its README, sets a Rate to a division of integer
// constants that is not whole (Rate: 100 / 60 is 1, not 1.67): the trap
// the Rate field documents, which New cannot see.
func TestNoIntegerDivisionRate(t *testing.T) {
	fset := token.NewFileSet()
	files, blocks := 0, 0
	all, err := repotree.GoFiles("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range all {
		f, err := parser.ParseFile(fset, filepath.Join("..", rel), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files++
		for _, p := range integerDivisionRates(f) {
			t.Errorf("%v: Rate is a division of integer constants that is not whole", fset.Position(p))
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for i, block := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1) {
		if f := parseBlock(fset, string(block[1])); f != nil {
			blocks++
			for _, p := range integerDivisionRates(f) {
				t.Errorf("README.md, Go block %d, %v: Rate is a division of integer constants that is not whole", i+1, fset.Position(p))
			}
		}
	}
	if files < 100 || blocks < 2 {
		t.Errorf("checked %d Go files and %d README blocks: not the repository", files, blocks)
	}
}

// TestIntegerDivisionRates checks the check: it finds the trap, and only it.
func TestIntegerDivisionRates(t *testing.T) {
	fset := token.NewFileSet()
	for src, want := range map[string]int{
		"c := Config{Capacity: 20, Rate: 100 / 60}":              1,
		"c := Config{Capacity: 20, Rate: float64(-(7)/2)}":       1,
		"c := Config{Capacity: 20, Rate: 100.0 / 60}":            0,
		"c := Config{Capacity: 20, Rate: 120 / 60}":              0,
		"c := Config{Capacity: 20, Rate: float64(n) / 60}":       0,
		"c := Config{Capacity: 20 / 3, Rate: 2}":                 0,
		"c := []Config{{Rate: 1 / 3}, {Rate: 2 / 3}, {Rate: 1}}": 2,
	} {
		if got := len(integerDivisionRates(parseBlock(fset, src))); got != want {
			t.Errorf("%s: got %d traps, want %d", src, got, want)
		}
	}
}

// leadingImports matches the imports a README fragment starts with.
var leadingImports = regexp.MustCompile(`^\s*(?:import\s*\((?s:.*?)\)|import\s+"[^"]*")\s*`)

// parseBlock parses a README block: a whole file, or imports then
// statements, parsed as a function's body; nil when it is neither.
func parseBlock(fset *token.FileSet, block string) *ast.File {
	if strings.HasPrefix(block, "package ") {
		f, err := parser.ParseFile(fset, "block.go", block, 0)
		if err != nil {
			return nil
		}
		return f
	}
	imports := leadingImports.FindString(block)
	stmts := block[len(imports):]
	f, err := parser.ParseFile(fset, "block.go", "package p\n"+imports+"\nfunc _() {\n"+stmts+"\n}\n", 0)
	if err != nil {
		return nil
	}
	return f
}

// integerDivisionRates returns where f sets a field Rate to an expression
// holding a division of integer constants with a remainder.
func integerDivisionRates(f *ast.File) []token.Pos {
	var found []token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		if key, ok := kv.Key.(*ast.Ident); !ok || key.Name != "Rate" {
			return true
		}
		ast.Inspect(kv.Value, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && b.Op == token.QUO {
				x, xok := intConst(b.X)
				y, yok := intConst(b.Y)
				if xok && yok && constant.Sign(y) != 0 && constant.Sign(constant.BinaryOp(x, token.REM, y)) != 0 {
					found = append(found, b.Pos())
				}
			}
			return true
		})
		return true
	})
	return found
}

// intConst evaluates e when it is an integer constant made of literals.
func intConst(e ast.Expr) (constant.Value, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.INT {
			return constant.MakeFromLiteral(e.Value, e.Kind, 0), true
		}
	case *ast.ParenExpr:
		return intConst(e.X)
	case *ast.UnaryExpr:
		if x, ok := intConst(e.X); ok && (e.Op == token.SUB || e.Op == token.ADD) {
			return constant.UnaryOp(e.Op, x, 0), true
		}
	case *ast.BinaryExpr:
		x, xok := intConst(e.X)
		y, yok := intConst(e.Y)
		switch {
		case !xok || !yok:
		case e.Op == token.ADD || e.Op == token.SUB || e.Op == token.MUL:
			return constant.BinaryOp(x, e.Op, y), true
		case (e.Op == token.QUO || e.Op == token.REM) && constant.Sign(y) != 0:
			op := e.Op
			if op == token.QUO {
				op = token.QUO_ASSIGN // integer division
			}
			return constant.BinaryOp(x, op, y), true
		}
	}
	return nil, false
}
