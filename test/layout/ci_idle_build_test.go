package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// idleBuild is the body of .ci/run's background build of Flux's and OLM's
// controllers: setsid bash -c '…' &.
var idleBuild = regexp.MustCompile(`(?s)setsid bash -c '([^']*make flux-binaries olm-binaries[^']*)' &`)

// TestCIGitopsBuildRunsOnIdleCPUOnly: the build beside make e2e is meant
// to take only CPU nothing else wants. It runs in a session of its own
// (setsid), and where the kernel groups tasks by session (autogroups,
// Debian's default) each group gets an even share whatever its tasks'
// policy: SCHED_IDLE alone left the build half the CPU. Its command line
// is run here with the build replaced by a report of the scheduling it
// got: SCHED_IDLE, in an autogroup at nice 19.
func TestCIGitopsBuildRunsOnIdleCPUOnly(t *testing.T) {
	if _, err := os.Stat("/proc/self/autogroup"); err != nil {
		t.Skip("this kernel has no autogroups: SCHED_IDLE is enough")
	}
	if _, err := exec.LookPath("chrt"); err != nil {
		t.Skip("no chrt here (.ci/run needs it: util-linux)")
	}
	script, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	m := idleBuild.FindStringSubmatch(string(script))
	if m == nil {
		t.Fatal(".ci/run builds Flux's and OLM's controllers in no `setsid bash -c '…' &` this test reads with: " + idleBuild.String())
	}
	body := strings.Replace(m[1], "make flux-binaries olm-binaries", `bash -c "cat /proc/self/autogroup; chrt -p \$\$"`, 1)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setsid", "bash", "-c", body)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the build's command line: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "bin", "ci-gitops-build.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "nice 19") || !strings.Contains(string(got), "SCHED_IDLE") {
		t.Errorf("the build ran with\n%s\nwant SCHED_IDLE in an autogroup at nice 19", got)
	}
}
