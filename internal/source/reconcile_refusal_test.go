package source_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// Issue 32, item 2, through the operator: a source refused for its
// content is not downloaded again on later reconciles (each one resolves
// the tag again, and is seen to be handled), until the tag names new
// content, which is fetched and deployed at once.
func TestRefusedSourceIsNotFetchedAgainUntilItsDigestChanges(t *testing.T) {
	g := NewWithT(t)
	host, blobGets, push := source.CountingRegistry(t)
	push("team/app", "dev", map[string]string{"/etc/cron.d/x": "evil"})
	ns := operatortest.DeployNamespace(t)
	env := operatortest.Env(ns, "refused").ServiceAccount(operatortest.Deployer).
		Source(builder.OCISource(builder.AppSource, host+"/team/app", "dev")).
		Components(builder.Component("config", builder.Manifests("deploy"))).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)
	stalled := func(g Gomega, env *v1alpha1.DevEnvironment) {
		c := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(c).NotTo(BeNil(), "conditions: %s", operatortest.ConditionsSummary(env))
		g.Expect(c.Message).To(ContainSubstring("spec.sources[0].oci"))
		g.Expect(c.Message).To(ContainSubstring("unsafe content"))
	}
	operatortest.WaitForEnv(t, key, stalled)
	downloads := blobGets()
	g.Expect(downloads).NotTo(BeZero())

	for range 3 {
		value := operatortest.RequestReconcile(t, env)
		operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(env.Status.LastHandledReconcileAt).To(Equal(value))
			stalled(g, env)
		})
	}
	t.Logf("blob downloads: %d after the refusal, %d after three more reconciles", downloads, blobGets())
	g.Expect(blobGets()).To(Equal(downloads), "the refused source was downloaded again")

	push("team/app", "dev", map[string]string{"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fixed}\n"})
	operatortest.RequestReconcile(t, env)
	operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	g.Expect(blobGets()).To(BeNumerically(">", downloads), "the new content was not downloaded")
}
