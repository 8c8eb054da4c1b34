package testrun_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestTestPodsGetATokenOnlyWhenAsked: test code is the author's, so its
// pod mounts no ServiceAccount token unless the suite asks. Two
// environments in two namespaces: one suite asks, the other does not,
// and the API server sees exactly that in each Job's pod template.
func TestTestPodsGetATokenOnlyWhenAsked(t *testing.T) {
	for _, asks := range []bool{false, true} {
		g := NewWithT(t)
		env := operatortest.ReadyTestsEnv(t, builder.Suite("unit").Token(asks))
		ns := env.Namespace
		operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
		operatortest.ExpectRun(t, env, "unit", 1, v1alpha1.ResultRunning)

		pod := operatortest.WaitForJob(t, ns, "tests-unit-1").Spec.Template.Spec
		g.Expect(pod.ServiceAccountName).To(Equal(operatortest.Runner))
		g.Expect(pod.AutomountServiceAccountToken).NotTo(BeNil(), "said explicitly, never left to the ServiceAccount's default")
		g.Expect(*pod.AutomountServiceAccountToken).To(Equal(asks), "serviceAccountToken: %v", asks)
		for _, v := range pod.Volumes {
			g.Expect(v.Projected == nil || asks).To(BeTrue(), "no projected token volume %q unless asked", v.Name)
		}
	}
}
