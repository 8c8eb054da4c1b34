package controllers

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/test/builder"
)

// An image moved to another component leaves its old owner's status at
// once, even while that component is blocked and not built: the status
// holds at most the spec's images (the CRD's total).
func TestPruneStatusDropsImagesNoLongerInTheirComponent(t *testing.T) {
	g := NewWithT(t)
	env := builder.Env("team", "dev").In("localhost:5000").Registry().AppSource().Components(
		builder.Component("old", builder.Manifests()),
		builder.Component("new", builder.Manifests(), builder.Images(builder.Image("web")))).Obj()
	env.Status.Components = []v1alpha1.ComponentStatus{
		{Name: "old", Phase: v1alpha1.PhaseBlocked, Images: []v1alpha1.ImageStatus{{Name: "web", Digest: "sha256:old"}}},
		{Name: "new", Images: []v1alpha1.ImageStatus{{Name: "web", Digest: "sha256:new"}}},
	}
	p, err := plan.Build(&env.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	pruneStatus(env, p)
	g.Expect(env.Status.Components[0].Images).To(BeEmpty())
	g.Expect(env.Status.Components[1].Images).To(HaveLen(1))
}
