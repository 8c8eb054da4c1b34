package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/ui"
)

// The attacks on a dashboard bound to 127.0.0.1 with the user's
// credentials: a DNS-rebound page (another Host), a local process or page
// without the token, a second use of the printed URL's one-time code, and
// a cross-site form or fetch. Each must be refused and write nothing; the
// same request from the page itself goes through, so the refusals are the
// checks and not a broken action.
func TestUIRefusesWrongHostNoTokenAndCrossSite(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "ui-guard")
	createEnv(t, ns, "team", teamSpec())
	d := startDashboard(t, testOptions(), "-n", ns)

	do := func(method, path, host string, headers map[string]string) int {
		req, _ := http.NewRequest(method, d.base+path, nil)
		if host != "" {
			req.Host = host
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	port := strings.TrimPrefix(d.base, "http://127.0.0.1:")
	tok := map[string]string{ui.TokenHeader: d.token}
	for _, c := range []struct {
		name, method, path, host string
		headers                  map[string]string
		want                     int
	}{
		{"rebound host, the page", "GET", "/", "evil.test:" + port, nil, http.StatusForbidden},
		{"rebound host with the token", "GET", "/api/session", "evil.test:" + port, tok, http.StatusForbidden},
		{"another port", "GET", "/api/session", "127.0.0.1:1", tok, http.StatusForbidden},
		{"no token", "GET", "/api/session", "", nil, http.StatusUnauthorized},
		{"no token, stream", "GET", "/api/stream", "", nil, http.StatusUnauthorized},
		{"the code is no token", "GET", "/api/session", "", map[string]string{ui.TokenHeader: d.code}, http.StatusUnauthorized},
		{"a cookie is no token", "GET", "/api/session", "", map[string]string{"Cookie": "devloop_ui=" + d.token}, http.StatusUnauthorized},
		{"the spent code again", "POST", "/session", "", map[string]string{ui.CodeHeader: d.code}, http.StatusUnauthorized},
		{"a wrong code", "POST", "/session", "", map[string]string{ui.CodeHeader: strings.Repeat("0", len(d.code))}, http.StatusUnauthorized},
		{"a code from another site", "POST", "/session", "", map[string]string{ui.CodeHeader: d.code, "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a new code without a token", "POST", "/api/session/code", "", nil, http.StatusUnauthorized},
		{"the page (nothing secret)", "GET", "/", "", nil, http.StatusOK},
		{"localhost with the token", "GET", "/api/session", "localhost:" + port, tok, http.StatusOK},
	} {
		if got := do(c.method, c.path, c.host, c.headers); got != c.want {
			t.Errorf("%s: %s %s (Host %q): %d, want %d", c.name, c.method, c.path, c.host, got, c.want)
		}
	}

	// A page's "new tab" link: a fresh one-time URL, good once.
	var fresh struct{ URL string }
	if code, out := d.post(t, "/api/session/code", "", nil); code != http.StatusOK || json.Unmarshal([]byte(out), &fresh) != nil || !strings.HasPrefix(fresh.URL, d.base+"/?code=") {
		t.Fatalf("a new tab's URL: %d %s", code, out)
	}
	newCode := strings.TrimPrefix(fresh.URL, d.base+"/?code=")
	for i, want := range []int{http.StatusOK, http.StatusUnauthorized} {
		resp, err := exchange(d.base, newCode)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("use %d of the new tab's code: %s, want %d", i+1, resp.Status, want)
		}
	}

	body := `{"namespace":"` + ns + `","env":"team","suite":"unit","requestId":"r1"}`
	for _, c := range []struct {
		name    string
		headers map[string]string
	}{
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"same-site other origin", map[string]string{"Sec-Fetch-Site": "same-site"}},
		{"foreign Origin", map[string]string{"Origin": "http://evil.test"}},
		{"no token", map[string]string{ui.TokenHeader: ""}},
		{"wrong token", map[string]string{ui.TokenHeader: "0000"}},
	} {
		if code, out := d.post(t, "/api/trigger", body, c.headers); code != http.StatusForbidden && code != http.StatusUnauthorized {
			t.Errorf("%s: POST /api/trigger: %d %s, want 403 or 401", c.name, code, out)
		}
	}
	env := &v1alpha1.DevEnvironment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "team"}, env); err != nil {
		t.Fatal(err)
	}
	if v, ok := env.Annotations[v1alpha1.TriggerAnnotation]; ok {
		t.Fatalf("a refused request wrote trigger=%s", v)
	}
	if code, out := d.post(t, "/api/trigger", body, nil); code != http.StatusOK || !strings.Contains(out, `"value":"unit"`) {
		t.Fatalf("the page's own trigger: %d %s", code, out)
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "team"}, env); err != nil {
		t.Fatal(err)
	}
	if got := env.Annotations[v1alpha1.TriggerAnnotation]; got != "unit" {
		t.Fatalf("trigger annotation %q after the page's trigger, want unit", got)
	}
}

