package operatortest

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// AsDeployer makes env (WebEnv, APIEnv, or any built one) act as the
// ServiceAccount Deployer that DeployNamespace or CreateDeployer made: the
// line every build and deploy test added after its environment.
func AsDeployer(env *v1alpha1.DevEnvironment) *v1alpha1.DevEnvironment {
	env.Spec.ServiceAccountName = Deployer
	return env
}

// CreateEnv creates env as the admin and returns its key, for WaitForEnv.
func CreateEnv(t testing.TB, env *v1alpha1.DevEnvironment) client.ObjectKey {
	t.Helper()
	NewWithT(t).Expect(Admin.Create(context.Background(), env)).To(Succeed())
	return client.ObjectKeyFromObject(env)
}

// WaitForStalled waits until the environment is Stalled for reason (any,
// if empty) with a message containing every one of texts, and returns it.
func WaitForStalled(t testing.TB, key client.ObjectKey, reason string, texts ...string) *v1alpha1.DevEnvironment {
	t.Helper()
	return WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil(), "Stalled; conditions %s", ConditionsSummary(env))
		if reason != "" {
			g.Expect(stalled.Reason).To(Equal(reason))
		}
		for _, text := range texts {
			g.Expect(stalled.Message).To(ContainSubstring(text))
		}
	})
}

// WaitForPhase waits until the environment's only component is in phase,
// and returns it.
func WaitForPhase(t testing.TB, key client.ObjectKey, phase v1alpha1.ComponentPhase) *v1alpha1.DevEnvironment {
	t.Helper()
	return WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Components).To(HaveLen(1))
		g.Expect(env.Status.Components[0].Phase).To(Equal(phase))
	})
}

// EditSpec applies edit to the environment as it is now and updates it,
// again on a conflict with the operator's own writes.
func EditSpec(t testing.TB, key client.ObjectKey, edit func(*v1alpha1.DevEnvironment)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := &v1alpha1.DevEnvironment{}
		if err := Admin.Get(context.Background(), key, cur); err != nil {
			return err
		}
		edit(cur)
		return Admin.Update(context.Background(), cur)
	}, Timeout).Should(Succeed())
}
