package layout

import (
	"slices"
	"strings"
	"testing"
)

// TestOnlyTestsDriveABrowser: test/browser drives Chromium with chromedp
// for the dashboard's tests; neither may reach the operator, the plugin or
// any product package (a DevTools client in the manager's binary would be
// dead weight and attack surface). Only test files import test/browser.
func TestOnlyTestsDriveABrowser(t *testing.T) {
	const chromedp = "github.com/chromedp/"
	if !slices.ContainsFunc(depsOf(t, "test/browser"), func(d string) bool { return strings.HasPrefix(d, chromedp) }) {
		t.Fatal("./test/browser no longer depends on chromedp: is this check still about anything?")
	}
	for _, p := range []string{"cmd/...", "internal/...", "controllers", "api/..."} {
		for _, d := range depsOf(t, p) {
			if strings.HasPrefix(d, chromedp) || d == module+"test/browser" {
				t.Errorf("./%s depends on %s: only *_test.go files may", p, d)
			}
		}
	}
}
