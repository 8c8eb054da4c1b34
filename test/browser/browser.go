// Package browser drives Debian's headless Chromium over the DevTools
// protocol (chromedp) for the dashboard's tests: against envtest
// (internal/cli) and against the local cluster (test/e2e). It is test
// support: only test files import it (test/layout checks that no product
// package depends on it or on chromedp).
package browser

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// Wait is how long WaitJS waits for the page.
const Wait = 20 * time.Second

// Chromium finds Debian's chromium; without it the browser tests skip,
// unless DEVLOOP_REQUIRE_CHROMIUM says they must run (CI, make test after
// hack/chromium.sh).
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("DEVLOOP_REQUIRE_CHROMIUM") != "" {
		t.Fatal("DEVLOOP_REQUIRE_CHROMIUM is set and no chromium is on PATH: run hack/chromium.sh")
	}
	t.Skip("no chromium on PATH: the dashboard's browser test needs Debian's chromium (hack/chromium.sh installs it; make test runs it)")
	return ""
}

// Start starts a headless Chromium for the test, stopped when it ends.
func Start(t testing.TB) context.Context {
	t.Helper()
	path := Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 860), chromedp.Flag("headless", true), chromedp.Flag("disable-gpu", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// Navigate opens url in the page (a URL differing only in its fragment
// changes the page's route without reloading it).
func Navigate(t testing.TB, ctx context.Context, url string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigating to %s: %v", url, err)
	}
}

// WaitJS evaluates expr in the page until it is true and returns how long
// that took; it fails the test after Wait, showing what last was.
func WaitJS(t testing.TB, ctx context.Context, what, expr string) time.Duration {
	t.Helper()
	return WaitJSWithin(t, ctx, what, expr, Wait)
}

// WaitJSWithin is WaitJS for up to within. It asks the page every 10 ms,
// less often for long waits (a fortieth of a second per minute waited):
// 2 cores run the cluster too.
func WaitJSWithin(t testing.TB, ctx context.Context, what, expr string, within time.Duration) time.Duration {
	t.Helper()
	every := max(10*time.Millisecond, within/2400)
	start := time.Now()
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err == nil && ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText.slice(-1500)`))
			t.Fatalf("timed out after %s waiting for %s (%v); the page shows:\n%s", within, what, err, body)
		}
		time.Sleep(every)
	}
}

// EvalString evaluates expr in the page, a string.
func EvalString(t testing.TB, ctx context.Context, expr string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return s
}

// Click clicks the element selector names from the page's own script,
// waiting for it to be there: every status update re-renders the
// dashboard's tab, and a node found by one protocol call may be gone by
// the next. It clicks exactly once.
func Click(t testing.TB, ctx context.Context, selector string) {
	t.Helper()
	WaitJS(t, ctx, "a click on "+selector, `(() => { const e = document.querySelector('`+selector+`'); if (e) e.click(); return !!e })()`)
}

// Screenshot saves the page as docs/images/ui-NAME.png when
// DEVLOOP_UI_SCREENSHOTS=1.
func Screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("DEVLOOP_UI_SCREENSHOTS") != "1" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(testenv.RepoRoot(), "docs", "images", "ui-"+name+".png")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s: %d KiB", path, len(png)/1024)
}