// A user whose Role covers namespace A only, impersonated with --as as
// kubectl does: the dashboard shows and does nothing in namespace B,
// whichever scope it is started with.
func TestUIShowsNothingOutsideTheUsersRBAC(t *testing.T) {
	ctx := context.Background()
	nsA := testenv.Namespace(t, k8s, "ui-rbac-a")
	nsB := testenv.Namespace(t, k8s, "ui-rbac-b")
	createEnv(t, nsA, "mine", teamSpec())
	createEnv(t, nsB, "theirs", teamSpec())
	user := "ui-alice-" + nsA
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "dev"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"devenvironments"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events", "configmaps", "pods", "pods/log"}, Verbs: []string{"get", "list", "watch"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "dev"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "dev"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	create(t, role, binding)

	seesB := func(events []sse) string {
		for _, e := range events {
			if u := uiUpdate(e); strings.HasPrefix(u.Key, nsB+"/") || strings.Contains(string(u.Data), `"namespace":"`+nsB+`"`) {
				return e.data
			}
		}
		return ""
	}
	// Read until the refusal is reported, or until something of B shows
	// (which fails the test at once rather than after the minute).
	problemWith := func(what string) func(sse) bool {
		return func(e sse) bool {
			u := uiUpdate(e)
			return (u.Kind == "problem" && u.Key == what && len(u.Data) > 2) || seesB([]sse{e}) != ""
		}
	}

	// All namespaces: the cluster-wide list is refused and said so.
	all := startDashboard(t, testOptions(), "--as", user, "-A")
	got := all.readEvents(t, "/api/stream", problemWith("devenvironments"))
	if b := seesB(got); b != "" {
		t.Fatalf("-A as %s showed namespace B: %s", user, b)
	}
	t.Logf("-A as %s: %s", user, got[len(got)-1].data)

	// Namespace B: refused, and nothing of it shown.
	inB := startDashboard(t, testOptions(), "--as", user, "-n", nsB)
	got = inB.readEvents(t, "/api/stream", problemWith("devenvironments"))
	if b := seesB(got); b != "" {
		t.Fatalf("-n B as %s showed namespace B: %s", user, b)
	}

	// Namespace A: its environment is shown; B's cannot be read or acted
	// on through the page either.
	inA := startDashboard(t, testOptions(), "--as", user, "-n", nsA)
	got = inA.readEvents(t, "/api/stream", func(e sse) bool { return uiUpdate(e).Key == nsA+"/mine" || seesB([]sse{e}) != "" })
	if b := seesB(got); b != "" {
		t.Fatalf("-n A as %s showed namespace B: %s", user, b)
	}
	code, out := inA.post(t, "/api/trigger", `{"namespace":"`+nsB+`","env":"theirs","suite":"unit","requestId":"b1"}`, nil)
	if code == http.StatusOK || !strings.Contains(out, "forbidden") {
		t.Fatalf("trigger in namespace B as %s: %d %s, want refused as forbidden", user, code, out)
	}
	logs := inA.readEvents(t, "/api/logs?"+query("namespace", nsB, "env", "theirs", "kind", "component", "name", "web"), func(e sse) bool { return e.event == "end" })
	if end := logs[len(logs)-1].data; !strings.Contains(end, "forbidden") {
		t.Fatalf("logs in namespace B as %s: %s, want forbidden", user, end)
	}
	env := &v1alpha1.DevEnvironment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "theirs"}, env); err != nil {
		t.Fatal(err)
	}
	if v, ok := env.Annotations[v1alpha1.TriggerAnnotation]; ok {
		t.Fatalf("namespace B's environment got trigger=%s", v)
	}
}

// Up/down and debug from the page write the annotations `kubectl devloop
// up|down|debug` write, through the same code.
func TestUIComponentActions(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "ui-actions")
	spec := teamSpec()
	spec.Components = append(spec.Components, v1alpha1.Component{Name: "kwok", OnDemand: true, Manifests: &v1alpha1.ManifestsSpec{Source: "upstream", Paths: []string{"kwok"}}})
	spec.Components[1].Images[0].Run = &v1alpha1.BuildRun{Image: "golang:1.25", Command: []string{"go", "build", "-o", "/out/web", "."}}
	createEnv(t, ns, "team", spec)
	d := startDashboard(t, testOptions(), "-n", ns)
	annotations := func() map[string]string {
		env := &v1alpha1.DevEnvironment{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "team"}, env); err != nil {
			t.Fatal(err)
		}
		return env.Annotations
	}
	for i, c := range []struct {
		component, action string
		key, want         string
	}{
		{"kwok", "up", v1alpha1.UpAnnotation, "kwok"},
		{"web/web", "debug-on", v1alpha1.DebugAnnotation, "web/web"},
		{"kwok", "down", v1alpha1.UpAnnotation, ""},
		{"web/web", "debug-off", v1alpha1.DebugAnnotation, ""},
	} {
		body := fmt.Sprintf(`{"namespace":%q,"env":"team","component":%q,"action":%q,"requestId":"c%d"}`, ns, c.component, c.action, i)
		if code, out := d.post(t, "/api/component", body, nil); code != http.StatusOK {
			t.Fatalf("%s %s: %d %s", c.action, c.component, code, out)
		}
		if got := annotations()[c.key]; got != c.want {
			t.Fatalf("after %s %s: %s=%q, want %q", c.action, c.component, c.key, got, c.want)
		}
	}
	if code, out := d.post(t, "/api/component", fmt.Sprintf(`{"namespace":%q,"env":"team","component":"web","action":"up","requestId":"x"}`, ns), nil); code == http.StatusOK || !strings.Contains(out, "on-demand") {
		t.Fatalf("up of a component not on demand: %d %s, want refused naming the on-demand ones", code, out)
	}
}
