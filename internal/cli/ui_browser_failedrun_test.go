package cli

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// A failed run shows its exit code and the last lines of its log from
// status, and an older run's logs link opens that run's log, not the
// latest run's.
func TestUIFailedRunShowsExitCodeTailAndItsOwnLog(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-failed")
	createEnv(t, ns, "team", teamSpec())
	j1, j2 := job(t, ns, "team-unit-1"), job(t, ns, "team-unit-2")
	create(t, jobPod(j1, "team-unit-1-pod"), jobPod(j2, "team-unit-2-pod"))
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		now := metav1.Now()
		zero, three := int32(0), int32(3)
		env.Status.Tests = []v1alpha1.TestStatus{{Name: "unit", Runs: []v1alpha1.TestRun{
			{Number: 2, Trigger: "OnChange", Result: v1alpha1.ResultFailed, StartTime: &now, CompletionTime: &now, JobName: "team-unit-2", ExitCode: &three,
				Message: "Failed", LogTail: "=== RUN   TestWidget\n    widget_test.go:12: want 2, got 3\n--- FAIL: TestWidget (0.00s)\nFAIL"},
			{Number: 1, Trigger: "OnChange", Result: v1alpha1.ResultPassed, StartTime: &now, CompletionTime: &now, JobName: "team-unit-1", ExitCode: &zero},
		}}}
	})
	opts := testOptions()
	opts.Logs = streamingLogs{}
	base, url := launchDashboard(t, opts, "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/team/tests")
	row := `document.querySelector('[data-runs="unit"] tr[data-run="2"]')`
	browser.WaitJS(t, bctx, "the failed run's exit code and log tail", row+` && `+row+`.textContent.includes('exit 3') && `+row+`.textContent.includes('--- FAIL: TestWidget (0.00s)')`)

	browser.Click(t, bctx, `[data-runs="unit"] tr[data-run="1"] a[data-logs]`)
	lines := `[...document.querySelectorAll('#logview .line')]`
	browser.WaitJS(t, bctx, "run #1's log", lines+`.some(l => l.textContent.includes('team-unit-1-pod/test line 3'))`)
	if st := browser.EvalString(t, bctx, `document.getElementById('logstatus').textContent`); st != "streaming test unit run #1" && st != "ended" {
		t.Errorf("the log's status reads %q, want it to name run #1", st)
	}
	if other := browser.EvalString(t, bctx, `String(`+lines+`.filter(l => l.textContent.includes('team-unit-2-pod')).length)`); other != "0" {
		t.Errorf("run #1's logs link shows %s lines of run #2's pod", other)
	}
}
