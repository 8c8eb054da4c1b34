package cli

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// The logs tab opens on the combined log: the component's pods and the
// suite's newest run in one pane, each line tagged with its resource. A
// rollout continues it with the new pod's lines, also with the resource
// filter set to the component, which hides the test's lines.
func TestUICombinedLogFollowsARolloutWithAResourceFilter(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-combined")
	createEnv(t, ns, "team", teamSpec())
	one := int32(1)
	create(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{Replicas: &one,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}}}})
	old := pod(ns, "web-old", map[string]string{"app": "web"}, "web")
	j := job(t, ns, "team-unit-1")
	create(t, old, jobPod(j, "team-unit-1-pod"))
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		now := metav1.Now()
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseReady,
			Inventory: []v1alpha1.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"}}}}
		env.Status.Tests = []v1alpha1.TestStatus{{Name: "unit", Runs: []v1alpha1.TestRun{{Number: 1, Trigger: "OnChange", Result: v1alpha1.ResultRunning, StartTime: &now, JobName: "team-unit-1"}}}}
	})
	opts := testOptions()
	opts.Logs = kubeletUntilDeleted{}
	base, url := launchDashboard(t, opts, "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/team/logs")
	lines := `[...document.querySelectorAll('#logview .line')]`
	browser.WaitJS(t, bctx, "the pod's and the test's lines in one pane, tagged and shown", lines+`.some(l => !l.hidden && l.dataset.resource === 'component/web' && l.textContent.includes('web-old/web line 3')) && `+
		lines+`.some(l => !l.hidden && l.dataset.resource === 'test/unit' && l.textContent.includes('team-unit-1-pod/test line 3'))`)
	if f := browser.EvalString(t, bctx, `document.getElementById('logresource').value`); f != "" {
		t.Errorf("the combined log opens filtered to %q, want every resource", f)
	}

	// Only web's lines.
	browser.WaitJS(t, bctx, "the filter set to web", `(() => { const s = document.getElementById('logresource'); s.value = 'component/web'; s.dispatchEvent(new Event('change')); return true })()`)
	browser.WaitJS(t, bctx, "the test's lines hidden, web's shown", lines+`.filter(l => !l.hidden).length > 0 && `+lines+`.filter(l => !l.hidden).every(l => l.dataset.resource === 'component/web')`)

	// The rollout.
	create(t, pod(ns, "web-new", map[string]string{"app": "web"}, "web"))
	if err := k8s.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, bctx, "the new pod's lines, shown under the filter", lines+`.some(l => !l.hidden && l.dataset.resource === 'component/web' && l.textContent.includes('web-new/web line 3'))`)
	if bad := browser.EvalString(t, bctx, lines+`.filter(l => !l.hidden && l.dataset.resource !== 'component/web').map(l => l.textContent).slice(0, 3).join('; ')`); bad != "" {
		t.Errorf("lines of other resources shown under the filter component/web: %s", bad)
	}
}
