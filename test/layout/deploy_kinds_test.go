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

// TestOnlyTheAccessorsListWhatAComponentOwns fails when a Go file outside
// internal/deploy and api/ reads a component status's Inventory or its
// release's Workloads: what a component owns is asked of
// ComponentStatus.OwnedObjects and OwnsObjects
// (api/v1alpha1/status_owned.go), so removal, live update, the plugin's
// logs and the dashboard follow a third deploy kind without an edit.
// The status tree prints each field of status as written (a release
// line, a manifests line): it shows status, it lists nothing it acts on.
func TestOnlyTheAccessorsListWhatAComponentOwns(t *testing.T) {
	shows := map[string]bool{"internal/cli/status_tree.go": true}
	eachGoFile(t, false, func(fset *token.FileSet, rel string, f *ast.File) {
		if strings.HasPrefix(rel, "internal/deploy/") || strings.HasPrefix(rel, "api/") || shows[rel] {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Inventory" || sel.Sel.Name == "Workloads") {
				t.Errorf("%s reads a component's %s: ask st.OwnedObjects() or st.OwnsObjects() (api/v1alpha1/status_owned.go)",
					fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	})
}
