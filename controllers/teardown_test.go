package controllers_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestNeverCreatedIsNotDeleted: a ServiceAccount forbidden from creating a
// ClusterRole stalls the environment naming it; deleting the environment
// then finishes — what was never created is not removed — and removes
// what was.
func TestNeverCreatedIsNotDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	role := "devloop-test-" + ns
	env := operatortest.DeployDirEnv(t, ns, map[string]string{
		"deploy/config.yaml": operatortest.ConfigMapManifest("settings"),
		"deploy/role.yaml":   operatortest.ClusterRoleManifest(role),
	})
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring("forbidden: cannot patch clusterroles"))
		g.Expect(env.Status.Component("init").Inventory).To(ConsistOf(
			v1alpha1.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "settings"}), "only what was applied")
	})

	g.Expect(operatortest.Admin.Delete(ctx, env)).To(Succeed())
	operatortest.ExpectGone(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}})
	operatortest.ExpectEnvGone(t, ns, env.Name)
}

// TestBlockedDeletionIsShownThenAbandoned: a ClusterRole the environment
// created while it could, and may no longer delete, blocks the deletion
// with a reason in status and an event; the abandon annotation lets it
// finish, with a Warning naming what is left.
func TestBlockedDeletionIsShownThenAbandoned(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	role := "devloop-test-" + ns
	env := operatortest.DeployDirEnv(t, ns, map[string]string{"deploy/role.yaml": operatortest.ClusterRoleManifest(role)})
	// For a while, the deployer may manage ClusterRoles.
	grant, binding := operatortest.GrantClusterRoles(t, ns)
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: role}, &rbacv1.ClusterRole{})).To(Succeed())

	g.Expect(operatortest.Admin.Delete(ctx, binding)).To(Succeed())
	g.Expect(operatortest.Admin.Delete(ctx, env)).To(Succeed())
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonDeletionBlocked))
		g.Expect(ready.Message).To(ContainSubstring("clusterroles"))
		g.Expect(env.Status.DeletionFailures).To(BeNumerically(">=", 1))
	})
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonDeletionBlocked, "cannot remove what the environment deployed")

	patch := client.MergeFrom(env.DeepCopy())
	env.Annotations = map[string]string{v1alpha1.AbandonOnDeleteAnnotation: "true"}
	g.Expect(operatortest.Admin.Patch(ctx, env, patch)).To(Succeed())
	operatortest.ExpectEnvGone(t, ns, env.Name)
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonDeletionAbandoned, role)
	// Left, as the event says.
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: role}, &rbacv1.ClusterRole{})).To(Succeed())
	g.Expect(operatortest.Admin.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}})).To(Succeed())
	g.Expect(operatortest.Admin.Delete(ctx, grant)).To(Succeed())
}

// TestSwitchAndRenameLeaveNothingBehind: a component switched from
// manifests to a chart removes its objects; a renamed release uninstalls
// the old one; switched back to manifests, the release goes.
func TestSwitchAndRenameLeaveNothingBehind(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	files := operatortest.ChartFiles(t, "upgradehook", "chart")
	files["deploy/config.yaml"] = operatortest.ConfigMapManifest("from-manifests")
	env := operatortest.DeployDirEnv(t, ns, files)
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "from-manifests"}, &corev1.ConfigMap{})).To(Succeed())

	edit := func(change func(c *v1alpha1.Component)) {
		t.Helper()
		g.Eventually(func() error {
			cur := &v1alpha1.DevEnvironment{}
			if err := operatortest.Admin.Get(ctx, key, cur); err != nil {
				return err
			}
			change(&cur.Spec.Components[0])
			return operatortest.Admin.Update(ctx, cur)
		}, operatortest.Timeout).Should(Succeed())
	}
	configMap := func(name string) error {
		return operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
	}

	// manifests -> chart
	edit(func(c *v1alpha1.Component) {
		c.Manifests = nil
		c.Helm = &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: "app", Path: "chart"}, ReleaseName: "first"}
	})
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("init").Inventory).To(BeEmpty())
	})
	g.Expect(apierrors.IsNotFound(configMap("from-manifests"))).To(BeTrue(), "the manifests' objects are removed")
	g.Expect(configMap("first-config")).To(Succeed())

	// release renamed
	edit(func(c *v1alpha1.Component) { c.Helm.ReleaseName = "second" })
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("init").Release.Name).To(Equal("second"))
	})
	g.Expect(apierrors.IsNotFound(configMap("first-config"))).To(BeTrue(), "the old release is uninstalled")
	g.Expect(operatortest.ReleaseSecrets(t, ns, "first")).To(BeZero())
	g.Expect(configMap("second-config")).To(Succeed())

	// chart -> manifests
	edit(func(c *v1alpha1.Component) {
		c.Helm = nil
		c.Manifests = &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"deploy"}}
	})
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("init").Release).To(BeNil())
	})
	g.Expect(apierrors.IsNotFound(configMap("second-config"))).To(BeTrue(), "the release is uninstalled")
	g.Expect(operatortest.ReleaseSecrets(t, ns, "second")).To(BeZero())
	g.Expect(configMap("from-manifests")).To(Succeed())
}
