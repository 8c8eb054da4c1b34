package cli

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// A build's and a test run's lines in the combined log, and in the
// run's own log, carry the time their pod wrote them (the kubelet's
// timestamps, 2020-01-02 here), not the time the plugin read them, as
// pod lines already do.
func TestUIBuildAndTestLinesCarryThePodsTime(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-logtimes")
	createEnv(t, ns, "team", teamSpec())
	build, run := job(t, ns, "team-web-build"), job(t, ns, "team-unit-1")
	create(t, jobPod(build, "team-web-build-pod"), jobPod(run, "team-unit-1-pod"))
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		now := metav1.Now()
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseBuilding,
			Images: []v1alpha1.ImageStatus{{Name: "web", Build: &v1alpha1.BuildStatus{Job: "team-web-build", Result: v1alpha1.BuildRunning, StartTime: &now}}}}}
		env.Status.Tests = []v1alpha1.TestStatus{{Name: "unit", Runs: []v1alpha1.TestRun{{Number: 1, Trigger: "OnChange", Result: v1alpha1.ResultRunning, StartTime: &now, JobName: "team-unit-1"}}}}
	})
	opts := testOptions()
	opts.Logs = kubeletUntilDeleted{}
	base, url := launchDashboard(t, opts, "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/team/logs")
	lines := `[...document.querySelectorAll('#logview .line')]`
	browser.WaitJS(t, bctx, "the build's and the run's lines in the combined log", lines+`.some(l => l.dataset.resource === 'build/web/web' && l.textContent.includes('team-web-build-pod/test line 3')) && `+
		lines+`.some(l => l.dataset.resource === 'test/unit' && l.textContent.includes('team-unit-1-pod/test line 3'))`)
	notThePods := lines + `.filter(l => /team-(web-build|unit-1)-pod\/(test|fetch) line/.test(l.textContent) && !(l.dataset.time || '').startsWith('2020-01-02T03:04:')).map(l => (l.dataset.time || 'no time') + ' ' + l.textContent).slice(0, 3).join('; ')`
	if bad := browser.EvalString(t, bctx, notThePods); bad != "" {
		t.Errorf("combined log: build and test lines not stamped with the pod's own time: %s", bad)
	}

	// The run's own log (its row's link opens it) too.
	browser.WaitJS(t, bctx, "the run's own log chosen", `(() => { const s = document.getElementById('logtarget'); s.value = [...s.options].find(o => o.textContent === 'test unit (latest run)').value; s.dispatchEvent(new Event('change')); return true })()`)
	browser.WaitJS(t, bctx, "the run's lines", lines+`.some(l => l.textContent.includes('team-unit-1-pod/test line 3')) && !`+lines+`.some(l => l.dataset.resource)`)
	if bad := browser.EvalString(t, bctx, notThePods); bad != "" {
		t.Errorf("the run's log: lines not stamped with the pod's own time: %s", bad)
	}
}
