package layout

import (
	"go/ast"
	"go/token"
	"strings"
	"testing"
)

// TestOneChoiceOfLogReader fails when a product file outside
// internal/pods calls an engine's LogsFor itself: which reader a log
// shown in status is read with (the tenant's, or the scripted one of
// tests) is pods.ReaderFor's choice, for tails and counts alike, so no
// engine reads a log as the operator where the tenant could not.
func TestOneChoiceOfLogReader(t *testing.T) {
	eachGoFile(t, false, func(fset *token.FileSet, rel string, f *ast.File) {
		if strings.HasPrefix(rel, "internal/pods/") || strings.HasPrefix(rel, "test/") || strings.HasPrefix(rel, "internal/operator/") {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "LogsFor" {
					t.Errorf("%s calls LogsFor itself: take the reader from pods.ReaderFor (or pods.TailFor)", fset.Position(call.Pos()))
				}
			}
			return true
		})
	})
}
