package cli

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// spyServer is another local HTTP server on 127.0.0.1, as any program of
// the user (or of another local user) may run: it records the headers
// the browser sends it.
type spyServer struct {
	url  string
	mu   sync.Mutex
	seen []http.Header
}

func startSpy(t *testing.T) *spyServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &spyServer{url: "http://" + ln.Addr().String() + "/"}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Clone())
		s.mu.Unlock()
		_, _ = w.Write([]byte("<!doctype html><title>spy</title><p id=spy>spy</p>"))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *spyServer) headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.seen...)
}

// The dashboard's credential stays with the dashboard: two dashboards on
// two ports in one browser both keep working (trigger, live status), a
// third local server visited in the same browser receives nothing of
// either (no cookie, no token), and the URL the plugin printed opens the
// page once: a second use is refused.
func TestUICredentialStaysWithItsDashboard(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-session")
	createEnv(t, ns, "team", teamSpec())
	key := ns + "/team"
	base1, url1 := launchDashboard(t, testOptions(), "-n", ns)
	base2, url2 := launchDashboard(t, testOptions(), "-n", ns)
	spy := startSpy(t)

	// Dashboard 1 in the first tab, dashboard 2 in a second tab of the
	// same browser, opened after it.
	tab1 := bctx
	browser.Navigate(t, tab1, url1)
	browser.WaitJS(t, tab1, "dashboard 1 lists team", `document.querySelector('tr[data-env="`+key+`"]')`)
	tab2, close2 := chromedp.NewContext(bctx)
	defer close2()
	browser.Navigate(t, tab2, url2)
	browser.WaitJS(t, tab2, "dashboard 2 lists team", `document.querySelector('tr[data-env="`+key+`"]')`)

	// Both keep working: an action from each is answered, and a status
	// change reaches both.
	type tab struct {
		name, base, suite string
		ctx               context.Context
	}
	tabs := []tab{{"dashboard 1", base1, "e2e", tab1}, {"dashboard 2", base2, "smoke", tab2}}
	for _, tab := range tabs {
		ctx := tab.ctx
		browser.Navigate(t, ctx, tab.base+"/#/env/"+ns+"/team/tests")
		browser.Click(t, ctx, `[data-suite="`+tab.suite+`"] [data-action="trigger"]`)
		browser.WaitJS(t, ctx, tab.name+"'s trigger answered", `document.querySelector('[data-suite="`+tab.suite+`"] [data-result]').textContent === 'trigger: `+tab.suite+`'`)
		// Consumed as the operator would: a pending trigger is never
		// written over.
		consumeTrigger(t, ns, "team", func(*v1alpha1.DevEnvironment) {})
	}
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionStalled, metav1.ConditionTrue, "InvalidSpec", "spec.components[1].images[0].source: no source nope")}
	})
	browser.WaitJS(t, tab1, "the change on dashboard 1", `(document.getElementById('env-state') || {}).textContent === 'Stalled'`)
	browser.WaitJS(t, tab2, "the change on dashboard 2", `(document.getElementById('env-state') || {}).textContent === 'Stalled'`)

	// What either page holds, to look for at the spy.
	secrets := []string{strings.SplitN(url1, "=", 2)[1], strings.SplitN(url2, "=", 2)[1]}
	for _, tab := range tabs {
		if tok := browser.EvalString(t, tab.ctx, `JSON.stringify(Object.values(sessionStorage))`); tok != "[]" {
			secrets = append(secrets, strings.Split(strings.Trim(tok, `[]`), ",")...)
		}
	}
	browser.Navigate(t, tab1, spy.url)
	browser.Navigate(t, tab2, spy.url)
	browser.WaitJS(t, tab2, "the spy's page", `document.getElementById('spy')`)
	seen := spy.headers()
	if len(seen) == 0 {
		t.Fatal("the spy server saw no request")
	}
	for _, h := range seen {
		if c := h.Get("Cookie"); c != "" {
			t.Errorf("another server on 127.0.0.1 received the Cookie header %q", c)
		}
		for name, values := range h {
			for _, v := range values {
				for _, s := range secrets {
					if s = strings.Trim(s, `"`); len(s) >= 16 && strings.Contains(v, s) {
						t.Errorf("another server on 127.0.0.1 received the dashboard's credential in %s: %q", name, v)
					}
				}
			}
		}
	}

	// The printed URL opens the page once: in a fresh tab, a second use
	// lists nothing and says why.
	tab3, close3 := chromedp.NewContext(bctx)
	defer close3()
	browser.Navigate(t, tab3, url1)
	browser.WaitJS(t, tab3, "the second use refused", `document.getElementById('problems').textContent.includes('already used')`)
	if n := browser.EvalString(t, tab3, `String(document.querySelectorAll('#envs tr[data-env]').length)`); n != "0" {
		t.Errorf("a second use of the URL lists %s environments, want none", n)
	}
}
