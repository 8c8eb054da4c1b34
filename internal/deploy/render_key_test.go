package deploy

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/test/builder"
)

// TestARenderKeyCountsTheImagesTheComponentMayUse (issue 42, seen on
// Dynamo's tree): the image of a component the chart's component does not
// depend on (the unit suite's, built on demand when the suite was
// triggered) does not move the release's render key, which upgraded the
// release and rolled out the operator the live update had kept in place.
// Its own images, its dependencies' (at any depth) and those its
// imageValues name do.
func TestARenderKeyCountsTheImagesTheComponentMayUse(t *testing.T) {
	g := NewWithT(t)
	chart := builder.Component("platform", builder.Images(builder.Image("operator")), builder.DependsOn("crds"),
		builder.Chart("chart", builder.ImageValues(v1alpha1.ImageValue{Image: "sidecar", Path: "sidecar.image", From: "Reference"})))
	env := builder.Env("ns", "dynamo").Components(
		builder.Component("base", builder.Images(builder.Image("base-tools"))),
		builder.Component("crds", builder.Images(builder.Image("crd-gen")), builder.DependsOn("base")),
		chart,
		builder.Component("helpers", builder.Images(builder.Image("sidecar"))),
		builder.Component("test-tools", builder.Images(builder.Image("operator-test")), builder.OnDemand()),
	).Obj()
	built := func(name, digest string) BuiltImage {
		return BuiltImage{Name: name, Repositories: []string{"registry.test/" + name}, Reference: "registry.test/" + name + "@sha256:" + digest}
	}
	key := func(images ...BuiltImage) string {
		req := helm.ReleaseRequest{}
		g.Expect(helmRendering(&req, env, &env.Spec.Components[2], images, ApplyOptions{})).To(Succeed())
		return req.RenderKey
	}
	mine := []BuiltImage{built("base-tools", "1"), built("crd-gen", "1"), built("operator", "1"), built("sidecar", "1")}
	before := key(mine...)
	g.Expect(key(append(mine, built("operator-test", "1"))...)).To(Equal(before), "an image of a component it does not depend on")

	for i, img := range mine {
		moved := append([]BuiltImage{}, mine...)
		moved[i] = built(img.Name, "2")
		g.Expect(key(moved...)).NotTo(Equal(before), "a new build of %s", img.Name)
	}
}
