package deploy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// packageTestChart packages testenv.FeatureCharts()/<name> as `helm
// package` does.
func packageTestChart(t *testing.T, name string) []byte {
	t.Helper()
	g := NewWithT(t)
	ch, err := loader.Load(filepath.Join(testenv.FeatureCharts(), name))
	g.Expect(err).NotTo(HaveOccurred())
	file, err := chartutil.Save(ch, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(file)
	g.Expect(err).NotTo(HaveOccurred())
	return data
}

// serveChartRepo serves the test chart name as an HTTP chart repository
// (index.yaml and the archive) that requires basic auth, and returns the
// repository's URL.
func serveChartRepo(t *testing.T, name, user, password string) string {
	t.Helper()
	g := NewWithT(t)
	tgz := packageTestChart(t, name)
	ch, err := loader.Load(filepath.Join(testenv.FeatureCharts(), name))
	g.Expect(err).NotTo(HaveOccurred())
	archive := name + "-" + ch.Metadata.Version + ".tgz"
	sum := sha256.Sum256(tgz)
	idx := repo.NewIndexFile()
	g.Expect(idx.MustAdd(ch.Metadata, archive, "", hex.EncodeToString(sum[:]))).To(Succeed())
	index, err := yaml.Marshal(idx)
	g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	t.Cleanup(srv.Close)
	return srv.URL + "/charts"
}

// pushTestChart pushes the test chart name to the suite's registry under
// repository and returns the oci:// URL of the repository.
func pushTestChart(t *testing.T, name, repository string) string {
	t.Helper()
	g := NewWithT(t)
	ch, err := loader.Load(filepath.Join(testenv.FeatureCharts(), name))
	g.Expect(err).NotTo(HaveOccurred())
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(),
		registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "creds.json")))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = rc.Push(packageTestChart(t, name), operatortest.Registry.Host+"/"+repository+"/"+name+":"+ch.Metadata.Version)
	g.Expect(err).NotTo(HaveOccurred())
	return "oci://" + operatortest.Registry.Host + "/" + repository
}

// TestUmbrellaChartWithDependencies is issue 18's umbrella chart through
// the reconciler, in the shape of Dynamo's platform chart: nats from a
// chart repository that wants credentials, etcd from the OCI registry and
// grove from the chart's own directory (file://), each toggled by a
// value. The credentials' Secret is read as the environment's
// ServiceAccount (the operator may read none): missing, the environment
// stalls naming the field; once there, the release renders the enabled
// subcharts only, and turning the toggles over adds and removes theirs.
func TestUmbrellaChartWithDependencies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	chartRepo := serveChartRepo(t, "nats", "reader", "Ch4rt-Pa55")
	ociRepo := pushTestChart(t, "etcd", ns+"/charts")
	files := operatortest.DirFiles(t, filepath.Join(testenv.FeatureCharts(), "platform"), "deploy/platform")
	files["deploy/platform/Chart.yaml"] = strings.NewReplacer("${CHART_REPO}", chartRepo, "${OCI_REPO}", ociRepo).
		Replace(files["deploy/platform/Chart.yaml"])
	operatortest.AppFiles(t, ns, files)

	// The OCI dependency is in the environment's own registry, the one
	// plain HTTP is allowed to.
	env := operatortest.Env(ns, "dynamo").ServiceAccount(operatortest.Deployer).Registry().AppSource().
		Components(builder.Component("platform", builder.Chart("deploy/platform", builder.Values(`{"grove": {"enabled": false}}`)))).Obj()
	env.Spec.ChartCredentials = []v1alpha1.ChartCredentials{{URLPrefix: chartRepo, SecretRef: v1alpha1.LocalObjectReference{Name: "chart-repo"}}}
	key := operatortest.CreateEnv(t, env)

	env = operatortest.WaitForStalled(t, key, "", `spec.components[0].helm.chart: dependency "nats" (`+chartRepo+`, version ~1.2.0)`, `spec.chartCredentials[0].secretRef: Secret "chart-repo" not found`)
	g.Expect(env.Status.Component("platform").Phase).To(Equal(v1alpha1.PhaseFailed))
	operatortest.ExpectKstatus(t, env, status.FailedStatus)

	g.Expect(operatortest.Admin.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chart-repo"},
		StringData: map[string]string{"username": "reader", "password": "Ch4rt-Pa55"},
	})).To(Succeed())
	_ = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("platform").Release).NotTo(BeNil())
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
	g.Expect(testenv.DeployedChartVersions(t, operatortest.Admin, ns, "platform", "platform", "nats", "etcd", "grove")).To(Equal(map[string]string{
		"platform": "0.1.0", "nats": "1.2.3", "etcd": "0.3.1"}), "grove's condition is off")

	// Dynamo's toggles: nats off, grove on.
	operatortest.EditSpec(t, key, func(cur *v1alpha1.DevEnvironment) {
		cur.Spec.Components[0].Helm.Values = &apiextensionsv1.JSON{Raw: []byte(`{"nats": {"enabled": false}}`)}
	})
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("platform").Release.Revision).To(Equal(2))
	})
	g.Expect(testenv.DeployedChartVersions(t, operatortest.Admin, ns, "platform", "platform", "nats", "etcd", "grove")).To(Equal(map[string]string{
		"platform": "0.1.0", "etcd": "0.3.1", "grove": "0.1.0"}))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}
