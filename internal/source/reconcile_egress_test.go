package source_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// Crossing 6 of issue 17: a source URL on a link-local address (the cloud
// metadata endpoint) is refused by the operator's egress policy and the
// environment is Stalled naming the field and the rule; nothing is dialled.
func TestEgressRefusalStallsNamingTheSource(t *testing.T) {
	ns := operatortest.DeployNamespace(t)
	for name, src := range map[string]v1alpha1.Source{
		"git": {Name: "app", Git: &v1alpha1.GitSource{URL: "https://169.254.169.254/latest/meta-data.git", Ref: &v1alpha1.GitRef{Branch: "main"}}},
		"oci": {Name: "app", OCI: &v1alpha1.OCISource{Repository: "169.254.169.254/team/src", Tag: "dev"}},
	} {
		env := operatortest.Env(ns, "metadata-"+name).ServiceAccount(operatortest.Deployer).Source(src).Components(builder.Component("config", builder.Manifests("deploy"))).Create(t, operatortest.Admin)
		operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
			stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
			g.Expect(stalled).NotTo(BeNil(), "conditions: %s", operatortest.ConditionsSummary(env))
			g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonSourceFailed))
			g.Expect(stalled.Message).To(ContainSubstring("spec.sources[0]." + name))
			g.Expect(stalled.Message).To(ContainSubstring("egress policy refuses 169.254.169.254 (link-local)"))
		})
	}
}
