package source

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

// TestOutputRefReadsTheProducingImagesStatus: an output source has no
// reference until its image pushed the output; then it is that artifact
// by digest, fetched with the registry's credentials.
func TestOutputRefReadsTheProducingImagesStatus(t *testing.T) {
	g := NewWithT(t)
	digest := "sha256:" + strings.Repeat("ab", 32)
	env := builder.Env("team", "dev").In("10.0.0.1:5000").Registry().RegistryCredentials("regcred").Components(
		builder.Component("operator", builder.Images(builder.Image("operator",
			builder.Run(&v1alpha1.BuildRun{Outputs: []v1alpha1.RunOutput{{Name: "crds", Path: "config/crd/bases"}}}))))).Obj()
	src := v1alpha1.Source{Name: "crds", Output: &v1alpha1.BuildOutputReference{Image: "operator", Name: "crds"}}

	_, ok := OutputRef(env, src)
	g.Expect(ok).To(BeFalse(), "not built yet")
	env.Status.Components = []v1alpha1.ComponentStatus{{Name: "operator", Images: []v1alpha1.ImageStatus{{Name: "operator"}}}}
	_, ok = OutputRef(env, src)
	g.Expect(ok).To(BeFalse(), "built without the output")

	env.Status.Components[0].Images[0].Outputs = []v1alpha1.OutputStatus{{Name: "crds", Repository: "10.0.0.1:5000/team/operator/outputs/crds", Digest: digest}}
	ref, ok := OutputRef(env, src)
	g.Expect(ok).To(BeTrue())
	g.Expect(ref).To(Equal(Ref{Source: "crds", Kind: KindOCI, URL: "10.0.0.1:5000/team/operator/outputs/crds", Insecure: true,
		Revision: "operator/crds@" + digest, ID: digest[len("sha256:"):], Digest: digest}))
	g.Expect(ref.Key()).To(Equal(digest), "cached by digest like any OCI source")

	origin := OutputOrigin(env, src, ref)
	g.Expect(origin.OCI).To(Equal(&v1alpha1.OCISource{Repository: ref.URL, Digest: digest, Insecure: true,
		SecretRef: &v1alpha1.LocalObjectReference{Name: "regcred"}}))
}
