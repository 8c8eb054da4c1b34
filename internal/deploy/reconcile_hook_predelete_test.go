package deploy_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// preDeleteChartFiles is a chart with a ConfigMap of its own and a
// pre-delete hook, a ConfigMap named .Values.hook in namespace
// .Values.namespace, with Helm's default delete policy
// (before-hook-creation: an existing object of that name is deleted
// before the hook is created).
var preDeleteChartFiles = map[string]string{
	"chart/Chart.yaml": "apiVersion: v2\nname: predelete\nversion: 0.1.0\n",
	"chart/templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-config}
data: {a: b}
`,
	"chart/templates/hook.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Values.hook }}
  namespace: {{ .Values.namespace }}
  annotations: {helm.sh/hook: pre-delete}
data: {from: hook}
`,
}

// preDeleteEnv is team-b's environment in nsB: the chart above, its
// pre-delete hook named hook in namespace ns.
func preDeleteEnv(t *testing.T, nsB, ns, hook string) client.ObjectKey {
	t.Helper()
	env := operatortest.DeployDirEnv(t, nsB, preDeleteChartFiles)
	env.Spec.Components[0].Manifests = nil
	env.Spec.Components[0].Helm = &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: builder.AppSource, Path: "chart"}}
	hookValues(`{"hook": "` + hook + `", "namespace": "` + ns + `"}`)(env)
	return operatortest.CreateEnv(t, env)
}

// ownedConfigMap deploys team-a's environment in nsA owning ConfigMap
// name, and returns it as deployed.
func ownedConfigMap(t *testing.T, nsA, name string) (client.ObjectKey, *corev1.ConfigMap) {
	t.Helper()
	envA := operatortest.DeployDirEnv(t, nsA, map[string]string{"deploy/config.yaml": operatortest.ConfigMapManifest(name)})
	keyA := operatortest.CreateEnv(t, envA)
	operatortest.WaitForEnv(t, keyA, operatortest.ExpectReadyAndCurrent)
	cm := &corev1.ConfigMap{}
	NewWithT(t).Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: nsA, Name: name}, cm)).To(Succeed())
	NewWithT(t).Expect(cm.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationOwner, keyA.String()))
	return keyA, cm
}

// expectUntouched: team-a's ConfigMap is the one it deployed.
func expectUntouched(t *testing.T, want *corev1.ConfigMap) {
	t.Helper()
	got := &corev1.ConfigMap{}
	NewWithT(t).Expect(operatortest.Admin.Get(context.Background(), client.ObjectKeyFromObject(want), got)).To(Succeed())
	NewWithT(t).Expect(got.UID).To(Equal(want.UID), "team-a's ConfigMap was not replaced by team-b's hook")
	NewWithT(t).Expect(got.Data).To(Equal(map[string]string{"a": "b"}))
}

// TestPreDeleteHookNamedLikeAnotherEnvironmentsObjectIsRefused: team-b's
// chart has a pre-delete hook named like a ConfigMap in team-a's
// namespace, which team-b's ServiceAccount may read, create and delete.
// Team-a deploys that ConfigMap after team-b's install (which had
// nothing to replace then). Deleting team-b's environment would run the
// hook, and Helm would delete team-a's ConfigMap to create it: the
// uninstall is refused instead (DeletionBlocked, naming the owner), and
// team-a's ConfigMap stays. Abandoning the deletion leaves it too.
func TestPreDeleteHookNamedLikeAnotherEnvironmentsObjectIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	nsA, nsB := operatortest.Namespace(t), operatortest.Namespace(t)
	operatortest.CreateDeployer(t, nsA, operatortest.Deployer)
	grantIn(t, nsA, nsB, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "delete"}})
	keyB := preDeleteEnv(t, nsB, nsA, "settings")
	operatortest.WaitForEnv(t, keyB, operatortest.ExpectReadyAndCurrent)

	keyA, owned := ownedConfigMap(t, nsA, "settings")

	envB := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(ctx, keyB, envB)).To(Succeed())
	g.Expect(operatortest.Admin.Delete(ctx, envB)).To(Succeed())
	operatortest.WaitForEnv(t, keyB, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonDeletionBlocked), "conditions: %s", operatortest.ConditionsSummary(env))
		g.Expect(ready.Message).To(ContainSubstring("helm hook settings would replace configmaps/settings"))
		g.Expect(ready.Message).To(ContainSubstring("DevEnvironment " + keyA.String()))
	})
	expectUntouched(t, owned)

	g.Expect(operatortest.Admin.Get(ctx, keyB, envB)).To(Succeed())
	patched := envB.DeepCopy()
	patched.Annotations = map[string]string{v1alpha1.AbandonOnDeleteAnnotation: "true"}
	g.Expect(operatortest.Admin.Patch(ctx, patched, client.MergeFrom(envB))).To(Succeed())
	operatortest.ExpectEnvGone(t, keyB.Namespace, keyB.Name)
	expectUntouched(t, owned)
	operatortest.ExpectKstatus(t, operatortest.WaitForEnv(t, keyA, operatortest.ExpectReadyAndCurrent), status.CurrentStatus)
}

// TestHookTheServiceAccountCannotReadIsRefused: team-b's ServiceAccount
// may create and delete ConfigMaps in team-a's namespace but not read
// them, so devloop cannot tell whose the object standing where team-b's
// pre-delete hook goes is. Helm needs no read to delete it: the install
// is refused (Stalled, naming what cannot be read), and deleting
// team-b's environment leaves team-a's ConfigMap.
func TestHookTheServiceAccountCannotReadIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	nsA, nsB := operatortest.Namespace(t), operatortest.Namespace(t)
	_, owned := ownedConfigMap(t, nsA, "settings")
	grantIn(t, nsA, nsB, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "delete"}})
	keyB := preDeleteEnv(t, nsB, nsA, "settings")

	stalled := operatortest.WaitForStalled(t, keyB, v1alpha1.ReasonDeployFailed, "helm hook settings", "configmaps/settings", "may not read")
	operatortest.ExpectKstatus(t, stalled, status.FailedStatus)
	expectUntouched(t, owned)

	envB := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(ctx, keyB, envB)).To(Succeed())
	g.Expect(operatortest.Admin.Delete(ctx, envB)).To(Succeed())
	operatortest.ExpectEnvGone(t, keyB.Namespace, keyB.Name)
	expectUntouched(t, owned)
}

// grantIn gives the Deployer of saNS rules in namespace ns.
func grantIn(t *testing.T, ns, saNS string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	g := NewWithT(t)
	name := "grant-" + saNS
	g.Expect(operatortest.Admin.Create(context.Background(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules})).To(Succeed())
	g.Expect(operatortest.Admin.Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: operatortest.Deployer}}})).To(Succeed())
}
