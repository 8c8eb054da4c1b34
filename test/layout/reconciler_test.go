package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// TestOneConstructorOfTheReconciler: the manager, the envtest suites and
// the benchmarks get their reconciler from controllers.New, so none of
// them drifts from what the operator runs (a benchmark copy once read
// its environments without the ownwrites client the manager uses). Only
// controllers' own unit tests, which call its pure methods, may spell the
// struct out.
func TestOneConstructorOfTheReconciler(t *testing.T) {
	root, err := filepath.Abs(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	constructors := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "bin" || strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
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
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
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
