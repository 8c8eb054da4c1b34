package layout

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
)

const module = "github.com/devloop-dev/devloop/"

// TestToolingAssemblesImagesWithoutTheBuildEngine keeps the seam between
// image assembly (internal/image) and build orchestration (internal/build
// and the pods and test runs it shares code with): the tooling that makes
// devloop's own images assembles and pushes them, and has no use for
// builder Jobs, warm builders or a reconcile's status. Were it to import
// the engine again, it would build (and break) with every change to it.
func TestToolingAssemblesImagesWithoutTheBuildEngine(t *testing.T) {
	orchestration := []string{"internal/build", "internal/pods", "internal/testrun"}
	for _, tool := range []string{"internal/olm", "internal/operatorimage", "internal/devcluster"} {
		deps := depsOf(t, tool)
		if !slices.Contains(deps, module+"internal/image") {
			t.Errorf("./%s no longer depends on internal/image: is this check still about anything?", tool)
		}
		for _, p := range orchestration {
			if slices.Contains(deps, module+p) {
				t.Errorf("./%s depends on %s: image assembly belongs in internal/image", tool, p)
			}
		}
	}
}

// TestTestRunsDoNotDependOnBuilds: what test and builder pods share (the
// workspace, helper containers, cache claims) is in internal/pods, so the
// test run engine does not depend on the build engine.
func TestTestRunsDoNotDependOnBuilds(t *testing.T) {
	if slices.Contains(depsOf(t, "internal/testrun"), module+"internal/build") {
		t.Error("./internal/testrun depends on internal/build: what builder and test pods share belongs in internal/pods")
	}
}

// depsOf is `go list -deps` of one of devloop's packages (not its tests).
func depsOf(t *testing.T, pkg string) []string {
	t.Helper()
	root, err := filepath.Abs(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "./"+pkg)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./%s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}
