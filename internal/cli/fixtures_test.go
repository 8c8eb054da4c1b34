package cli

import (
	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// teamSpec is an environment of two components and three suites: crds,
// then web (an image and manifests from the oci source app); unit after
// web, e2e and smoke labelled e2e.
func teamSpec() v1alpha1.DevEnvironmentSpec {
	return v1alpha1.DevEnvironmentSpec{
		Registry: &v1alpha1.RegistrySpec{Prefix: "registry.test/team"},
		Sources: []v1alpha1.Source{
			{Name: "app", OCI: &v1alpha1.OCISource{Repository: "registry.test/team/src", Tag: "dev"}},
			{Name: "upstream", Git: &v1alpha1.GitSource{URL: "https://git.test/team/upstream.git"}},
		},
		Components: []v1alpha1.Component{
			{Name: "crds", Manifests: &v1alpha1.ManifestsSpec{Source: "upstream", Paths: []string{"config/crd"}}},
			{Name: "web", DependsOn: []string{"crds"},
				Images:    []v1alpha1.ImageSpec{{Name: "web", Source: "app", Layers: []v1alpha1.LayerMapping{{From: "bin/web", To: "/web"}}}},
				Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"deploy"}}},
		},
		Tests: []v1alpha1.TestSuite{
			{Name: "unit", Image: v1alpha1.TestImage{Ref: "golang:1.25"}, Command: []string{"make", "test"}, DependsOn: []string{"web"}},
			{Name: "e2e", Labels: []string{"e2e"}, Image: v1alpha1.TestImage{Built: "web"}, Command: []string{"/e2e"}, DependsOn: []string{"web"}},
			{Name: "smoke", Labels: []string{"e2e"}, Image: v1alpha1.TestImage{Built: "web"}, Command: []string{"/smoke"}},
		},
	}
}
