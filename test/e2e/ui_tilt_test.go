//go:build e2e

package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/browser"
)

// TestUITiltPieces: what a Tilt user reaches for first, on the real
// cluster with the operator running, through `kubectl devloop ui` in
// Debian's headless Chromium. Beside the sample, a copy with a dependency
// cycle is Stalled: the summary counts it first and colours the tab red.
// The combined log, filtered to web, shows the web pod's lines; a new
// greeting is pushed (without a reconcile request, the source not polled
// during the case) and one click on web's Rebuild is the one reconcile
// request that gets it built and rolled out, the button then naming the
// new build; the same pane goes on with the new pod's lines. A second
// click, nothing changed since, builds nothing and says so.
func TestUITiltPieces(t *testing.T) {
	began := time.Now()
	// The source is not polled during the case: the new greeting gets in
	// through the page's Rebuild (a reconcile resolves the tag at once).
	u := uiOnSample(t, "e2e-ui-tilt", 14*time.Minute, func(env *v1alpha1.DevEnvironment) {
		env.Spec.Sources[0].Interval = &metav1.Duration{Duration: time.Hour}
	})
	bctx, g, env, key := u.bctx, u.g, u.env, u.key

	broken := sampleIn(t, u.ns)
	broken.Name = "broken"
	broken.Spec.Components = append(broken.Spec.Components,
		v1alpha1.Component{Name: "a", DependsOn: []string{"b"}, Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"chart"}}},
		v1alpha1.Component{Name: "b", DependsOn: []string{"a"}, Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"chart"}}})
	broken.Spec.Tests = nil
	g.Expect(u.c.ApplyEnvironment(u.ctx, broken)).To(Succeed())

	// The Stalled copy: first in the summary, the tab red.
	waitEnv(t, client.ObjectKeyFromObject(broken), 3*time.Minute, true, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionStalled)).To(BeTrue())
	})
	waitEnv(t, key, 8*time.Minute, false, readyNow)
	browser.WaitJS(t, bctx, "the summary: 1 Stalled first, naming broken", `(() => {
	  const c = [...document.querySelectorAll('#summary [data-count]')].map(e => e.textContent);
	  return c[0] === '1 Stalled' && c.includes('1 Ready') && document.querySelector('#summary [data-attention="`+u.ns+`/broken"]');
	})()`)
	browser.WaitJS(t, bctx, "a red tab", `document.title.startsWith('1 need attention') && document.getElementById('favicon').dataset.state === 'Stalled'`)

	// The combined log, filtered to web: the running pod's lines.
	envPage := u.envPage()
	browser.Navigate(t, bctx, envPage+"logs")
	browser.WaitJS(t, bctx, "the combined log with its resource filter", `document.getElementById('logresource') && !document.getElementById('logresource').hidden`)
	browser.EvalString(t, bctx, `(() => { const s = document.getElementById('logresource'); s.value = 'component/web'; s.dispatchEvent(new Event('change')); return '' })()`)
	lines := `[...document.querySelectorAll('#logview .line')]`
	browser.WaitJSWithin(t, bctx, "the web pod's lines in the combined log", lines+`.some(l => !l.hidden && l.dataset.resource === 'component/web' && l.textContent.includes('listening on :8080 (hello from devloop)'))`, time.Minute)

	// A new greeting pushed, no reconcile asked: the page's Rebuild asks.
	const greeting = "hello from the dashboard rebuild" // no quote: it goes into a JS string below
	setGreeting(t, u.dir, greeting)
	pushOnly(t, env, u.dir)
	writes := watchReconcileWrites(t, key)
	clicked := time.Now()
	browser.Click(t, bctx, `#resources [data-rebuild="web"]`)
	result := `document.querySelector('#resources [data-rebuild-result="web"]').textContent.trim()`
	// The answer follows status: requested, building, built.
	browser.WaitJS(t, bctx, "the rebuild's answer", `/^(requested|building|built )/.test(`+result+`)`)
	handled := waitEnv(t, key, 8*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Annotations[v1alpha1.ReconcileRequestAnnotation]).NotTo(BeEmpty())
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(env.Annotations[v1alpha1.ReconcileRequestAnnotation]))
	})
	g.Expect(writes()).To(Equal(1), "reconcile requests written by one click")
	t.Logf("rebuild request %s handled %s after the click", handled.Status.LastHandledReconcileAt, time.Since(clicked).Round(time.Second))

	// The rollout: the same pane, still filtered to web, goes on with the
	// new pod's lines.
	browser.WaitJSWithin(t, bctx, "the new pod's lines after the rollout", lines+`.some(l => !l.hidden && l.dataset.resource === 'component/web' && l.textContent.includes('listening on :8080 (`+greeting+`)'))`, 8*time.Minute)
	g.Expect(browser.EvalString(t, bctx, lines+`.filter(l => !l.hidden && l.dataset.resource !== 'component/web').map(l => l.textContent).slice(0, 3).join('; ')`)).To(BeEmpty(), "lines of other resources under the web filter")
	t.Logf("click to the new pod's line on the page: %s", time.Since(clicked).Round(time.Second))
	browser.WaitJSWithin(t, bctx, "the page naming the new build", result+`.startsWith('built web@')`, time.Minute)

	// Nothing changed since: another click builds nothing, and says so.
	was := waitEnv(t, key, time.Minute, false, readyNow).Status.Component("web").Image("web").DeepCopy()
	browser.Click(t, bctx, `#resources [data-rebuild="web"]`)
	browser.WaitJSWithin(t, bctx, "the page saying nothing changed", result+`.startsWith('nothing changed since the last build')`, 3*time.Minute)
	g.Expect(waitEnv(t, key, time.Minute, false, readyNow).Status.Component("web").Image("web")).To(Equal(was), "the image's digest and last build after a Rebuild of unchanged inputs")
	t.Logf("TestUITiltPieces took %s", time.Since(began).Round(time.Second))
}
