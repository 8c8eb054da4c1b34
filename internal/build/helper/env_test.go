package helper

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/devloop-dev/devloop/internal/build"
)

// TestHelperBuildRunGetsTheBuildEnv: the run step of a warm build runs the
// command with the pod's environment and then the build's (--env), the
// last of a name winning, as a container's env does.
func TestHelperBuildRunGetsTheBuildEnv(t *testing.T) {
	workspace := t.TempDir()
	fetchedAs(t, workspace, "b1")
	t.Setenv("FROM_POD", "pod")
	err := runHelper([]string{"build", "--step", build.WarmStepRun, "--token", "b1", "--dir", workspace,
		"--command", `["sh","-c","echo \"$FROM_POD $DEVLOOP_REVISION $VERSION\" > out.txt"]`,
		"--env", `[{"name":"DEVLOOP_REVISION","value":"0123abc"},{"name":"VERSION","value":"v0"},{"name":"VERSION","value":"v1"}]`})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(workspace, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "pod 0123abc v1\n" {
		t.Errorf("the command saw %q, want %q", got, "pod 0123abc v1\n")
	}
}
