package cli

import (
	"fmt"
	"testing"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// A live update keeps what the user did on the page: an open spec panel
// stays open and the text selected in it stays selected while status
// changes reach the page.
func TestUISelectionAndOpenPanelSurviveStatusChanges(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-selection")
	createEnv(t, ns, "team", teamSpec())
	base, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/team/components")
	spec := `document.querySelector('[data-component="web"] details[data-spec="web"]')`
	browser.WaitJS(t, bctx, "web's spec opened and its text selected", `(() => {
	  const d = `+spec+`; if (!d) return false;
	  d.open = true;
	  const r = document.createRange(); r.selectNodeContents(d.querySelector('pre'));
	  const s = getSelection(); s.removeAllRanges(); s.addRange(r);
	  return s.toString().includes('"name": "web"');
	})()`)
	for i := range 3 {
		msg := fmt.Sprintf("web status change %d", i)
		playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
			env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseDeploying, Message: msg}}
		})
		browser.WaitJS(t, bctx, "the page showing "+msg, `document.querySelector('[data-component="web"]').textContent.includes('`+msg+`')`)
	}
	if got := browser.EvalString(t, bctx, `(() => {
	  const d = `+spec+`, sel = getSelection().toString();
	  return (d.open ? 'open' : 'closed') + ', ' + (sel !== '' && sel === d.querySelector('pre').textContent ? 'its spec selected' : 'selection ' + JSON.stringify(sel.slice(0, 40)));
	})()`); got != "open, its spec selected" {
		t.Errorf("after status changes web's spec panel is %s", got)
	}
}
