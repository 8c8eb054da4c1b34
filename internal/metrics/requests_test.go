package metrics

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
)

func TestRequestVerb(t *testing.T) {
	cases := []struct{ method, url, verb string }{
		{"GET", "/api/v1/namespaces/a/configmaps/x", VerbGet},
		{"GET", "/api/v1/namespaces/a/configmaps", VerbList},
		{"GET", "/api/v1/namespaces/a/configmaps?watch=true", VerbWatch},
		{"GET", "/apis/apps/v1/namespaces/a/deployments/web/status", VerbGet},
		{"GET", "/apis/apps/v1/deployments", VerbList},
		{"GET", "/api/v1/namespaces/a", VerbGet},
		{"GET", "/api/v1/namespaces", VerbList},
		{"GET", "/apis/apps/v1", VerbDiscovery},
		{"GET", "/api", VerbDiscovery},
		{"GET", "/openapi/v3", VerbDiscovery},
		{"POST", "/api/v1/namespaces/a/secrets", VerbCreate},
		{"PUT", "/api/v1/namespaces/a/secrets/s", VerbUpdate},
		{"PATCH", "/apis/apps/v1/namespaces/a/deployments/web?fieldManager=x", VerbPatch},
		{"PATCH", "/apis/apps/v1/namespaces/a/deployments/web?dryRun=All&fieldManager=x", VerbDryRun},
		{"DELETE", "/api/v1/namespaces/a/secrets/s", VerbDelete},
		{"DELETE", "/api/v1/namespaces/a/secrets", VerbDeleteCollection},
	}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, c.url, nil)
		if got := RequestVerb(req); got != c.verb {
			t.Errorf("%s %s: %s, want %s", c.method, c.url, got, c.verb)
		}
	}
}

// A copy of a counted config, impersonating, is counted too: that is how
// tenants' and Helm's requests are seen.
func TestCountRequestsCountsCopies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}`))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	counts := CountRequests(cfg)
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:a:deployer"}
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		t.Fatal(err)
	}
	before := counts.Snapshot()
	for _, m := range []string{"GET", "PATCH"} {
		req, _ := http.NewRequest(m, srv.URL+"/api/v1/namespaces/a/configmaps/x", nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	d := counts.Snapshot().Sub(before)
	if d[VerbGet] != 1 || d[VerbPatch] != 1 || d.Reads() != 1 || d.Writes() != 1 {
		t.Errorf("counted %v, want one get and one patch", d)
	}
}

func TestDirBytes(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sources", "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, size := range map[string]int{"sources/a/f": 100, "sources/g": 23} {
		if err := os.WriteFile(filepath.Join(root, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := DirBytes(root); n != 123 {
		t.Errorf("DirBytes = %d, want 123", n)
	}
}

// Two operators in one process (an envtest suite beside a benchmark)
// count their own requests: one's are not in the other's counts.
func TestCountRequestsOfTwoConfigsApart(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}`))
	}))
	defer srv.Close()
	a, b := &rest.Config{Host: srv.URL}, &rest.Config{Host: srv.URL}
	countsA, countsB := CountRequests(a), CountRequests(b)
	hc, err := rest.HTTPClientFor(a)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(srv.URL + "/api/v1/namespaces/a/configmaps/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := countsA.Snapshot()[VerbGet]; got != 1 {
		t.Errorf("a counted %d gets of its own, want 1", got)
	}
	if got := countsB.Snapshot(); got.Reads()+got.Writes() != 0 {
		t.Errorf("b counted a's request: %v", got)
	}
}
