//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/browser"
)

// TestUI: the sample environment on the real cluster, the operator really
// running, seen through `kubectl devloop ui` in Debian's headless Chromium
// (as the envtest browser test, internal/cli/ui_browser_test.go, but
// nothing played): the list and the graph show it Ready with its
// components coloured Ready; one click on a suite's Trigger writes the
// trigger once, the operator runs it once, and the run appears and passes
// on the page without a reload; the web image's real build log and the web
// pod's log stream into the logs tab. It skips without chromium, as the
// envtest test does. With DEVLOOP_UI_SCREENSHOTS=1 it writes
// docs/images/ui-logs.png (the real build log).
func TestUI(t *testing.T) {
	began := time.Now()
	u := uiOnSample(t, "e2e-ui", 11*time.Minute, nil)
	bctx, g, key := u.bctx, u.g, u.key
	row := `document.querySelector('tr[data-env="` + key.String() + `"]')`
	browser.WaitJS(t, bctx, "the sample on the list", row)
	t.Logf("list: %s %q", browser.EvalString(t, bctx, row+`.querySelector('.state').textContent`), browser.EvalString(t, bctx, `(`+row+`.querySelector('.msg') || {}).textContent || ''`))

	// Ready: the operator says so in status, then the page within
	// browser.Wait (the stream, no reload).
	waitEnv(t, key, 8*time.Minute, false, readyNow)
	ready := time.Now()
	browser.WaitJS(t, bctx, "the sample Ready on the list", row+`.querySelector('.state').textContent === 'Ready' && `+row+`.cells[2].textContent === '1/1'`)
	t.Logf("Ready in status %s after the case began; on the page %s after the test saw it", ready.Sub(began).Round(time.Second), time.Since(ready).Round(time.Millisecond))

	// The graph: each node's phase, and Ready drawn as Ready (the fill of
	// app.css's .n-Ready), a suite never run as Idle.
	envPage := u.envPage()
	browser.Navigate(t, bctx, envPage+"graph")
	browser.WaitJS(t, bctx, "the graph", `document.querySelector('[data-node="component/web"]')`)
	phases := browser.EvalString(t, bctx, `[...document.querySelectorAll('[data-node]')].map(n => n.dataset.node + '=' + n.dataset.phase + ':' + getComputedStyle(n.querySelector('rect')).fill).join('; ')`)
	t.Logf("graph: %s", phases)
	const readyFill, idleFill = "rgb(218, 251, 225)", "rgb(246, 248, 250)"
	for _, want := range []string{"source/app=Ready:" + readyFill, "component/web=Ready:" + readyFill,
		"test/unit-tests=Idle:" + idleFill, "test/smoke=Idle:" + idleFill, "test/contract=Idle:" + idleFill} {
		g.Expect(strings.Split(phases, "; ")).To(ContainElement(want))
	}

	// One click on smoke's Trigger: one write of the trigger annotation,
	// one run by the real operator, on the page without a reload.
	writes := watchTriggerWrites(t, key, "smoke")
	browser.Navigate(t, bctx, envPage+"tests")
	browser.WaitJS(t, bctx, "the tests tab", `document.querySelector('[data-suite="smoke"] [data-action="trigger"]')`)
	g.Expect(browser.EvalString(t, bctx, `String(document.querySelectorAll('[data-runs="smoke"] tbody tr').length)`)).To(Equal("0"), "smoke has run before the click")
	browser.EvalString(t, bctx, `String(window.__sameDocument = 'before the click')`)
	clicked := time.Now()
	browser.Click(t, bctx, `[data-suite="smoke"] [data-action="trigger"]`)
	browser.WaitJS(t, bctx, "the trigger's answer", `document.querySelector('[data-suite="smoke"] [data-result]').textContent === 'trigger: smoke'`)
	browser.WaitJS(t, bctx, "smoke's run on the page", `document.querySelector('[data-runs="smoke"] tbody tr[data-run]')`)
	t.Logf("click to run on the page: %s", time.Since(clicked).Round(time.Millisecond))
	browser.WaitJSWithin(t, bctx, "smoke's run Passed on the page", `document.querySelector('[data-runs="smoke"] tbody tr[data-run] .p-Passed')`, 3*time.Minute)
	t.Logf("click to Passed on the page: %s", time.Since(clicked).Round(time.Millisecond))
	g.Expect(browser.EvalString(t, bctx, `String(window.__sameDocument)`)).To(Equal("before the click"), "the page was reloaded")
	done := waitEnv(t, key, time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerAnnotation), "the trigger is consumed")
		g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerPendingAnnotation), "the trigger's runs are recorded")
	})
	g.Expect(writes()).To(Equal(1), "writes of trigger=smoke by one click")
	g.Expect(done.Status.Test("smoke")).NotTo(BeNil(), "smoke in status")
	g.Expect(done.Status.Test("smoke").Runs).To(HaveLen(1), "smoke's runs in status")
	g.Expect(browser.EvalString(t, bctx, `String(document.querySelectorAll('[data-runs="smoke"] tbody tr').length)`)).To(Equal("1"), "smoke's runs on the page")
	run := done.Status.Test("smoke").Runs[0]
	t.Logf("run #%d %s (job %s), images %v", run.Number, run.Result, run.JobName, run.Images)

	// Logs: the web image's build (the warm builder's, read through the
	// API server's pods/log), then the web pod's, followed.
	browser.Navigate(t, bctx, envPage+"logs")
	browser.WaitJS(t, bctx, "the logs tab", `document.getElementById('logtarget')`)
	showLog := func(label string) {
		t.Helper()
		browser.EvalString(t, bctx, `(() => { const s = document.getElementById('logtarget'); s.value = [...s.options].find(o => o.textContent === '`+label+`').value; s.dispatchEvent(new Event('change')); return '' })()`)
	}
	lines := `[...document.querySelectorAll('#logview .line')]`
	showLog("build of web/web")
	browser.WaitJS(t, bctx, "the build log", lines+`.some(l => l.dataset.source === 'build' && l.textContent.includes('running [go build -v'))`)
	// Followed, a warm build's log ends when status says the build did
	// (its builder's container runs on), with how it ended.
	browser.WaitJS(t, bctx, "the followed build log's end", `document.getElementById('logstatus').textContent === 'ended' && `+lines+`.some(l => l.textContent.includes('build Succeeded'))`)
	t.Logf("build log of web/web: %s lines, first %q", browser.EvalString(t, bctx, `String(`+lines+`.length)`), browser.EvalString(t, bctx, lines+`[0].textContent`))
	showLog("pods of web")
	browser.WaitJS(t, bctx, "the web pod's log", lines+`.some(l => l.dataset.source === 'component' && l.textContent.includes('listening on :8080 (hello from devloop)'))`)
	// Followed: the stream is still open after the line came.
	g.Expect(browser.EvalString(t, bctx, `document.getElementById('logstatus').textContent`)).To(Equal("streaming pods of web"))
	t.Logf("pod log of web: %q", browser.EvalString(t, bctx, lines+`[0].textContent`))
	t.Logf("TestUI took %s", time.Since(began).Round(time.Second))
}
