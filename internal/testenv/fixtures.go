package testenv

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The test data that tests of more than one package read. A test names
// it here instead of climbing into another package's testdata with a
// relative path, so the files have one owner and moving them changes one
// place.

// DeployCharts is the directory of the small charts the deploy engine's
// tests install (demo, hookjob, hookfail, needsdep):
// internal/deploy/testdata/charts.
func DeployCharts() string {
	return filepath.Join(RepoRoot(), "internal", "deploy", "testdata", "charts")
}

// FeatureCharts is the directory of the charts the operator's feature
// tests deploy: web (a ConfigMap and a Deployment), the umbrella chart
// platform in the shape of Dynamo's with its dependencies nats and etcd,
// and the hook charts installhook and upgradehook:
// test/operatortest/testdata/charts, beside the runner of those tests.
func FeatureCharts() string {
	return filepath.Join(RepoRoot(), "test", "operatortest", "testdata", "charts")
}

// DeployedChartVersions reads the ConfigMap <release>-<chart> every
// feature chart renders (its data.version is the chart's version) and
// returns chart -> version for those that exist: which charts of an
// umbrella release were deployed, and at what version.
func DeployedChartVersions(t testing.TB, c client.Reader, ns, release string, charts ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, chart := range charts {
		cm := &corev1.ConfigMap{}
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: release + "-" + chart}, cm)
		switch {
		case err == nil:
			out[chart] = cm.Data["version"]
		case !apierrors.IsNotFound(err):
			t.Fatal(err)
		}
	}
	return out
}
