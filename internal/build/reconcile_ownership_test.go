package build_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestBuildersOfAnotherOwnerAreLeftAlone (issue 17, crossing 9): a build
// cache claim or a builder Job with the name this environment would use,
// but which it does not control, is neither used nor replaced nor deleted;
// the environment stalls naming it. (Warm builder pods:
// TestWarmBuilderOfAnotherOwnerIsLeftAlone.)
func TestBuildersOfAnotherOwnerAreLeftAlone(t *testing.T) {
	t.Run("cache claim", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		ns, _ := apiNamespace(t)
		env := operatortest.APIEnv(ns)
		squatter := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: build.CacheClaimName(env, "api")},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}
		g.Expect(operatortest.Admin.Create(ctx, squatter)).To(Succeed())
		key := operatortest.CreateEnv(t, operatortest.AsDeployer(env))
		env = operatortest.WaitForStalled(t, key, "", "build cache claim "+squatter.Name+" exists and belongs to another owner")
		g.Expect(operatortest.BuilderJobs(g, ns)).To(BeEmpty(), "no build mounts another owner's claim")
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(squatter), pvc)).To(Succeed())
		g.Expect(pvc.UID).To(Equal(squatter.UID))
		operatortest.ExpectKstatus(t, env, status.FailedStatus)
	})

	t.Run("builder job", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		ns, _ := apiNamespace(t)
		env := amd64APIEnv(ns)
		key := operatortest.CreateEnv(t, env)
		job := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")
		// Someone takes the Job over: it is no longer the environment's.
		job.OwnerReferences = nil
		g.Expect(operatortest.Admin.Update(ctx, &job)).To(Succeed())
		operatortest.RequestReconcile(t, env)
		env = operatortest.WaitForStalled(t, key, "", "builder Job "+job.Name+" exists and belongs to another owner")
		kept := &batchv1.Job{}
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(&job), kept)).To(Succeed())
		g.Expect(kept.UID).To(Equal(job.UID))
		g.Expect(kept.DeletionTimestamp).To(BeNil())
		operatortest.ExpectKstatus(t, env, status.FailedStatus)
	})
}

// TestBuilderNamesDoNotCollide (issue 17, crossing 9): environment "a"
// with image "b-c" and environment "a-b" with image "c" in one namespace
// each get their own warm builder and cache claim; before, both were
// named "a-b-c-…" and the second environment stalled on the first's.
func TestBuilderNamesDoNotCollide(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := apiNamespace(t)
	newEnv := func(envName, image string) *v1alpha1.DevEnvironment {
		env := warmAPIEnv(ns)
		env.Name = envName
		env.Spec.Components[0].Images[0].Name = image
		operatortest.CreateEnv(t, env)
		return env
	}
	first, second := newEnv("a", "b-c"), newEnv("a-b", "c")
	for _, env := range []*v1alpha1.DevEnvironment{first, second} {
		image := env.Spec.Components[0].Images[0].Name
		g.Eventually(func(g Gomega) {
			pod := &corev1.Pod{}
			g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: build.WarmPodName(env.Name, image, "linux/amd64")}, pod)).To(Succeed())
			g.Expect(metav1.GetControllerOf(pod).Name).To(Equal(env.Name))
			pvc := &corev1.PersistentVolumeClaim{}
			g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: build.CacheClaimName(env, image)}, pvc)).To(Succeed())
			g.Expect(metav1.GetControllerOf(pvc).Name).To(Equal(env.Name))
			g.Expect(pod.Labels).To(HaveKeyWithValue(v1alpha1.LabelEnvironment, env.Name))
		}, operatortest.Timeout).Should(Succeed())
		cur := operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil())
			g.Expect(env.Status.Components).To(HaveLen(1))
			g.Expect(env.Status.Components[0].Phase).To(Equal(v1alpha1.PhaseBuilding))
		})
		operatortest.ExpectKstatus(t, cur, status.InProgressStatus)
	}
	g.Expect(build.WarmPodName("a", "b-c", "linux/amd64")).NotTo(Equal(build.WarmPodName("a-b", "c", "linux/amd64")))
}

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
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: build.CacheClaimName(env, image)}, pvc)).To(Succeed())
		for k, v := range pvc.Labels {
			g.Expect(validation.IsValidLabelValue(v)).To(BeEmpty(), "label %s", k)
		}
		g.Expect(pvc.Labels).To(HaveKeyWithValue(v1alpha1.LabelRole, v1alpha1.RoleBuildCache))
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
