package controllers

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/plan"
)

// An image moved to another component leaves its old owner's status at
// once, even while that component is blocked and not built: the status
// holds at most the spec's images (the CRD's total).
func TestPruneStatusDropsImagesNoLongerInTheirComponent(t *testing.T) {
	g := NewWithT(t)
	env := &v1alpha1.DevEnvironment{
		Spec: v1alpha1.DevEnvironmentSpec{
			Registry: &v1alpha1.RegistrySpec{Prefix: "localhost:5000/team"},
			Components: []v1alpha1.Component{
				{Name: "old", Manifests: &v1alpha1.ManifestsSpec{Source: "app"}},
				{Name: "new", Manifests: &v1alpha1.ManifestsSpec{Source: "app"}, Images: []v1alpha1.ImageSpec{{Name: "web", Source: "app"}}},
			},
			Sources: []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{Repository: "localhost:5000/src"}}},
		},
		Status: v1alpha1.DevEnvironmentStatus{Components: []v1alpha1.ComponentStatus{
			{Name: "old", Phase: v1alpha1.PhaseBlocked, Images: []v1alpha1.ImageStatus{{Name: "web", Digest: "sha256:old"}}},
			{Name: "new", Images: []v1alpha1.ImageStatus{{Name: "web", Digest: "sha256:new"}}},
		}},
	}
	p, err := plan.Build(&env.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	pruneStatus(env, p)
	g.Expect(env.Status.Components[0].Images).To(BeEmpty())
	g.Expect(env.Status.Components[1].Images).To(HaveLen(1))
}
