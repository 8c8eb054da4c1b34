package source_test

import (
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestEnvironmentWaitsForTheFirstPush (issue 42): right after `kubectl
// apply`, an environment whose OCI source has not been pushed yet — its
// repository does not exist, or it exists without the tag — is waiting
// for the push, not stalled: Ready False with reason Waiting,
// Reconciling True, kstatus InProgress, a message that names the field
// and the repository. Once the tag is pushed (with no reconcile request:
// a push from anywhere) it turns Ready by itself.
func TestEnvironmentWaitsForTheFirstPush(t *testing.T) {
	for _, tc := range []struct{ name, repository string }{
		{"no-repository", "src"},
		{"no-tag", "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := operatortest.DeployNamespace(t)
			// The repository of "other" exists, at another tag only.
			operatortest.Registry.PushSource(t, ns+"/other", "old", map[string]string{"deploy/config.yaml": appConfig("0")})
			repo := operatortest.Registry.Host + "/" + ns + "/" + tc.repository
			env := operatortest.Env(ns, tc.name).ServiceAccount(operatortest.Deployer).PushedSource(builder.AppSource, tc.repository).
				Components(builder.Component("config", builder.Manifests("deploy"))).Create(t, operatortest.Admin)
			key := client.ObjectKeyFromObject(env)

			env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
				g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
				ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
				g.Expect(ready).NotTo(BeNil())
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonWaiting), "conditions: %s", operatortest.ConditionsSummary(env))
				g.Expect(ready.Message).To(Equal("spec.sources[0] (app): waiting for the first push to " + repo + ":dev (kubectl devloop push)"))
				reconciling := operatortest.EnvCondition(env, v1alpha1.ConditionReconciling)
				g.Expect(reconciling).NotTo(BeNil())
				g.Expect(reconciling.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil())
			})
			operatortest.ExpectKstatus(t, env, status.InProgressStatus)

			// The push, and nothing else: no annotation, no edit.
			pushed := operatortest.Registry.PushSource(t, ns+"/"+tc.repository, "dev", map[string]string{"deploy/config.yaml": appConfig(tc.name)})
			env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
				operatortest.ExpectReadyAndCurrent(g, env)
				g.Expect(env.Status.Source(builder.AppSource).Digest).To(Equal(pushed.String()))
			})
			g.Expect(configVersion(t, ns)).To(Equal(tc.name))
			operatortest.ExpectKstatus(t, env, status.CurrentStatus)
		})
	}
}
