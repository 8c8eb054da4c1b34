//go:build e2e

package e2e

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/cli"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// TestUITiltPieces: what a Tilt user reaches for first, on the real
// cluster with the operator running, through `kubectl devloop ui` in
// Debian's headless Chromium. Beside the sample, a copy with a dependency
// cycle is Stalled: the summary counts it first and colours the tab red.
// The combined log, filtered to web, shows the web pod's lines; a new
// greeting is pushed (without a reconcile request, the source not polled
// during the case) and one click on web's Rebuild is the one reconcile
// request that gets it built and rolled out; the same pane goes on with
// the new pod's lines.
func TestUITiltPieces(t *testing.T) {
	c := need(t)
	bctx := browser.Start(t)
	g := NewWithT(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 14*time.Minute)
	defer cancel()
	ns := namespace(t, "e2e-ui-tilt")
	env := sampleIn(t, ns)
	// The source is not polled during the case: the new greeting gets in
	// through the page's Rebuild (a reconcile resolves the tag at once).
	env.Spec.Sources[0].Interval = &metav1.Duration{Duration: time.Hour}
	dir := copyDir(t, c.SampleDir())
	pushDir(t, env, dir)
	g.Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	broken := sampleIn(t, ns)
	broken.Name = "broken"
	broken.Spec.Components = append(broken.Spec.Components,
		v1alpha1.Component{Name: "a", DependsOn: []string{"b"}, Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"chart"}}},
		v1alpha1.Component{Name: "b", DependsOn: []string{"a"}, Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"chart"}}})
	broken.Spec.Tests = nil
	g.Expect(c.ApplyEnvironment(ctx, broken)).To(Succeed())

	out := &lockedBuffer{}
	go func() {
		streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: out}
		cli.Run(ctx, []string{"--kubeconfig", c.Kubeconfig, "-n", ns, "ui", "--no-open"}, streams, cli.Options{})
	}()
	urlRE := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/\?code=[0-9a-f]+`)
	var m []string
	g.Eventually(func() []string { m = urlRE.FindStringSubmatch(out.String()); return m }, time.Minute, 50*time.Millisecond).ShouldNot(BeNil(), "the dashboard's URL")
	base := m[1]
	browser.Navigate(t, bctx, m[0])

	// The Stalled copy: first in the summary, the tab red.
	waitEnv(t, client.ObjectKeyFromObject(broken), 3*time.Minute, true, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionStalled)).To(BeTrue())
	})
	waitEnv(t, key, 8*time.Minute, false, readyNow)
	browser.WaitJS(t, bctx, "the summary: 1 Stalled first, naming broken", `(() => {
	  const c = [...document.querySelectorAll('#summary [data-count]')].map(e => e.textContent);
	  return c[0] === '1 Stalled' && c.includes('1 Ready') && document.querySelector('#summary [data-attention="`+ns+`/broken"]');
	})()`)
	browser.WaitJS(t, bctx, "a red tab", `document.title.startsWith('1 need attention') && document.getElementById('favicon').dataset.state === 'Stalled'`)

	// The combined log, filtered to web: the running pod's lines.
	envPage := base + "/#/env/" + ns + "/" + env.Name + "/"
	browser.Navigate(t, bctx, envPage+"logs")
	browser.WaitJS(t, bctx, "the combined log with its resource filter", `document.getElementById('logresource') && !document.getElementById('logresource').hidden`)
	browser.EvalString(t, bctx, `(() => { const s = document.getElementById('logresource'); s.value = 'component/web'; s.dispatchEvent(new Event('change')); return '' })()`)
	lines := `[...document.querySelectorAll('#logview .line')]`
	browser.WaitJSWithin(t, bctx, "the web pod's lines in the combined log", lines+`.some(l => !l.hidden && l.dataset.resource === 'component/web' && l.textContent.includes('listening on :8080 (hello from devloop)'))`, time.Minute)

	// A new greeting pushed, no reconcile asked: the page's Rebuild asks.
	const greeting = "hello from the dashboard rebuild" // no quote: it goes into a JS string below
	setGreeting(t, dir, greeting)
	pushOnly(t, env, dir)
	writes := watchReconcileWrites(t, key)
	clicked := time.Now()
	browser.Click(t, bctx, `#resources [data-rebuild="web"]`)
	browser.WaitJS(t, bctx, "the rebuild's answer", `document.querySelector('[data-rebuild-result="web"]').textContent.trim() === 'requested'`)
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
	t.Logf("TestUITiltPieces took %s", time.Since(began).Round(time.Second))
}

// watchReconcileWrites watches the environment from now and returns a
// function that stops watching and says how many distinct reconcile
// requests were written.
func watchReconcileWrites(t *testing.T, key client.ObjectKey) func() int {
	t.Helper()
	wc, err := client.NewWithWatch(need(t).Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &v1alpha1.DevEnvironmentList{}, client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen, first := map[string]bool{}, ""
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for ev := range w.ResultChan() {
			env, ok := ev.Object.(*v1alpha1.DevEnvironment)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			cur := env.Annotations[v1alpha1.ReconcileRequestAnnotation]
			mu.Lock()
			if ev.Type == watch.Added {
				first = cur // the request before the click, if any
			} else if cur != "" && cur != first {
				seen[cur] = true
			}
			mu.Unlock()
		}
	}()
	var once sync.Once
	stop := func() int {
		once.Do(func() { w.Stop(); <-stopped })
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	t.Cleanup(func() { stop() })
	return stop
}
