package layout

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneConstructorOfTheReconciler: the manager, the envtest suites and
// the benchmarks get their reconciler from controllers.New, so none of
// them drifts from what the operator runs (a benchmark copy once read
// its environments without the ownwrites client the manager uses). Only
// controllers' own unit tests, which call its pure methods, may spell the
// struct out.
func TestOneConstructorOfTheReconciler(t *testing.T) {
	constructors := 0
	eachGoFile(t, true, func(fset *token.FileSet, rel string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok || !namesReconciler(lit.Type) {
				return true
			}
			switch {
			case rel == filepath.Join("controllers", "new.go"):
				constructors++
			case filepath.Dir(rel) == "controllers" && f.Name.Name == "controllers" && strings.HasSuffix(rel, "_test.go"):
			default:
				t.Errorf("%s: a DevEnvironmentReconciler made by hand; use controllers.New (and set what a test changes on its result)", fset.Position(lit.Pos()))
			}
			return true
		})
	})
	if constructors != 1 {
		t.Errorf("controllers/new.go makes the reconciler %d times, want once", constructors)
	}
}

func namesReconciler(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "DevEnvironmentReconciler"
	case *ast.SelectorExpr:
		return e.Sel.Name == "DevEnvironmentReconciler"
	}
	return false
}
