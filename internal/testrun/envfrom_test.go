package testrun

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// TestJobEnvFrom: a suite's envFrom is the test container's envFrom, in
// order; its env entries stay in env, where they win over it.
func TestJobEnvFrom(t *testing.T) {
	g := NewWithT(t)
	suite := &v1alpha1.TestSuite{Name: "e2e", Command: []string{"make", "e2e"},
		Env: []v1alpha1.EnvVar{{Name: "E2E_FOCUS", Value: "Job"}},
		EnvFrom: []v1alpha1.EnvFromSource{
			{Kind: "ConfigMap", Name: "e2e-settings", Prefix: "E2E_"},
			{Kind: "Secret", Name: "e2e-tokens", Optional: true},
		}}
	job, err := Job(JobRequest{Name: "x", Image: "busybox", Suite: suite})
	g.Expect(err).NotTo(HaveOccurred())
	c := job.Spec.Template.Spec.Containers[0]
	g.Expect(c.Name).To(Equal(ContainerTest))
	g.Expect(c.EnvFrom).To(Equal([]corev1.EnvFromSource{
		{Prefix: "E2E_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "e2e-settings"}, Optional: ptr.To(false)}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "e2e-tokens"}, Optional: ptr.To(true)}},
	}))
	g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "E2E_FOCUS", Value: "Job"}))

	job, err = Job(JobRequest{Name: "x", Image: "busybox", Suite: &v1alpha1.TestSuite{Name: "s", Command: []string{"true"}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.Spec.Template.Spec.Containers[0].EnvFrom).To(BeNil(), "no envFrom, none in the pod")
}
