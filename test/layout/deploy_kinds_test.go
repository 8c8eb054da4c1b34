package layout

import (
	"go/ast"
	"go/token"
	"strings"
	"testing"
)

// TestOnlyTheDeployEngineAsksWhichDeployKind parses every non-test Go file
// of the module and fails when one outside internal/deploy and api/
// compares a component's helm or manifests with nil: which kind a
// component deploys is asked of the API type's accessors (Deployed,
// DeploySource, DeployNamespace, ImageValues…) or decided by the deploy
// engine's kinds, so a third kind is added in those two places, not in
// every package that once asked.
func TestOnlyTheDeployEngineAsksWhichDeployKind(t *testing.T) {
	allowed := 0
	eachGoFile(t, false, func(fset *token.FileSet, rel string, f *ast.File) {
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
	})
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
