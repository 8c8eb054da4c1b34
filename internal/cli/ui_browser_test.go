package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/timeline"
	"github.com/devloop-dev/devloop/test/browser"
)

// streamingLogs stands in for the kubelet in envtest: a followed
// container's log gets a line every 100 ms until the reader stops.
type streamingLogs struct{}

func (streamingLogs) Stream(ctx context.Context, _, pod string, o *corev1.PodLogOptions) (io.ReadCloser, error) {
	r, w := io.Pipe()
	go func() {
		defer w.Close()
		for i := 1; ; i++ {
			line := fmt.Sprintf("%s/%s line %d", pod, o.Container, i)
			if i%3 == 0 {
				line = fmt.Sprintf(`{"level":"error","msg":"%s/%s line %d","code":500}`, pod, o.Container, i)
			}
			if _, err := fmt.Fprintln(w, line); err != nil {
				return
			}
			if !o.Follow && i >= 5 {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return r, nil
}

// The dashboard in a real Chromium against envtest, with the test playing
// the operator (no operator runs in envtest): the list and the graph
// show the states status holds, a status change reaches the page without
// reload, a trigger click writes the trigger once and the run appears, a
// pod log streams in, and a message with markup is shown as text.
func TestUIInABrowser(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-browser")
	spec := teamSpec()
	spec.Components[1].Ports = []v1alpha1.PortForward{{Name: "http", Local: freePort(t), Target: "svc/web:80"}}
	team := createEnv(t, ns, "team", spec)
	create(t, pod(ns, "web-1", map[string]string{"app": "web"}, "web"), pod(ns, "web-2", map[string]string{"app": "web"}, "web"))
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		now := metav1.Now()
		env.Status.Conditions = []metav1.Condition{
			operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionFalse, "Progressing", "building web"),
			operatorCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionTrue, "Progressing", "building web"),
		}
		env.Status.ComponentsReady = "1/2"
		env.Status.Sources = []v1alpha1.SourceStatus{{Name: "app", Revision: "dev@sha256:4f2a9c0d1e2b3a4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4", LastFetchTime: &now}}
		env.Status.Components = []v1alpha1.ComponentStatus{
			{Name: "crds", Phase: v1alpha1.PhaseReady, Inventory: []v1alpha1.ObjectRef{{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: "widgets.team.test"}}},
			{Name: "web", Phase: v1alpha1.PhaseBuilding, Message: "building image web",
				Images:    []v1alpha1.ImageStatus{{Name: "web", Repository: "registry.test/team/web", Digest: "sha256:9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c", Tags: []string{"dev", "4f2a9c0"}, Build: &v1alpha1.BuildStatus{Job: "web-build-7", Result: v1alpha1.BuildRunning, StartTime: &now}}},
				Inventory: []v1alpha1.ObjectRef{{Version: "v1", Kind: "Pod", Namespace: ns, Name: "web-1"}, {Version: "v1", Kind: "Pod", Namespace: ns, Name: "web-2"}}},
		}
		exit := int32(0)
		env.Status.Tests = []v1alpha1.TestStatus{{Name: "unit", Runs: []v1alpha1.TestRun{{Number: 1, Trigger: "OnChange", Result: v1alpha1.ResultPassed, StartTime: &now, CompletionTime: &now, ExitCode: &exit,
			Images: map[string]string{"web": "sha256:9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c"}, Results: &v1alpha1.TestResults{Passed: 41, Skipped: 2}}}}}
	})
	const markup = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">`
	createEnv(t, ns, "evil", teamSpec())
	playOperator(t, ns, "evil", func(env *v1alpha1.DevEnvironment) {
		env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionStalled, metav1.ConditionTrue, "InvalidSpec", "spec.components[0]: "+markup)}
	})
	writeTimeline(t, ns, "team")

	opts := testOptions()
	opts.Logs = streamingLogs{}
	base, url := launchDashboard(t, opts, "-n", ns)
	key := ns + "/team"

	// The list.
	start := time.Now()
	if _, err := chromedp.Run(bctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, bctx, "both environments listed", `document.querySelectorAll('#envs tr[data-env]').length === 2`)
	t.Logf("list rendered %s after navigation", time.Since(start).Round(time.Millisecond))
	if got := browser.EvalString(t, bctx, `document.querySelector('tr[data-env="`+key+`"] .state').textContent`); got != "Reconciling" {
		t.Errorf("team's state on the list: %q, want Reconciling", got)
	}
	msg := browser.EvalString(t, bctx, `document.querySelector('tr[data-env="`+ns+`/evil"] .msg').textContent`)
	if !strings.Contains(msg, markup) {
		t.Errorf("evil's message is shown as %q, want the markup as text", msg)
	}
	if pwned := browser.EvalString(t, bctx, `String(window.__pwned) + ' ' + document.querySelectorAll('#main script, #main img').length`); pwned != "undefined 0" {
		t.Fatalf("the message's markup ran or was parsed: window.__pwned, elements = %s", pwned)
	}

	// The graph.
	if _, err := chromedp.Run(bctx, chromedp.Navigate(base+"/#/env/"+ns+"/team/graph")); err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, bctx, "the graph", `document.querySelector('[data-node="component/web"]')`)
	phases := browser.EvalString(t, bctx, `[...document.querySelectorAll('[data-node]')].map(n => n.dataset.node + '=' + n.dataset.phase).join(' ')`)
	for _, want := range []string{"source/app=Ready", "source/upstream=Pending", "component/crds=Ready", "component/web=Building", "test/unit=Passed", "test/e2e=Idle"} {
		if !strings.Contains(phases, want) {
			t.Errorf("graph nodes %q: want %s", phases, want)
		}
	}

	// A status change reaches the page without a reload.
	var changed time.Time
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Component("web").Phase = v1alpha1.PhaseReady
		env.Status.ComponentsReady = "2/2"
		env.Status.Conditions = []metav1.Condition{
			operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready", "2/2 components ready"),
			operatorCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionFalse, "Ready", ""),
		}
		changed = time.Now()
	})
	browser.WaitJS(t, bctx, "web Ready on the graph", `document.querySelector('[data-node="component/web"]').dataset.phase === 'Ready' && document.getElementById('env-state').textContent === 'Ready'`)
	t.Logf("status change to page: %s", time.Since(changed).Round(time.Millisecond))

	// A trigger click: one write of trigger=unit, then the run (written
	// here as the operator would) appears without a reload.
	w, err := k8sWatch(ns, "team")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := chromedp.Run(bctx, chromedp.Navigate(base+"/#/env/"+ns+"/team/tests")); err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, bctx, "the tests tab", `document.querySelector('[data-suite="unit"] [data-action="trigger"]')`)
	if _, err := chromedp.Run(bctx, chromedp.Click(chromedp.CSS(`[data-suite="unit"] [data-action="trigger"]`))); err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, bctx, "the trigger's answer", `document.querySelector('[data-suite="unit"] [data-result]').textContent === 'trigger: unit'`)
	writes := triggerWrites(t, w, "unit")
	if writes != 1 {
		t.Fatalf("the click wrote trigger=unit %d times, want once", writes)
	}
	consumeTrigger(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		now := metav1.Now()
		ts := env.Status.Test("unit")
		ts.Runs = append([]v1alpha1.TestRun{{Number: 2, Trigger: "unit", Result: v1alpha1.ResultRunning, StartTime: &now, JobName: "team-unit-2"}}, ts.Runs...)
	})
	browser.WaitJS(t, bctx, "run #2 on the page", `document.querySelector('[data-runs="unit"] tr[data-run="2"]')`)
	if n := browser.EvalString(t, bctx, `String(document.querySelectorAll('[data-runs="unit"] tbody tr').length)`); n != "2" {
		t.Errorf("the unit suite shows %s runs, want 2", n)
	}

	// The components tab: opening the applied objects reads their kstatus
	// (pods without a kubelet are InProgress, a CRD never applied here is
	// NotFound); a port-forward starts from the page, shows its URL, stops.
	if _, err := chromedp.Run(bctx, chromedp.Navigate(base+"/#/env/"+ns+"/team/components")); err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, bctx, "the components tab", `document.querySelector('[data-objects="web"] summary')`)
	// Clicked from the page's script (browser.Click): every status update
	// re-renders the tab.
	click := func(selector string) { t.Helper(); browser.Click(t, bctx, selector) }
	click(`[data-objects="web"] summary`)
	click(`[data-objects="crds"] summary`)
	browser.WaitJS(t, bctx, "the objects' kstatus", `document.querySelector('[data-objects="web"] tr[data-object="Pod/web-2"] .k-InProgress') && document.querySelector('[data-objects="crds"] tr[data-object="CustomResourceDefinition/widgets.team.test"] .k-NotFound')`)
	click(`[data-port="web/http"] [data-forward="start"]`)
	browser.WaitJS(t, bctx, "the forward's URL", `(document.querySelector('[data-port="web/http"] a[data-url]') || {}).textContent?.startsWith('http://127.0.0.1:')`)
	click(`[data-port="web/http"] [data-forward="stop"]`)
	browser.WaitJS(t, bctx, "the forward stopped", `document.querySelector('[data-port="web/http"] [data-forward="start"]') && !document.querySelector('[data-port="web/http"] a[data-url]')`)

	// A pod log streams in, both replicas prefixed.
	if _, err := chromedp.Run(bctx, chromedp.Navigate(base+"/#/env/"+ns+"/team/logs")); err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, bctx, "the log view", `document.getElementById('logtarget')`)
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => { const s = document.getElementById('logtarget'); s.value = [...s.options].find(o => o.textContent === 'pods of web').value; s.dispatchEvent(new Event('change')); return true })()`)); err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, bctx, "web-1 and web-2 streaming", `[...document.querySelectorAll('#logview .line')].some(l => l.textContent.includes('[web-1/web] web-1/web line 4')) && [...document.querySelectorAll('#logview .line')].some(l => l.textContent.includes('[web-2/web] web-2/web line 4'))`)
	if lvl := browser.EvalString(t, bctx, `document.querySelector('#logview .line.l-error').textContent`); !strings.Contains(lvl, "code=500") {
		t.Errorf("a JSON error line reads %q, want its fields shown readably", lvl)
	}

	if _, err := chromedp.Run(bctx, chromedp.Navigate(base+"/#/env/"+ns+"/team/timeline")); err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, bctx, "the timeline", `document.querySelectorAll('[data-change]').length === 3`)
	_ = team
}

// k8sWatch watches one environment.
func k8sWatch(ns, name string) (watch.Interface, error) {
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return wc.Watch(context.Background(), &v1alpha1.DevEnvironmentList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
}

// triggerWrites counts the changes of the watched environment that set
// the trigger annotation to value, up to the first one and every one
// already delivered after it.
func triggerWrites(t *testing.T, w watch.Interface, value string) int {
	t.Helper()
	n := 0
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			env, ok := ev.Object.(*v1alpha1.DevEnvironment)
			if ok && ev.Type == watch.Modified && env.Annotations[v1alpha1.TriggerAnnotation] == value && env.Status.LastHandledTrigger != value {
				n++
			}
		case <-timeout:
			t.Fatal("no write of the trigger seen")
		default:
			if n > 0 {
				return n
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// writeTimeline writes a timeline ConfigMap of two changes as the
// operator's recorder (branch i-timeline) will.
func writeTimeline(t *testing.T, ns, env string) {
	t.Helper()
	base := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second)
	at := base
	step := func(name timeline.StepName, comp string, offset, dur float64) timeline.Step {
		return timeline.Step{Name: name, Component: comp, Start: at.Add(time.Duration(offset * float64(time.Second))), Duration: time.Duration(dur * float64(time.Second))}
	}
	serving := base.Add(9 * time.Second)
	changes := []timeline.Change{
		{Source: "app", Revision: "dev@sha256:4f2a9c0d1e2b", Started: base, Serving: &serving, Result: timeline.Serving, Steps: []timeline.Step{
			step(timeline.Pack, "", 0, 0.4), step(timeline.Upload, "", 0.4, 0.6), step(timeline.Fetch, "", 1.0, 0.3),
			step(timeline.Compile, "web/web", 1.3, 4.2), step(timeline.Assemble, "web/web", 5.5, 0.5), step(timeline.Push, "web/web", 6.0, 0.7),
			step(timeline.Rollout, "web", 6.7, 1.8), step(timeline.Ready, "web", 8.5, 0.5)}},
	}
	at = base.Add(-time.Hour)
	changes = append(changes,
		timeline.Change{Source: "app", Revision: "dev@sha256:1a2b3c4d5e6f", Started: base.Add(-time.Hour), Result: timeline.Failed, Steps: []timeline.Step{
			step(timeline.Pack, "", 0, 0.5), step(timeline.Upload, "", 0.5, 0.8), step(timeline.Compile, "web/web", 1.3, 3.1)}})
	at = base.Add(-30 * time.Minute)
	earlier := at.Add(12500 * time.Millisecond)
	changes = append(changes,
		timeline.Change{Source: "app", Revision: "dev@sha256:77aa0c1d2e3f", Started: at, Serving: &earlier, Result: timeline.Serving, Steps: []timeline.Step{
			step(timeline.Pack, "", 0, 0.5), step(timeline.Upload, "", 0.5, 0.9), step(timeline.Fetch, "", 1.4, 0.4),
			step(timeline.Compile, "web/web", 1.8, 7.1), step(timeline.Assemble, "web/web", 8.9, 0.6), step(timeline.Push, "web/web", 9.5, 0.8),
			step(timeline.Rollout, "web", 10.3, 1.7), step(timeline.Ready, "web", 12.0, 0.5)}})
	writeChanges(t, ns, env, changes)
}

// writeChanges writes changes as the environment's timeline ConfigMap.
func writeChanges(t *testing.T, ns, env string, changes []timeline.Change) {
	t.Helper()
	// Newest first, as the timeline keeps them.
	sort.Slice(changes, func(i, j int) bool { return changes[i].Started.After(changes[j].Started) })
	data, err := json.Marshal(changes)
	if err != nil {
		t.Fatal(err)
	}
	// Controlled by the environment, as the operator writes it: the page
	// shows no timeline a ConfigMap merely claims by its label.
	owner := &v1alpha1.DevEnvironment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: env}, owner); err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: timeline.ConfigMapName(env), Labels: timeline.Labels(owner),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, v1alpha1.GroupVersion.WithKind("DevEnvironment"))}},
		Data: map[string]string{timeline.DataKey: string(data)}})
}
