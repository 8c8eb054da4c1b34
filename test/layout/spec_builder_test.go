package layout

import (
	"go/ast"
	"go/token"
	"maps"
	"slices"
	"strings"
	"testing"
)

// specLiteralAllowed are the files that may spell a DevEnvironment with a
// spec as a literal, each with why: the test is about the literal's shape
// itself, not setup a builder would write.
var specLiteralAllowed = map[string]string{
	"test/crd/validation_test.go": "the CRD's validation is of the literal's shape: each case edits one field of a valid spec",
}

// TestOneSpecBuilder: tests build their DevEnvironments with test/builder
// (or operatortest.Env, the same builder pointed at envtest's registry).
// A DevEnvironment literal with a Spec, or a DevEnvironmentSpec literal
// with fields, pasted into a test is a second builder growing back: the
// next required field or default is then set in one place and missed in
// the others.
func TestOneSpecBuilder(t *testing.T) {
	found := map[string][]string{}
	eachGoFile(t, true, func(fset *token.FileSet, rel string, f *ast.File) {
		if strings.HasPrefix(rel, "test/builder/") || !strings.HasSuffix(rel, "_test.go") && !strings.HasPrefix(rel, "test/") {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if ok && (namesDevEnvironment(lit.Type) && hasKey(lit, "Spec") || namesSpec(lit.Type) && len(lit.Elts) > 0) {
				found[rel] = append(found[rel], fset.Position(lit.Pos()).String())
			}
			return true
		})
	})
	if len(found) == 0 {
		t.Fatal("no DevEnvironment or spec literal anywhere, test/builder's own tests included: is this check still about anything?")
	}
	for _, rel := range slices.Sorted(maps.Keys(found)) {
		if strings.HasPrefix(rel, "test/builder/") {
			continue
		}
		if _, ok := specLiteralAllowed[rel]; !ok {
			t.Errorf("%s: a v1alpha1.DevEnvironment literal with a Spec, or a DevEnvironmentSpec literal (%s); build it with test/builder", rel, strings.Join(found[rel], ", "))
		}
	}
	for rel := range specLiteralAllowed {
		if _, ok := found[rel]; !ok {
			t.Errorf("%s is allowed a DevEnvironment literal but has none: drop it from specLiteralAllowed", rel)
		}
	}
}

// namesDevEnvironment: the type is v1alpha1.DevEnvironment.
func namesDevEnvironment(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "DevEnvironment" && isIdent(sel.X, "v1alpha1")
}

// namesSpec: the type is v1alpha1.DevEnvironmentSpec, or
// DevEnvironmentSpec inside package v1alpha1's own tests.
func namesSpec(e ast.Expr) bool {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name == "DevEnvironmentSpec"
	}
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "DevEnvironmentSpec" && isIdent(sel.X, "v1alpha1")
}

// hasKey: the literal sets the field key.
func hasKey(lit *ast.CompositeLit, key string) bool {
	for _, elt := range lit.Elts {
		if kv, ok := elt.(*ast.KeyValueExpr); ok && isIdent(kv.Key, key) {
			return true
		}
	}
	return false
}
