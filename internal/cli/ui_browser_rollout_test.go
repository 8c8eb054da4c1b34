package cli

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// podWrote is when the kubelet stands-in say each pod wrote its lines:
// long ago, so a line's time shown from the pod is not the time it was
// read.
var podWrote = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

// kubeletUntilDeleted stands in for the kubelet in envtest: a followed
// container's log gets a line every 100 ms, stamped as the kubelet does
// with timestamps=true, until its pod is deleted (the log then ends, as
// a deleted pod's does).
type kubeletUntilDeleted struct{}

func (kubeletUntilDeleted) Stream(ctx context.Context, ns, pod string, o *corev1.PodLogOptions) (io.ReadCloser, error) {
	r, w := io.Pipe()
	go func() {
		defer w.Close()
		for i := 1; ; i++ {
			line := fmt.Sprintf("%s/%s line %d", pod, o.Container, i)
			if o.Timestamps {
				line = podWrote.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano) + " " + line
			}
			if _, err := fmt.Fprintln(w, line); err != nil {
				return
			}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, &corev1.Pod{}); err != nil || !o.Follow {
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

// A rollout while the logs tab follows a component: the old pod's log
// ends, the pane goes on with the new pod's lines, and every line carries
// the time the pod wrote it.
func TestUILogsFollowARollout(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-rollout")
	createEnv(t, ns, "team", teamSpec())
	one := int32(1)
	create(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{Replicas: &one,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}}}})
	old := pod(ns, "web-old", map[string]string{"app": "web"}, "web")
	create(t, old)
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseReady,
			Inventory: []v1alpha1.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"}}}}
	})
	opts := testOptions()
	opts.Logs = kubeletUntilDeleted{}
	base, url := launchDashboard(t, opts, "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/team/logs")
	browser.WaitJS(t, bctx, "the log view", `document.getElementById('logtarget')`)
	browser.WaitJS(t, bctx, "pods of web chosen", `(() => { const s = document.getElementById('logtarget'); s.value = [...s.options].find(o => o.textContent === 'pods of web').value; s.dispatchEvent(new Event('change')); return true })()`)
	lines := `[...document.querySelectorAll('#logview .line')]`
	browser.WaitJS(t, bctx, "the old pod's lines", lines+`.some(l => l.textContent.includes('web-old/web line 3'))`)

	// The rollout: the new pod comes, the old one goes.
	create(t, pod(ns, "web-new", map[string]string{"app": "web"}, "web"))
	if err := k8s.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, bctx, "the new pod's lines after the rollout", lines+`.some(l => l.textContent.includes('web-new/web line 3'))`)
	if st := browser.EvalString(t, bctx, `document.getElementById('logstatus').textContent`); st != "streaming pods of web" {
		t.Errorf("the log's status after the rollout: %q, want still streaming", st)
	}
	// Every pod line's time is the pod's (2020-01-02), not when it was read.
	if bad := browser.EvalString(t, bctx, lines+`.filter(l => /web-(old|new)\/web line/.test(l.textContent) && !(l.dataset.time || '').startsWith('2020-01-02T03:04:')).map(l => (l.dataset.time || 'no time') + ' ' + l.textContent).slice(0, 3).join('; ')`); bad != "" {
		t.Errorf("lines not stamped with the pod's own time: %s", bad)
	}
}
