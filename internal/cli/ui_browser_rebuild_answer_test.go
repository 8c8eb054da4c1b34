package cli

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// Rebuild's answer follows what status says after the request, with the
// test playing the operator: waiting until the request is handled, then
// building while the build runs, then the build's failure; a second
// request handled by a reconcile that failed before building says why
// nothing was built, not that nothing changed.
func TestUIRebuildAnswerFollowsStatus(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-rebuild-answer")
	spec := teamSpec()
	spec.Components[1].Images = append(spec.Components[1].Images, v1alpha1.ImageSpec{Name: "sidecar", Source: "app", Layers: []v1alpha1.LayerMapping{{From: "bin/sidecar", To: "/sidecar"}}})
	createEnv(t, ns, "team", spec)
	sidecar := v1alpha1.ImageStatus{Name: "sidecar", Digest: "sha256:" + strings.Repeat("5", 64)}
	base, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/team/graph")
	result := `document.querySelector('#resources [data-rebuild-result="web"]').textContent.trim()`
	asked := func() string {
		t.Helper()
		var v string
		waitUntil(t, "the reconcile request", func() bool {
			v = getEnv(t, ns, "team").Annotations[v1alpha1.ReconcileRequestAnnotation]
			return v != ""
		})
		return v
	}
	browser.Click(t, bctx, `#resources [data-rebuild="web"]`)
	browser.WaitJS(t, bctx, "the page waiting for the operator", result+` === 'requested; waiting for the operator'`)
	first := asked()
	started := metav1.Now()
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.LastHandledReconcileAt = first
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseBuilding,
			Images: []v1alpha1.ImageStatus{{Name: "web", Build: &v1alpha1.BuildStatus{Job: "team-web-1", Result: v1alpha1.BuildRunning, StartTime: &started}}, sidecar}}}
	})
	browser.WaitJS(t, bctx, "the page saying building", result+` === 'building…'`)
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		three := int32(3)
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseFailed, Message: "build of web failed: exit code 3",
			Images: []v1alpha1.ImageStatus{{Name: "web", Build: &v1alpha1.BuildStatus{Job: "team-web-1", Result: v1alpha1.BuildFailed, StartTime: &started, CompletionTime: &started, ExitCode: &three}}, sidecar}}}
	})
	browser.WaitJS(t, bctx, "the page saying the build failed", result+` === 'build failed: web (see its build log)'`)

	// Again: the reconcile fails before any build.
	browser.Click(t, bctx, `#resources [data-rebuild="web"]`)
	var second string
	waitUntil(t, "a second reconcile request", func() bool {
		second = asked()
		return second != first
	})
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.LastHandledReconcileAt = second
		env.Status.Components[0].Message = "pushing web: registry unavailable"
	})
	browser.WaitJS(t, bctx, "the page saying why nothing was built", result+` === 'not built: pushing web: registry unavailable'`)

	// Once more, web built: the answer names web's new digest, not the
	// sidecar, whose build did not change.
	browser.Click(t, bctx, `#resources [data-rebuild="web"]`)
	var third string
	waitUntil(t, "a third reconcile request", func() bool {
		third = asked()
		return third != second
	})
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.LastHandledReconcileAt = third
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseReady,
			Images: []v1alpha1.ImageStatus{{Name: "web", Digest: "sha256:" + strings.Repeat("a", 64),
				Build: &v1alpha1.BuildStatus{Job: "team-web-2", Result: v1alpha1.BuildSucceeded, StartTime: &started, CompletionTime: &started}}, sidecar}}}
	})
	browser.WaitJS(t, bctx, "the page naming web's new build only", result+` === 'built web@aaaaaaaaaaaa'`)
}
