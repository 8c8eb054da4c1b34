package layout

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// TestToolingAssemblesImagesWithoutTheBuildEngine keeps the seam between
// image assembly (internal/image) and build orchestration (internal/build
// and the pods and test runs it shares code with): the tooling that makes
// devloop's own images assembles and pushes them, and has no use for
// builder Jobs, warm builders or a reconcile's status. Were it to import
// the engine again, it would build (and break) with every change to it.
func TestToolingAssemblesImagesWithoutTheBuildEngine(t *testing.T) {
	root, err := filepath.Abs(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/devloop-dev/devloop/"
	orchestration := []string{"internal/build", "internal/pods", "internal/testrun"}
	for _, tool := range []string{"internal/olm", "internal/operatorimage", "internal/devcluster"} {
		cmd := exec.Command("go", "list", "-deps", "./"+tool)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v\n%s", tool, err, out)
		}
		deps := strings.Fields(string(out))
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
