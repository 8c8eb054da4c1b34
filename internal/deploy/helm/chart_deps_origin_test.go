package helm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testregistry/chartrepo"
)

// Issue 31, item 1, for the chart cache, which every environment shares:
// tenant A loads a chart from its private repository; tenant B hosts an
// index.yaml that lists the same chart at A's archive URL with A's
// digest. B's load must not be served A's cached archive: the archive is
// cached for the repository whose index listed it, and B's download of
// A's URL (without A's credentials) is refused.
func TestChartCachedForOneRepositoryIsNotServedThroughAnothersIndex(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const user, password = "reader", "s3cret-Pa55"
	private := chartrepo.Start(t)
	private.RequireBasicAuth(user, password)
	archive := chartrepo.PackageFiles(t, configMapChart("secret-app", "1.0.0", ""))
	private.Add(t, archive)
	sum := sha256.Sum256(archive)

	cache := t.TempDir()
	a := &ChartLoader{CacheDir: cache}
	creds := &ChartCredentials{
		Entries:   []v1alpha1.ChartCredentials{{URLPrefix: private.URL, SecretRef: v1alpha1.LocalObjectReference{Name: "basic"}}},
		Namespace: "team",
		Reader:    fake.NewClientBuilder().WithObjects(secretObj("basic", map[string]string{"username": user, "password": password})).Build(),
	}
	_, err := a.Load(ctx, v1alpha1.ChartRef{Repo: private.URL, Name: "secret-app"}, nil, LoadOptions{Credentials: creds})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(private.Downloads()).To(BeEquivalentTo(1))

	index := fmt.Sprintf(`apiVersion: v1
entries:
  secret-app:
  - apiVersion: v2
    name: secret-app
    version: 1.0.0
    urls: [%q]
    digest: %s
`, private.URL+"/secret-app-1.0.0.tgz", hex.EncodeToString(sum[:]))
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/charts/index.yaml" {
			_, _ = w.Write([]byte(index))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(liar.Close)

	b := &ChartLoader{CacheDir: cache}
	ch, err := b.Load(ctx, v1alpha1.ChartRef{Repo: liar.URL + "/charts", Name: "secret-app"}, nil, LoadOptions{})
	g.Expect(err).To(MatchError(ContainSubstring("401 Unauthorized")), "tenant B was served A's private chart")
	g.Expect(ch).To(BeNil())
}
