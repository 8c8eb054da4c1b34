package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/ui"
)

func dialable(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// A port-forward started from the page runs the `port-forward` code as
// the user, on a free port of 127.0.0.1 (not the declared one, which may
// be in use): it resolves the declared target to its Ready pod and says
// so next to the URL (envtest has no kubelet, so the connection to the
// pod itself fails here and the line says that). A cross-site start is
// refused; stop closes the port; Ctrl-C closes every port.
func TestUIStartsAndStopsPortForwards(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "ui-pf")
	declared := freePort(t)
	spec := teamSpec()
	spec.Components[1].Ports = []v1alpha1.PortForward{{Name: "http", Local: declared, Target: "svc/web:80"}}
	createEnv(t, ns, "team", spec)
	createService(t, ns, "web", "web", 80, intstr.FromString("http"))
	createPod(t, ns, "web-1", "web", "http", 8080, true)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, wait := stoppableDashboard(t, ctx, testOptions(), "-n", ns)
	start := func(port, id string, headers map[string]string) (int, string) {
		return d.post(t, "/api/portforward", `{"namespace":"`+ns+`","env":"team","component":"web","port":"`+port+`","action":"start","requestId":"`+id+`"}`, headers)
	}
	list := func() []ui.ForwardInfo {
		var l []ui.ForwardInfo
		d.getJSON(t, "/api/portforwards", &l)
		return l
	}

	for _, h := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Origin": "http://evil.test"}, {ui.TokenHeader: ""}} {
		if code, out := start("http", "x", h); code != http.StatusForbidden && code != http.StatusUnauthorized {
			t.Fatalf("cross-site start %v: %d %s, want 403 or 401", h, code, out)
		}
	}
	if l := list(); len(l) != 0 {
		t.Fatalf("a refused start left forwards: %+v", l)
	}
	if code, out := start("grpc", "p0", nil); code != http.StatusUnprocessableEntity || !strings.Contains(out, `declares no port \"grpc\"`) {
		t.Fatalf("start of an undeclared port: %d %s", code, out)
	}

	code, out := start("http", "p1", nil)
	var res struct{ Value string }
	if err := json.Unmarshal([]byte(out), &res); code != http.StatusOK || err != nil || !strings.HasPrefix(res.Value, "http://127.0.0.1:") {
		t.Fatalf("start: %d %s", code, out)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(res.Value, "http://"), "/")
	if strings.HasSuffix(addr, ":"+strconv.Itoa(int(declared))) {
		t.Errorf("forward on the declared port %d; want a free one", declared)
	}
	if !dialable(addr) {
		t.Fatalf("%s does not accept connections after start", addr)
	}
	var status string
	waitUntil(t, "the forward's line naming pod web-1", func() bool {
		l := list()
		if len(l) == 1 {
			status = l[0].Status
		}
		return strings.Contains(status, "web-1")
	})
	t.Logf("forward %s: %s", res.Value, status)

	if code, out := d.post(t, "/api/portforward", `{"namespace":"`+ns+`","env":"team","component":"web","port":"http","action":"stop","requestId":"p2"}`, nil); code != http.StatusOK || !strings.Contains(out, `"stopped"`) {
		t.Fatalf("stop: %d %s", code, out)
	}
	if dialable(addr) {
		t.Fatalf("%s still accepts connections after stop", addr)
	}

	_, out = start("http", "p3", nil)
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	addr = strings.TrimSuffix(strings.TrimPrefix(res.Value, "http://"), "/")
	if !dialable(addr) {
		t.Fatalf("%s does not accept connections after the second start", addr)
	}
	cancel()
	if code := wait(); code != 130 {
		t.Fatalf("dashboard exit %d after Ctrl-C, want 130", code)
	}
	if dialable(addr) {
		t.Fatalf("%s still accepts connections after the dashboard stopped", addr)
	}
}
