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

// TestOnlyTheDeployEngineAsksWhichDeployKind parses every non-test Go file
// of the module and fails when one outside internal/deploy and api/
// compares a component's helm or manifests with nil: which kind a
// component deploys is asked of the API type's accessors (Deployed,
// DeploySource, DeployNamespace, ImageValues…) or decided by the deploy
// engine's kinds, so a third kind is added in those two places, not in
// every package that once asked.
func TestOnlyTheDeployEngineAsksWhichDeployKind(t *testing.T) {
	root, err := filepath.Abs(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	allowed := 0
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
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		owner := strings.HasPrefix(rel, "internal/deploy/") || strings.HasPrefix(rel, "api/")
		ast.Inspect(f, func(n ast.Node) bool {
			kind := deployKindTest(n)
			switch {
			case kind == "":
			case owner:
				allowed++
			default:
				t.Errorf("%s tests whether a component's %s is nil: ask the component (v1alpha1 accessors) or internal/deploy",
					fset.Position(n.Pos()), kind)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if allowed == 0 {
		t.Fatal("not even internal/deploy or api/ compares helm or manifests with nil: is this check still about anything?")
	}
}

// deployKindTest returns "Helm" or "Manifests" when n compares x.Helm or
// x.Manifests with nil, else "".
func deployKindTest(n ast.Node) string {
	b, ok := n.(*ast.BinaryExpr)
	if !ok || (b.Op != token.EQL && b.Op != token.NEQ) {
		return ""
	}
	for _, pair := range [][2]ast.Expr{{b.X, b.Y}, {b.Y, b.X}} {
		sel, ok := pair[0].(*ast.SelectorExpr)
		if ok && isIdent(pair[1], "nil") && (sel.Sel.Name == "Helm" || sel.Sel.Name == "Manifests") {
			return sel.Sel.Name
		}
	}
	return ""
}
