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

// TestBuildImageChoosesABackendThroughTheInterface parses internal/build
// and fails when buildImage chooses how an image is built itself: names a
// backend (in-process, builder Jobs, warm builders), tests run or
// run.keepWarm, or applies a policy the decorators own (push, push
// behind, record, the unchanged-inputs check). The choice is made in one
// place (backendFor), so a new backend is one file and one line there.
func TestBuildImageChoosesABackendThroughTheInterface(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, filepath.Join(testenv.RepoRoot(), "internal", "build"), func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var body *ast.BlockStmt
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "buildImage" {
					body = fn.Body
				}
			}
		}
	}
	if body == nil {
		t.Fatal("no func buildImage in internal/build: is this check still about anything?")
	}
	forbidden := map[string]string{
		"buildWarm": "a backend", "buildWithJobs": "a backend", "warmBuilders": "a backend",
		"builderJobs": "a backend", "inProcess": "a backend", "Prepare": "the in-process backend",
		"KeepWarm": "the choice of backend", "Run": "the choice of backend",
		"Push": "the publishing decorator", "pushBehind": "the publishing decorator",
		"recordBuilt": "the recording decorator", "stillPushed": "the onlyChanged decorator",
	}
	usesInterface := false
	ast.Inspect(body, func(n ast.Node) bool {
		// A selector's name is an identifier too, so this sees
		// s.buildWarm and img.Run.KeepWarm as well as bare names.
		if id, ok := n.(*ast.Ident); ok {
			if what, bad := forbidden[id.Name]; bad {
				t.Errorf("%s: buildImage names %s, which is %s's business: choose and wrap backends in backendFor",
					fset.Position(id.Pos()), id.Name, what)
			}
			usesInterface = usesInterface || id.Name == "backendFor"
		}
		return true
	})
	if !usesInterface {
		t.Error("buildImage does not call backendFor: how does it choose a backend?")
	}
}

// TestBackendsTakeTheirTurnThroughTheDecorator: the turn per build cache
// claim is a policy around every backend (takingTurns, lanes.go), not a
// check each backend makes its own way: outside lanes.go no file of
// internal/build asks who holds a lane, and backendFor wraps every
// backend in takingTurns, so a new backend that starts builders gets its
// turn from there (and none without it: waitTurn refuses).
func TestBackendsTakeTheirTurnThroughTheDecorator(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, filepath.Join(testenv.RepoRoot(), "internal", "build"), func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	lanePolicy := map[string]bool{"busyLane": true, "busyLaneJob": true, "busyWarmBuild": true, "busyTestJob": true, "laneOf": true}
	wrapped := false
	for _, pkg := range pkgs {
		for name, f := range pkg.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				if fn, ok := n.(*ast.FuncDecl); ok && fn.Name.Name == "backendFor" {
					ast.Inspect(fn.Body, func(n ast.Node) bool {
						if id, ok := n.(*ast.Ident); ok && id.Name == "takingTurns" {
							wrapped = true
						}
						return true
					})
				}
				if id, ok := n.(*ast.Ident); ok && lanePolicy[id.Name] && filepath.Base(name) != "lanes.go" {
					t.Errorf("%s: %s asks the lanes itself: take the turn from the takingTurns decorator (b.waitTurn, b.turn.lane)",
						fset.Position(id.Pos()), id.Name)
				}
				return true
			})
		}
	}
	if !wrapped {
		t.Error("backendFor does not wrap the backends in takingTurns: which backend takes turns on its build cache claim?")
	}
}
