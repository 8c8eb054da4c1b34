package testenv

import "path/filepath"

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
