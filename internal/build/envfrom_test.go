package build

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// TestRunEnvFromReachesTheBuildContainer: run.envFrom is the build
// container's envFrom, in a builder Job and in a warm builder (whose
// builds inherit the container's environment); the containers holding
// credentials do not get it, and a changed envFrom replaces the warm pod.
func TestRunEnvFromReachesTheBuildContainer(t *testing.T) {
	g := NewWithT(t)
	req := warmRequest()
	req.Run.EnvFrom = []v1alpha1.EnvFromSource{
		{Kind: "ConfigMap", Name: "build-settings"},
		{Kind: "Secret", Name: "build-tokens", Prefix: "CI_", Optional: true},
	}
	want := []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "build-settings"}, Optional: ptr.To(false)}},
		{Prefix: "CI_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "build-tokens"}, Optional: ptr.To(true)}},
	}

	job, err := BuilderJob(req)
	g.Expect(err).NotTo(HaveOccurred())
	build := job.Spec.Template.Spec.InitContainers[1]
	g.Expect(build.Name).To(Equal(ContainerBuild))
	g.Expect(build.EnvFrom).To(Equal(want))
	g.Expect(job.Spec.Template.Spec.InitContainers[0].EnvFrom).To(BeEmpty(), "the fetch container keeps only its own environment")
	g.Expect(job.Spec.Template.Spec.Containers[0].EnvFrom).To(BeEmpty(), "the pushing container keeps only its own environment")

	pod, err := WarmPod(req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pod.Spec.Containers[0].Name).To(Equal(ContainerWarm))
	g.Expect(pod.Spec.Containers[0].EnvFrom).To(Equal(want))
	g.Expect(pod.Spec.Containers[1].EnvFrom).To(BeEmpty())
	without, err := WarmPod(warmRequest())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pod.Annotations[AnnotationSpecHash]).NotTo(Equal(without.Annotations[AnnotationSpecHash]), "a changed envFrom replaces the warm pod")
}
