package cli

import (
	"strconv"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/timeline"
	"github.com/devloop-dev/devloop/test/browser"
)

// The timeline draws every change on one labelled axis (bars of
// different changes start at the same x whatever their step and
// component names), the serving history has a labelled axis, and a step
// still running is a bar up to now that grows, not a 2-px tick.
func TestUITimelineSharesOneAxisAndRunningStepsGrow(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-timeline")
	createEnv(t, ns, "team", teamSpec())
	now := time.Now().UTC()
	at := func(start time.Time, offset, dur float64, name timeline.StepName, comp string) timeline.Step {
		return timeline.Step{Name: name, Component: comp, Start: start.Add(time.Duration(offset * float64(time.Second))), Duration: time.Duration(dur * float64(time.Second))}
	}
	inflight := now.Add(-20 * time.Second)
	done := now.Add(-time.Hour)
	serving := done.Add(12500 * time.Millisecond)
	writeChanges(t, ns, "team", []timeline.Change{
		{Source: "app", Revision: "dev@sha256:aaaa0c1d2e3f", Started: inflight, Result: timeline.InFlight, Steps: []timeline.Step{
			at(inflight, 0, 0.4, timeline.Pack, ""), at(inflight, 1, 0, timeline.Compile, "a-long-component-name/and-its-image")}},
		{Source: "app", Revision: "dev@sha256:bbbb0c1d2e3f", Started: done, Serving: &serving, Result: timeline.Serving, Steps: []timeline.Step{
			at(done, 0, 0.5, timeline.Pack, ""), at(done, 1.4, 7.1, timeline.Compile, "w"), at(done, 12, 0.5, timeline.Ready, "w")}},
	})
	base, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/team/timeline")
	browser.WaitJS(t, bctx, "both changes", `document.querySelectorAll('[data-change]').length === 2`)

	// One axis, labelled, and every bar starts where it starts.
	browser.WaitJS(t, bctx, "the steps' axis with labels", `[...document.querySelectorAll('[data-axis="steps"] text')].filter(t => /^\d+(\.\d+)?[sm]$/.test(t.textContent)).length >= 3`)
	browser.WaitJS(t, bctx, "the serving history's axis with labels", `[...document.querySelectorAll('[data-axis="history"] text')].filter(t => /^\d+(\.\d+)?[sm]$/.test(t.textContent)).length >= 2`)
	lefts := browser.EvalString(t, bctx, `[...document.querySelectorAll('[data-axis="steps"], [data-change] svg[data-bar]')].map(s => Math.round(s.getBoundingClientRect().left)).join(' ')`)
	if got := browser.EvalString(t, bctx, `String(new Set([...document.querySelectorAll('[data-axis="steps"], [data-change] svg[data-bar]')].map(s => Math.round(s.getBoundingClientRect().left))).size)`); got != "1" {
		t.Errorf("the axis and the bars start at x = %s: want one x for all", lefts)
	}

	// The running Compile is drawn up to now: about 19 s of a 20 s axis.
	running := `document.querySelector('[data-change="dev@sha256:aaaa0c1d2e3f"] svg[data-running] rect')`
	browser.WaitJS(t, bctx, "the running step as a bar over most of the axis", running+` && `+running+`.width.baseVal.value > 0.5 * document.querySelector('[data-axis="steps"]').width.baseVal.value`)
	first, err := strconv.ParseFloat(browser.EvalString(t, bctx, running+`.parentNode.dataset.secs`), 64)
	if err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, bctx, "the running step growing", running+`.parentNode.dataset.secs > `+strconv.FormatFloat(first+1, 'f', 1, 64))
}
