package ui

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// listeningForwarder is a PortForwarder whose forwards are real listeners
// on 127.0.0.1 that forward nowhere: what the handlers and Forwards decide
// (bound, one per port, stop, close) shows on real ports. envtest has no
// kubelet, so the tunnel itself is tested in internal/cli.
type listeningForwarder struct {
	mu     sync.Mutex
	starts map[string]int
	fail   error
}

func (f *listeningForwarder) Forward(_ context.Context, ns, env, component, port string) (Forward, error) {
	if f.fail != nil {
		return Forward{}, f.fail
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Forward{}, err
	}
	f.mu.Lock()
	if f.starts == nil {
		f.starts = map[string]int{}
	}
	f.starts[forwardKey(ns, env, component, port)]++
	f.mu.Unlock()
	return Forward{Addr: l.Addr().String(), Status: func() string { return "waiting: no Ready pod" }, Stop: func() { l.Close() }}, nil
}

func listening(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func postForward(t *testing.T, base, action, component, port, id string) (int, actionResult) {
	t.Helper()
	body := `{"namespace":"dev","env":"team","component":"` + component + `","port":"` + port + `","action":"` + action + `","requestId":"` + id + `"}`
	resp, err := http.Post(base+"/api/portforward", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res actionResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, res
}

func listForwards(t *testing.T, base string) []ForwardInfo {
	t.Helper()
	resp, err := http.Get(base + "/api/portforwards")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []ForwardInfo
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Start shows a URL on 127.0.0.1 that listens; a second start of the same
// port (another click) is the same forward; past the bound the page is
// told to stop one; stop closes the port; Close (the server stopping)
// closes every port and refuses new ones.
func TestPortForwardsFromThePage(t *testing.T) {
	f := &listeningForwarder{}
	fs := NewForwards(f, 2)
	srv := httptest.NewServer((&Handlers{Forwards: fs}).Handler())
	defer srv.Close()

	code, web := postForward(t, srv.URL, "start", "web", "http", "a1")
	if code != http.StatusOK || !strings.HasPrefix(web.Value, "http://127.0.0.1:") {
		t.Fatalf("start web/http: %d %+v", code, web)
	}
	webAddr := strings.TrimSuffix(strings.TrimPrefix(web.Value, "http://"), "/")
	if !listening(webAddr) {
		t.Fatalf("%s does not listen after start", webAddr)
	}
	if code, again := postForward(t, srv.URL, "start", "web", "http", "a2"); code != http.StatusOK || again.Value != web.Value {
		t.Fatalf("second start of web/http: %d %+v, want the same URL %s", code, again, web.Value)
	}
	if n := f.starts["dev/team/web/http"]; n != 1 {
		t.Fatalf("web/http started %d times, want once", n)
	}
	_, grafana := postForward(t, srv.URL, "start", "grafana", "http", "a3")
	if code, third := postForward(t, srv.URL, "start", "api", "grpc", "a4"); code != http.StatusUnprocessableEntity || !strings.Contains(third.Error, "2 port-forwards are running") {
		t.Fatalf("a third forward past the bound of 2: %d %+v", code, third)
	}
	list := listForwards(t, srv.URL)
	if len(list) != 2 || list[0].Component != "grafana" || list[1].URL != web.Value || list[1].Status != "waiting: no Ready pod" {
		t.Fatalf("running forwards: %+v", list)
	}

	if code, res := postForward(t, srv.URL, "stop", "web", "http", "a5"); code != http.StatusOK || res.Value != "stopped" {
		t.Fatalf("stop web/http: %d %+v", code, res)
	}
	if listening(webAddr) {
		t.Fatalf("%s still listens after stop", webAddr)
	}
	if code, res := postForward(t, srv.URL, "stop", "web", "http", "a6"); code != http.StatusOK || res.Value != "not running" {
		t.Fatalf("stop again: %d %+v", code, res)
	}
	if code, res := postForward(t, srv.URL, "start", "web", "http", "a7"); code != http.StatusOK || res.Value == web.Value || res.Value == "" {
		t.Fatalf("start after stop: %d %+v, want a new forward", code, res)
	}

	fs.Close()
	for _, a := range []string{strings.TrimSuffix(strings.TrimPrefix(grafana.Value, "http://"), "/")} {
		if listening(a) {
			t.Fatalf("%s still listens after Close", a)
		}
	}
	if n := len(listForwards(t, srv.URL)); n != 0 {
		t.Fatalf("%d forwards listed after Close", n)
	}
	if code, res := postForward(t, srv.URL, "start", "web", "http", "a8"); code == http.StatusOK || !strings.Contains(res.Error, "stopping") {
		t.Fatalf("start after Close: %d %+v", code, res)
	}
}

// A forward that cannot start (no such port) is reported and holds no
// place in the bound; a bad action is refused.
func TestPortForwardErrorsAreShownAndHoldNothing(t *testing.T) {
	f := &listeningForwarder{fail: errors.New(`component web declares no port "nope"`)}
	fs := NewForwards(f, 1)
	srv := httptest.NewServer((&Handlers{Forwards: fs}).Handler())
	defer srv.Close()
	if code, res := postForward(t, srv.URL, "start", "web", "nope", "b1"); code != http.StatusUnprocessableEntity || !strings.Contains(res.Error, `no port "nope"`) {
		t.Fatalf("failing start: %d %+v", code, res)
	}
	if n := len(fs.List()); n != 0 {
		t.Fatalf("%d forwards after a failed start", n)
	}
	f.fail = nil
	if code, res := postForward(t, srv.URL, "start", "web", "http", "b2"); code != http.StatusOK {
		t.Fatalf("start after a failed one (bound 1): %d %+v", code, res)
	}
	if code, res := postForward(t, srv.URL, "restart", "web", "http", "b3"); code != http.StatusUnprocessableEntity || !strings.Contains(res.Error, "want start or stop") {
		t.Fatalf("unknown action: %d %+v", code, res)
	}
	fs.Close()
}
