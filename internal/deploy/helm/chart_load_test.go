package helm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/testregistry/chartrepo"
)

// packageChart packages the deploy engine's test chart name and returns
// the archive.
func packageChart(t *testing.T, name string) []byte {
	t.Helper()
	return chartrepo.Package(t, filepath.Join(testenv.DeployCharts(), name))
}

func TestLoadChartDir(t *testing.T) {
	cases := []struct {
		name  string
		path  string
		check func(g Gomega, err error)
	}{
		{"chart with CRD", "demo", func(g Gomega, err error) { g.Expect(err).NotTo(HaveOccurred()) }},
		{"dependencies are not resolved by LoadChartDir", "needsdep", func(g Gomega, err error) { g.Expect(err).NotTo(HaveOccurred()) }},
		{"missing path", "nope", func(g Gomega, err error) {
			g.Expect(fault.IsPermanent(err)).To(BeTrue())
			g.Expect(err.Error()).To(ContainSubstring(`"nope": not found`))
		}},
		{"escaping path", "../..", func(g Gomega, err error) {
			g.Expect(fault.IsPermanent(err)).To(BeTrue())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadChartDir(testenv.DeployCharts(), tc.path)
			tc.check(NewWithT(t), err)
		})
	}
}

func TestLoadRepo(t *testing.T) {
	g := NewWithT(t)
	tgz := packageChart(t, "demo")
	sum := sha256.Sum256(tgz)
	idx := repo.NewIndexFile()
	meta, err := loader.Load(filepath.Join(testenv.DeployCharts(), "demo"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(idx.MustAdd(meta.Metadata, "demo-0.1.0.tgz", "", hex.EncodeToString(sum[:]))).To(Succeed())
	good, err := yaml.Marshal(idx)
	g.Expect(err).NotTo(HaveOccurred())
	idx.Entries["demo"][0].Digest = strings.Repeat("0", 64)
	bad, _ := yaml.Marshal(idx)

	var index atomic.Value
	index.Store(good)
	var archives atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/charts/index.yaml":
			_, _ = w.Write(index.Load().([]byte))
		case "/charts/demo-0.1.0.tgz":
			archives.Add(1)
			_, _ = w.Write(tgz)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	l := &ChartLoader{CacheDir: t.TempDir()}
	ctx := context.Background()

	for _, version := range []string{"0.1.0", ">=0.1.0 <1", ""} {
		ch, err := l.LoadRepo(ctx, srv.URL+"/charts", "demo", version)
		g.Expect(err).NotTo(HaveOccurred(), version)
		g.Expect(ch.Metadata.Version).To(Equal("0.1.0"))
	}
	g.Expect(archives.Load()).To(Equal(int32(1)), "the archive is cached by URL and digest")

	_, err = l.LoadRepo(ctx, srv.URL+"/charts", "demo", "2.x")
	g.Expect(fault.IsPermanent(err)).To(BeTrue())
	_, err = l.LoadRepo(ctx, srv.URL+"/charts", "other", "")
	g.Expect(fault.IsPermanent(err)).To(BeTrue())

	index.Store(bad)
	_, err = l.LoadRepo(ctx, srv.URL+"/charts", "demo", "0.1.0")
	g.Expect(fault.IsPermanent(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("does not match the index"))

	small := &ChartLoader{CacheDir: t.TempDir(), MaxIndexSize: 10}
	_, err = small.LoadRepo(ctx, srv.URL+"/charts", "demo", "")
	g.Expect(err).To(MatchError(ContainSubstring("larger than 10 bytes")))

	srv.Close()
	_, err = l.LoadRepo(ctx, srv.URL+"/charts", "demo", "")
	g.Expect(fault.IsUnavailable(err)).To(BeTrue(), "%v", err)
}

func TestLoadOCI(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	chartrepo.PushOCI(t, packageChart(t, "demo"), host+"/charts")

	l := &ChartLoader{CacheDir: t.TempDir()}
	ctx := context.Background()
	for _, version := range []string{"0.1.0", "0.x", ""} {
		ch, err := l.LoadOCI(ctx, "oci://"+host+"/charts/demo", version, true)
		g.Expect(err).NotTo(HaveOccurred(), version)
		g.Expect(ch.Name()).To(Equal("demo"))
	}
	_, err := l.LoadOCI(ctx, "oci://"+host+"/charts/demo", "9.9.9", true)
	g.Expect(err).To(HaveOccurred())
	// HTTPS to a plain-HTTP registry fails: no silent fallback.
	_, err = l.LoadOCI(ctx, "oci://"+host+"/charts/demo", "0.1.0", false)
	g.Expect(err).To(HaveOccurred())
}
