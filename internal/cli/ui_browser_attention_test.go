package cli

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// The summary counts what needs attention, Stalled first, and the tab's
// title and favicon take the worst state: red while one environment is
// Stalled, green once every one is Ready.
func TestUISummaryPutsStalledFirstAndColoursTheTab(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-attention")
	createEnv(t, ns, "good", teamSpec())
	createEnv(t, ns, "broken", teamSpec())
	ready := func(env *v1alpha1.DevEnvironment) {
		env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready", "2/2 components ready")}
	}
	playOperator(t, ns, "good", ready)
	playOperator(t, ns, "broken", func(env *v1alpha1.DevEnvironment) {
		env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionStalled, metav1.ConditionTrue, "InvalidSpec", "spec.components[1].helm.values: not an object")}
	})
	_, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the summary: Stalled first, then Ready, naming broken", `(() => {
	  const c = [...document.querySelectorAll('#summary [data-count]')].map(e => e.textContent);
	  return c.join(',') === '1 Stalled,1 Ready' && document.querySelector('#summary [data-attention="`+ns+`/broken"]');
	})()`)
	browser.WaitJS(t, bctx, "a red tab", `document.title.startsWith('1 need attention') && document.getElementById('favicon').dataset.state === 'Stalled' && decodeURIComponent(document.getElementById('favicon').href).includes('#cf222e')`)

	playOperator(t, ns, "broken", ready)
	browser.WaitJS(t, bctx, "a green tab once both are Ready", `document.title === 'devloop' && document.getElementById('favicon').dataset.state === 'Ready' && decodeURIComponent(document.getElementById('favicon').href).includes('#1a7f37') && !document.querySelector('#summary [data-attention]')`)
}

// A Rebuild click in the resource list is one reconcile request, the
// annotation kubectl devloop push writes, made as the user; a second
// click while the first is in flight makes none.
func TestUIRebuildRequestsOneReconcile(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-rebuild")
	createEnv(t, ns, "team", teamSpec())
	base, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/team/graph")
	browser.WaitJS(t, bctx, "web's rebuild button beside the graph", `document.querySelector('#resources [data-resource="component/web"] [data-rebuild="web"]')`)
	if n := browser.EvalString(t, bctx, `String(document.querySelectorAll('#resources [data-resource="component/crds"] [data-rebuild]').length)`); n != "0" {
		t.Errorf("crds (no image) has %s rebuild buttons, want none", n)
	}
	w, err := k8sWatch(ns, "team")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	browser.WaitJS(t, bctx, "two clicks on Rebuild", `(() => { const b = document.querySelector('[data-rebuild="web"]'); b.click(); b.click(); return true })()`)
	browser.WaitJS(t, bctx, "the rebuild's answer", `document.querySelector('[data-rebuild-result="web"]').textContent.trim().startsWith('requested')`)
	if n := reconcileWrites(t, w); n != 1 {
		t.Fatalf("two clicks wrote %d reconcile requests, want one", n)
	}
	env := &v1alpha1.DevEnvironment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "team"}, env); err != nil {
		t.Fatal(err)
	}
	if env.Annotations[v1alpha1.ReconcileRequestAnnotation] == "" {
		t.Errorf("no %s annotation after the rebuild", v1alpha1.ReconcileRequestAnnotation)
	}
}

// reconcileWrites counts the distinct reconcile requests the watched
// environment received, up to the first one and every one already
// delivered after it.
func reconcileWrites(t *testing.T, w watch.Interface) int {
	t.Helper()
	seen := map[string]bool{}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			env, ok := ev.Object.(*v1alpha1.DevEnvironment)
			if v := env.Annotations[v1alpha1.ReconcileRequestAnnotation]; ok && ev.Type == watch.Modified && v != "" {
				seen[v] = true
			}
		case <-timeout:
			t.Fatal("no reconcile request seen")
		default:
			if len(seen) > 0 {
				return len(seen)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
