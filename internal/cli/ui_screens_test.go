package cli

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/devloop-dev/devloop/test/browser"
)

// TestUIScreenshotsOfTheSample writes docs/images/ui-*.png, the pictures
// of docs/dashboard.md, from `make dev-up`'s sample (devloop-sample/hello)
// on the cluster DEVLOOP_UI_SAMPLE_KUBECONFIG names, with
// DEVLOOP_UI_SCREENSHOTS=1; it skips otherwise. It only reads: it opens
// pages and panels, never triggers, rebuilds, forwards or edits.
func TestUIScreenshotsOfTheSample(t *testing.T) {
	kubeconfig := os.Getenv("DEVLOOP_UI_SAMPLE_KUBECONFIG")
	if kubeconfig == "" || os.Getenv("DEVLOOP_UI_SCREENSHOTS") != "1" {
		t.Skip("set DEVLOOP_UI_SCREENSHOTS=1 and DEVLOOP_UI_SAMPLE_KUBECONFIG (the local cluster's, after make dev-up) to retake the dashboard's pictures")
	}
	bctx := browser.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	go Run(ctx, []string{"--kubeconfig", kubeconfig, "-n", "devloop-sample", "ui", "--no-open", "--port", "0"},
		genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: out}, Options{})
	urlRE := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/\?code=[0-9a-f]+`)
	var m []string
	waitUntil(t, "the dashboard's URL", func() bool { m = urlRE.FindStringSubmatch(out.String()); return m != nil })
	shoot := func(name, route, ready string) {
		t.Helper()
		if route != "" {
			browser.Navigate(t, bctx, m[1]+"/#/env/devloop-sample/hello/"+route)
		}
		browser.WaitJSWithin(t, bctx, name, ready, time.Minute)
		browser.Screenshot(t, bctx, name)
	}
	browser.Navigate(t, bctx, m[0])
	shoot("list", "", `document.querySelector('tr[data-env="devloop-sample/hello"]') && document.querySelector('#summary [data-count]')`)
	shoot("graph", "graph", `document.querySelector('[data-node="component/web"]')`)
	browser.Navigate(t, bctx, m[1]+"/#/env/devloop-sample/hello/components/web")
	browser.WaitJS(t, bctx, "the Helm values panel opened", `(() => { const d = document.querySelector('[data-values="web"]'); if (d && !d.open) d.open = true; return !!d })()`)
	shoot("components", "", `document.querySelector('[data-values="web"] [data-values-from]') && document.querySelector('[data-endpoints="web"]')`)
	shoot("tests", "tests", `document.querySelector('[data-suite]')`)
	shoot("logs", "logs", `[...document.querySelectorAll('#logview .line')].some(l => l.dataset.resource === 'component/web')`)
	shoot("timeline", "timeline", `document.querySelector('[data-change]') || document.querySelector('main p.muted')`)
}
