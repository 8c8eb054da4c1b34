//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	helmregistry "helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/internal/testenv"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
)

// fixtureCharts are the charts of the deploy engine's umbrella test, in
// the shape of Dynamo's platform chart.
func fixtureCharts(c *devcluster.Cluster) string {
	return filepath.Join(c.Root, "test", "operatortest", "testdata", "charts")
}

// packageChartDir packages a chart directory as `helm package` does.
func packageChartDir(t *testing.T, dir string) ([]byte, string, string) {
	t.Helper()
	g := NewWithT(t)
	ch, err := loader.Load(dir)
	g.Expect(err).NotTo(HaveOccurred())
	file, err := chartutil.Save(ch, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(file)
	g.Expect(err).NotTo(HaveOccurred())
	return data, ch.Name(), ch.Metadata.Version
}

// serveChartRepoToPods serves the chart in dir as an HTTP chart repository
// behind basic auth on the node address, which the operator's pod
// reaches, and returns the repository's URL.
func serveChartRepoToPods(t *testing.T, dir, user, password string) string {
	t.Helper()
	g := NewWithT(t)
	tgz, name, version := packageChartDir(t, dir)
	ch, err := loader.LoadArchive(strings.NewReader(string(tgz)))
	g.Expect(err).NotTo(HaveOccurred())
	archive := name + "-" + version + ".tgz"
	sum := sha256.Sum256(tgz)
	idx := repo.NewIndexFile()
	g.Expect(idx.MustAdd(ch.Metadata, archive, "", hex.EncodeToString(sum[:]))).To(Succeed())
	index, err := yaml.Marshal(idx)
	g.Expect(err).NotTo(HaveOccurred())
	host, _, _ := net.SplitHostPort(registry)
	l, err := net.Listen("tcp", host+":0")
	g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/charts/index.yaml":
			_, _ = w.Write(index)
		case "/charts/" + archive:
			_, _ = w.Write(tgz)
		default:
			http.NotFound(w, r)
		}
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/charts"
}

// TestUmbrellaChartDependencies is issue 18's umbrella chart on the real
// cluster: Dynamo's platform chart shape, its nats subchart from a chart
// repository behind credentials (served by this test on the node
// address), etcd from the cluster's registry as an OCI chart and grove
// from the chart's own directory (file://), each toggled by a value. The
// operator in its pod resolves them; the enabled subcharts' objects are in
// the cluster, the disabled one's are not, and flipping the toggles adds
// and removes them.
func TestUmbrellaChartDependencies(t *testing.T) {
	c := need(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-deps")
	charts := fixtureCharts(c)

	chartRepo := serveChartRepoToPods(t, filepath.Join(charts, "nats"), "reader", "Ch4rt-Pa55")
	etcd, name, version := packageChartDir(t, filepath.Join(charts, "etcd"))
	rc, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(),
		helmregistry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "creds.json")))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = rc.Push(etcd, registry+"/"+ns+"/charts/"+name+":"+version)
	g.Expect(err).NotTo(HaveOccurred())
	ociRepo := "oci://" + registry + "/" + ns + "/charts"

	// The source holds the chart where Dynamo keeps it.
	root := t.TempDir()
	dir := filepath.Join(root, "deploy", "cloud", "helm", "platform")
	g.Expect(os.MkdirAll(filepath.Dir(dir), 0o755)).To(Succeed())
	g.Expect(os.Rename(copyDir(t, filepath.Join(charts, "platform")), dir)).To(Succeed())
	chartYAML, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	writeFiles(t, dir, Files{"Chart.yaml": strings.NewReplacer("${CHART_REPO}", chartRepo, "${OCI_REPO}", ociRepo).Replace(string(chartYAML))})
	g.Expect(c.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chart-repo"},
		StringData: map[string]string{"username": "reader", "password": "Ch4rt-Pa55"},
	})).To(Succeed())

	env := newEnv(ns, "dynamo").Registry().ChartCredentials(chartRepo, "chart-repo").Components(
		Component("platform", Chart("deploy/cloud/helm/platform", func(h *v1alpha1.HelmSpec) {
			h.Values = &apiextensionsv1.JSON{Raw: []byte(`{"grove": {"enabled": false}}`)}
		}))).Build()
	pushDir(t, env, root)
	g.Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	started := time.Now()
	waitEnv(t, key, 3*time.Minute, false, readyNow)
	t.Logf("umbrella chart with three dependencies Ready in %s", time.Since(started).Round(time.Millisecond))
	g.Expect(testenv.DeployedChartVersions(t, dc.Client, ns, "platform", "platform", "nats", "etcd", "grove")).To(Equal(map[string]string{
		"platform": "0.1.0", "nats": "1.2.3", "etcd": "0.3.1"}), "grove's condition is off")

	env.Spec.Components[0].Helm.Values = &apiextensionsv1.JSON{Raw: []byte(`{"nats": {"enabled": false}}`)}
	g.Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())
	waitEnv(t, key, 3*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		g.Expect(componentOf(env, "platform").Release.Revision).To(Equal(2))
	})
	g.Expect(testenv.DeployedChartVersions(t, dc.Client, ns, "platform", "platform", "nats", "etcd", "grove")).To(Equal(map[string]string{
		"platform": "0.1.0", "etcd": "0.3.1", "grove": "0.1.0"}), "nats off, grove on")
}
