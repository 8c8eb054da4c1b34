package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// Typing a test parameter while status keeps changing: every key lands in
// the field, which keeps the focus, as the page updates in place; a
// status change typed through does reach the page.
func TestUITypingAParameterWhileStatusChanges(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-typing")
	spec := teamSpec()
	spec.Tests[1].Params = []string{"E2E_FOCUS"}
	createEnv(t, ns, "team", spec)
	base, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/team/tests")
	field := `document.querySelector('[data-suite="e2e"] input[name="E2E_FOCUS"]')`
	browser.WaitJS(t, bctx, "the parameter field", field)
	if _, err := chromedp.Run(bctx, chromedp.Focus(chromedp.CSS(`[data-suite="e2e"] input[name="E2E_FOCUS"]`))); err != nil {
		t.Fatal(err)
	}

	// Status changes all the while keys are typed, each one waited for on
	// the page before the next key (so every key meets a fresh update).
	const text = "Job|Pod fast"
	for i, r := range text {
		msg := fmt.Sprintf("status change %d", i)
		playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
			now := metav1.Now()
			env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionTrue, "Progressing", msg)}
			env.Status.Tests = []v1alpha1.TestStatus{{Name: "unit", Message: msg, Runs: []v1alpha1.TestRun{{Number: int64(i + 1), Trigger: "OnChange", Result: v1alpha1.ResultRunning, StartTime: &now}}}}
		})
		browser.WaitJS(t, bctx, "the page showing "+msg, `document.getElementById('env-message').textContent === '`+msg+`'`)
		if _, err := chromedp.Run(bctx, chromedp.KeyEvent(string(r))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := chromedp.Run(bctx, chromedp.KeyEvent(kb.End)); err != nil {
		t.Fatal(err)
	}
	got := browser.EvalString(t, bctx, field+`.value`)
	focused := browser.EvalString(t, bctx, `document.activeElement === `+field+` ? 'focused' : 'not focused: ' + document.activeElement.outerHTML.slice(0, 80)`)
	if got != text || focused != "focused" {
		t.Fatalf("after typing %q while status changed: the field holds %q and is %s", text, got, focused)
	}
	if n := browser.EvalString(t, bctx, `String(document.querySelectorAll('[data-runs="unit"] tbody tr').length)`); !strings.HasPrefix(n, "1") {
		t.Errorf("unit shows %s runs, want the one status holds", n)
	}
}
