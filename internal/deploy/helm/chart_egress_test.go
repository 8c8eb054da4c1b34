package helm

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/devloop-dev/devloop/internal/egress"
	"github.com/devloop-dev/devloop/internal/fault"
)

// A chart repository's index.yaml may name archives anywhere, and the
// index itself may redirect anywhere: both are dialled through the egress
// policy, and a denied address receives no request.
func TestChartLoaderEgressPolicy(t *testing.T) {
	var deniedHits atomic.Int64
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		deniedHits.Add(1)
		_, _ = w.Write([]byte("metadata"))
	}))
	defer denied.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(denied.URL, "http://"))
	// By name: the address it resolves to is what the policy refuses.
	deniedURL := "http://localhost:" + port

	repo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect/index.yaml":
			http.Redirect(w, r, deniedURL+"/index.yaml", http.StatusFound)
		case "/index.yaml":
			_, _ = w.Write([]byte("apiVersion: v1\nentries:\n  web:\n  - name: web\n    version: 1.0.0\n    urls: [" + deniedURL + "/web-1.0.0.tgz]\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer repo.Close()

	p, err := egress.New(egress.Config{DenyCIDRs: []string{"127.0.0.0/8", "::1/128"}, AllowHosts: []string{strings.TrimPrefix(repo.URL, "http://")}})
	if err != nil {
		t.Fatal(err)
	}
	l := &ChartLoader{CacheDir: t.TempDir(), Egress: p}
	ctx := context.Background()
	for name, load := range map[string]func() error{
		"archive URL in the index": func() error { _, err := l.LoadRepo(ctx, repo.URL, "web", "1.0.0"); return err },
		"index redirected":         func() error { _, err := l.LoadRepo(ctx, repo.URL+"/redirect", "web", "1.0.0"); return err },
		"OCI registry": func() error {
			_, err := l.LoadOCI(ctx, "oci://127.0.0.1:"+port+"/charts/web", "1.0.0", true)
			return err
		},
	} {
		err := load()
		if err == nil || !strings.Contains(err.Error(), "egress policy refuses 127.0.0.1") || !fault.IsPermanent(err) {
			t.Errorf("%s: err %v, want a permanent egress refusal", name, err)
		}
	}
	if n := deniedHits.Load(); n != 0 {
		t.Errorf("the denied server received %d requests", n)
	}
}
