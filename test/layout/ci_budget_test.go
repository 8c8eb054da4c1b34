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

// TestCIOptionalStepsFitTheBudget: a step of .ci/run past make e2e-ci runs
// only when what it costs cold fits in what is left of the budget, and a
// skipped step says so (hack/ci-budget.sh). CI stops a run at 90 minutes:
// the run of 2026-11-29 went past them before its last step, and nothing
// of that session landed.
func TestCIOptionalStepsFitTheBudget(t *testing.T) {
	root := testenv.RepoRoot()
	script := `. hack/ci-budget.sh
CI_START=$(( $(date +%s) - 100 )) CI_BUDGET=160
ci_optional 100 echo too-long
ci_optional 30 echo fits`
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ci: skipped 'echo too-long': (59|60)s left of the 160s budget, and it takes about 100s cold`),
		regexp.MustCompile(`(?m)^fits\nci: 'echo fits' took 0s$`),
	} {
		if !want.MatchString(got) {
			t.Errorf("output\n%s\nwant a line matching %s", got, want)
		}
	}
	if strings.Contains(got, "\ntoo-long\n") || strings.HasPrefix(got, "too-long\n") {
		t.Errorf("the step that did not fit ran:\n%s", got)
	}

	// Every make after make e2e-ci runs through ci_optional.
	data, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, "timed make e2e-ci")
	if i < 0 {
		t.Fatal(".ci/run runs no `timed make e2e-ci`")
	}
	for _, line := range strings.Split(s[i+len("timed make e2e-ci"):], "\n") {
		line = strings.TrimSpace(line)
		if regexp.MustCompile(`^(timed\s+)?make\s`).MatchString(line) {
			t.Errorf(".ci/run after make e2e-ci: %q is not run through ci_optional", line)
		}
	}
}
