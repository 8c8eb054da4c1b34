package layout

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// TestE2ETimesSaysEachCasesTime: hack/e2e-times.sh, which make e2e runs on
// its log, prints one line per top-level case with go test's own figure
// and result, in the order the cases ended (parallel cases interleave
// their lines, subtests are indented), as .ci/run prints its steps.
func TestE2ETimesSaysEachCasesTime(t *testing.T) {
	log := strings.Join([]string{
		"=== RUN   TestSample",
		"    sample_test.go:40: --- PASS: TestQuoted (9.00s)",
		"--- PASS: TestSample (124.26s)",
		"=== RUN   TestRegistryOutageOf5MinutesHeals",
		"=== PAUSE TestRegistryOutageOf5MinutesHeals",
		"=== RUN   TestDebugAttachesDelve",
		"=== PAUSE TestDebugAttachesDelve",
		"=== CONT  TestRegistryOutageOf5MinutesHeals",
		"=== CONT  TestDebugAttachesDelve",
		"=== RUN   TestDebugAttachesDelve/off",
		"    --- PASS: TestDebugAttachesDelve/off (3.10s)",
		"--- FAIL: TestDebugAttachesDelve (149.40s)",
		"--- PASS: TestRegistryOutageOf5MinutesHeals (412.70s)",
		"--- SKIP: TestOLMInstallsAndUpgradesDevloop (0.00s)",
		"FAIL",
	}, "\n") + "\n"
	cmd := exec.Command("bash", filepath.Join(testenv.RepoRoot(), "hack", "e2e-times.sh"))
	cmd.Stdin = strings.NewReader(log)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/e2e-times.sh: %v\n%s", err, out)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		got = append(got, strings.Join(strings.Fields(l), " "))
	}
	want := []string{
		"e2e: 'TestSample' took 124s (PASS)",
		"e2e: 'TestDebugAttachesDelve' took 149s (FAIL)",
		"e2e: 'TestRegistryOutageOf5MinutesHeals' took 413s (PASS)",
		"e2e: 'TestOLMInstallsAndUpgradesDevloop' took 0s (SKIP)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("hack/e2e-times.sh printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
