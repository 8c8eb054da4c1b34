package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// TestBuildImageChoosesARunBackendThroughTheInterface parses
// internal/build/engine.go and fails when buildImage names a concrete run
// backend (builder Jobs, warm builders) or tests run.keepWarm itself: the
// choice is made in one place (runBackendFor), so a new backend is one
// file and one line there, not another branch in buildImage.
func TestBuildImageChoosesARunBackendThroughTheInterface(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(), "internal", "build", "engine.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var body *ast.BlockStmt
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "buildImage" {
			body = fn.Body
		}
	}
	if body == nil {
		t.Fatal("no func buildImage in internal/build/engine.go: is this check still about anything?")
	}
	concrete := map[string]bool{"buildWarm": true, "buildWithJobs": true, "KeepWarm": true,
		"jobsBackend": true, "warmBackend": true}
	usesInterface := false
	ast.Inspect(body, func(n ast.Node) bool {
		// A selector's name is an identifier too, so this sees
		// s.buildWarm and img.Run.KeepWarm as well as bare names.
		if id, ok := n.(*ast.Ident); ok {
			if concrete[id.Name] {
				t.Errorf("buildImage names %s: choose the run backend through runBackendFor", id.Name)
			}
			usesInterface = usesInterface || id.Name == "runBackendFor"
		}
		return true
	})
	if !usesInterface {
		t.Error("buildImage does not call runBackendFor: how does it choose a run backend?")
	}
}
