package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// Ctrl-C stops the dashboard with exit code 130 (the plugin's code for
// interrupted), and the page left open says Disconnected: it no longer
// shows a green Ready it cannot know.
func TestUIStoppedServerShowsDisconnectedAndExits130(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-stop")
	createEnv(t, ns, "team", teamSpec())
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready", "1/1 components ready")}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	wait := startPlugin(ctx, nil, out, errOut, testOptions(), "ui", "--no-open", "--port", "0", "-n", ns)
	var m []string
	waitUntil(t, "the dashboard's URL", func() bool { m = dashboardURL.FindStringSubmatch(out.String()); return m != nil })
	browser.Navigate(t, bctx, strings.TrimPrefix(m[0], "devloop dashboard: "))
	browser.WaitJS(t, bctx, "team Ready and live", `document.querySelector('tr[data-env="`+ns+`/team"] .state').textContent === 'Ready' && document.getElementById('conn').textContent === 'live'`)

	cancel()
	if code := wait(); code != 130 {
		t.Errorf("the dashboard exited %d after Ctrl-C, want 130", code)
	}
	browser.WaitJS(t, bctx, "the page saying Disconnected", `document.getElementById('conn').textContent.startsWith('Disconnected') && document.body.classList.contains('offline')`)
	colour := browser.EvalString(t, bctx, `getComputedStyle(document.querySelector('tr[data-env="`+ns+`/team"] .state')).color`)
	if colour == "rgb(26, 127, 55)" {
		t.Errorf("a stopped server's page still shows Ready in green (%s)", colour)
	}
}

// The default namespace with no environment says where else to look:
// -n NAMESPACE or -A.
func TestUINoEnvironmentsHintsAtNamespaceFlags(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-empty")
	_, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the empty list's hint", `document.querySelector('#envs tbody').textContent.includes('-A') && document.querySelector('#envs tbody').textContent.includes('-n NAMESPACE')`)
}
