package layout

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnePlaceReadsAnEnginesError fails when a file of controllers looks
// into an engine's error by its kind (fault.AsStalled, AsWaiting,
// IsUnavailable, IsPermanent), or one other than outcome.go asks
// fault.Classify: the kinds become the boundary's classes in
// internal/fault alone, the class is read once, by classify, and
// summarize, resultFor, the
// transitions and the component walk act on that class. An engine (a new
// one too) cannot be read two ways, and no step special-cases one; the
// conditions themselves are the owners' (TestOnlyTheOwnerWritesACondition).
func TestOnePlaceReadsAnEnginesError(t *testing.T) {
	readers := map[string]bool{"AsStalled": true, "AsWaiting": true, "IsUnavailable": true, "IsPermanent": true, "Classify": true}
	read := 0
	eachGoFile(t, false, func(fset *token.FileSet, rel string, f *ast.File) {
		if filepath.Dir(rel) != "controllers" {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || !isIdent(sel.X, "fault") || !readers[sel.Sel.Name] {
				return true
			}
			if strings.HasSuffix(rel, "/outcome.go") && sel.Sel.Name == "Classify" {
				read++
				return true
			}
			t.Errorf("%s reads an engine's error (fault.%s): ask classify (controllers/outcome.go), which asks fault.Classify, for its class",
				fset.Position(sel.Pos()), sel.Sel.Name)
			return true
		})
	})
	if read == 0 {
		t.Fatal("controllers/outcome.go reads no fault class: is this check still about anything?")
	}
}
