package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// exitTrap matches an EXIT trap of a shell script: trap '…' EXIT.
var exitTrap = regexp.MustCompile(`(?m)^trap '([^']*)' EXIT$`)

// TestCIExitTrapsKeepAPassedRun: .ci/run runs under set -e, and so do
// the commands of its EXIT trap. A trap command that fails when there is
// nothing left to clean (a kill of a process group that has already
// ended, a cluster that is already down) turned a run that had printed
// "CI passed" into exit 1. Each trap is run here, in a directory without
// the cluster script and with a process group that does not exist, after
// a script that passed: the script must still exit 0.
func TestCIExitTrapsKeepAPassedRun(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	traps := exitTrap.FindAllStringSubmatch(string(script), -1)
	if len(traps) == 0 {
		t.Fatal(".ci/run sets no EXIT trap; this test reads them with: " + exitTrap.String())
	}
	for _, trap := range traps {
		body := "set -euo pipefail\ngitops_build=2147483646\ntrap '" + trap[1] + "' EXIT\ntrue\n"
		cmd := exec.Command("bash", "-c", body)
		cmd.Dir = t.TempDir()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf(".ci/run's EXIT trap %q turns a passed run into a failure when there is nothing to clean: %v\n%s", trap[1], err, out)
		}
	}
}
