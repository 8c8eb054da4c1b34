package v1alpha1

import (
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestDeployAccessorsAnswerPerKind: what other packages ask of a
// component's deploy kind, answered for a chart from a source, a chart
// from a repository, manifests and images only.
func TestDeployAccessorsAnswerPerKind(t *testing.T) {
	values := &apiextensionsv1.JSON{Raw: []byte(`{"a":1}`)}
	chart := Component{Name: "api", Helm: &HelmSpec{Chart: ChartRef{Source: "app"}, Namespace: "apps",
		Values: values, ValuesFrom: []ValuesReference{{Kind: "ConfigMap", Name: "settings"}},
		ImageValues: []ImageValue{{Image: "api", Path: "image"}}}}
	repoChart := Component{Name: "db", Helm: &HelmSpec{ReleaseName: "pg"}}
	manifests := Component{Name: "web", Manifests: &ManifestsSpec{Source: "app", Paths: []string{"deploy"}, Namespace: "web"}}
	imagesOnly := Component{Name: "tools"}

	for _, tc := range []struct {
		c                      Component
		deployed, fromSource   bool
		source, field, ns      string
		release                string
		hasRelease, hasPaths   bool
		values, from, imageVal int
	}{
		{c: chart, deployed: true, fromSource: true, source: "app", field: "helm.chart.source", ns: "apps",
			release: "api", hasRelease: true, values: 1, from: 1, imageVal: 1},
		{c: repoChart, deployed: true, release: "pg", hasRelease: true},
		{c: manifests, deployed: true, fromSource: true, source: "app", field: "manifests.source", ns: "web", hasPaths: true},
		{c: imagesOnly},
	} {
		c := tc.c
		if c.Deployed() != tc.deployed {
			t.Errorf("%s: Deployed() = %v, want %v", c.Name, c.Deployed(), tc.deployed)
		}
		src, field, ok := c.DeploySource()
		if ok != tc.fromSource || src != tc.source || strings.Join(field, ".") != tc.field {
			t.Errorf("%s: DeploySource() = %q, %q, %v; want %q, %q, %v", c.Name, src, strings.Join(field, "."), ok, tc.source, tc.field, tc.fromSource)
		}
		if c.DeployNamespace() != tc.ns {
			t.Errorf("%s: DeployNamespace() = %q, want %q", c.Name, c.DeployNamespace(), tc.ns)
		}
		if release, ok := c.ReleaseName(); release != tc.release || ok != tc.hasRelease {
			t.Errorf("%s: ReleaseName() = %q, %v; want %q, %v", c.Name, release, ok, tc.release, tc.hasRelease)
		}
		if paths, ok := c.ManifestPaths(); ok != tc.hasPaths || (ok && !slices.Equal(paths, []string{"deploy"})) {
			t.Errorf("%s: ManifestPaths() = %v, %v", c.Name, paths, ok)
		}
		if got := boolCount(c.HelmValues() != nil); got != tc.values {
			t.Errorf("%s: HelmValues() set = %d, want %d", c.Name, got, tc.values)
		}
		if len(c.ValuesFrom()) != tc.from || len(c.ImageValues()) != tc.imageVal {
			t.Errorf("%s: ValuesFrom() %d, ImageValues() %d; want %d, %d", c.Name, len(c.ValuesFrom()), len(c.ImageValues()), tc.from, tc.imageVal)
		}
	}
}

func boolCount(b bool) int {
	if b {
		return 1
	}
	return 0
}
