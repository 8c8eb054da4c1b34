package build_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestImageNamedLikeAChartsImageBuilds: charts name images "org/name"
// (volcanosh/vc-scheduler); such an image with a run step and a build
// cache gets its builder Job and cache claim, every label valid, and is
// not Stalled.
func TestImageNamedLikeAChartsImageBuilds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := apiNamespace(t)
	env := amd64APIEnv(ns)
	const image = "volcanosh/vc-scheduler"
	env.Spec.Components[0].Images[0].Name = image
	key := operatortest.CreateEnv(t, env)

	g.Eventually(func(g Gomega) {
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: build.CacheClaimName(env.Name, image)}, pvc)).To(Succeed())
		for k, v := range pvc.Labels {
			g.Expect(validation.IsValidLabelValue(v)).To(BeEmpty(), "label %s", k)
		}
		g.Expect(pvc.Labels).To(HaveKeyWithValue(v1alpha1.LabelImage, v1alpha1.LabelValue(image)))
		jobs := operatortest.BuilderJobs(g, ns)
		g.Expect(jobs).To(HaveKey("linux-amd64"))
		job := jobs["linux-amd64"]
		for k, v := range job.Labels {
			g.Expect(validation.IsValidLabelValue(v)).To(BeEmpty(), "label %s", k)
		}
	}, operatortest.Timeout).Should(Succeed())
	env = operatortest.WaitForPhase(t, key, v1alpha1.PhaseBuilding)
	g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil())
}
