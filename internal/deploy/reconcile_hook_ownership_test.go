package deploy_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// hookChartFiles is a chart whose only objects are pre-install and
// pre-upgrade hooks, a ConfigMap and a ClusterRole, each named by a value
// (left out when the value is empty), with Helm's default delete policy:
// before-hook-creation, which deletes an existing object of the hook's
// name before creating the hook.
var hookChartFiles = map[string]string{
	"chart/Chart.yaml": "apiVersion: v2\nname: hooks\nversion: 0.1.0\n",
	"chart/templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-config}
data: {version: {{ .Values.version | quote }}}
`,
	"chart/templates/hooks.yaml": `{{- if .Values.configMap }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Values.configMap }}
  annotations: {helm.sh/hook: "pre-install,pre-upgrade"}
data: {from: hook}
{{- end }}
{{- if .Values.clusterRole }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .Values.clusterRole }}
  annotations: {helm.sh/hook: "pre-install,pre-upgrade"}
rules: []
{{- end }}
`,
}

// hookValues sets the chart's values of the environment's only component.
func hookValues(values string) func(*v1alpha1.DevEnvironment) {
	return func(env *v1alpha1.DevEnvironment) {
		env.Spec.Components[0].Helm.Values = &apiextensionsv1.JSON{Raw: []byte(values)}
	}
}

// TestHookNamedLikeAnotherObjectIsRefused is issue 31.6: team-a's
// environment owns a ClusterRole; team-b's (the operator acting under the
// chart's RBAC, as team-b's ServiceAccount, which may manage ClusterRoles
// and ConfigMaps) installs a chart whose hooks are named like that
// ClusterRole, and like a ConfigMap of team-b's namespace that devloop did
// not create. Helm would delete each to create the hook; devloop refuses
// the hook first: the environment Stalls naming the object's owner, and
// both objects stay as they were (same UID, same content). A hook the
// environment created itself runs again on the next upgrade.
func TestHookNamedLikeAnotherObjectIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	// team-a: a ClusterRole of its own.
	nsA := operatortest.Namespace(t)
	role := "devloop-hooked-" + nsA
	envA := operatortest.DeployDirEnv(t, nsA, map[string]string{"deploy/role.yaml": operatortest.ClusterRoleManifest(role)})
	operatortest.GrantClusterRoles(t, nsA)
	keyA := operatortest.CreateEnv(t, envA)
	operatortest.WaitForEnv(t, keyA, operatortest.ExpectReadyAndCurrent)
	owned := &rbacv1.ClusterRole{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: role}, owned)).To(Succeed())
	g.Expect(owned.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationOwner, keyA.String()))

	// team-b: a ConfigMap made by hand, and a chart.
	nsB := operatortest.Namespace(t)
	envB := operatortest.DeployDirEnv(t, nsB, hookChartFiles)
	operatortest.GrantClusterRoles(t, nsB)
	handMade := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "settings"}, Data: map[string]string{"made": "by hand"}}
	g.Expect(operatortest.Admin.Create(ctx, handMade)).To(Succeed())
	envB.Spec.Components[0].Manifests = nil
	envB.Spec.Components[0].Helm = &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: builder.AppSource, Path: "chart"}}
	hookValues(`{"configMap": "settings"}`)(envB)
	keyB := operatortest.CreateEnv(t, envB)

	operatortest.WaitForStalled(t, keyB, v1alpha1.ReasonDeployFailed,
		"helm hook settings would replace configmaps/settings, which belongs to no DevEnvironment (created outside devloop)")
	got := &corev1.ConfigMap{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(handMade), got)).To(Succeed())
	g.Expect(got.UID).To(Equal(handMade.UID), "the hand-made ConfigMap was not replaced")
	g.Expect(got.Data).To(Equal(map[string]string{"made": "by hand"}))
	g.Expect(operatortest.ReleaseSecrets(t, nsB, "init")).To(BeZero(), "the install stopped before storing anything")

	operatortest.EditSpec(t, keyB, hookValues(`{"clusterRole": "`+role+`"}`))
	operatortest.WaitForStalled(t, keyB, v1alpha1.ReasonDeployFailed,
		"helm hook "+role+" would replace clusterroles.rbac.authorization.k8s.io/"+role+", which belongs to DevEnvironment "+keyA.String())
	after := &rbacv1.ClusterRole{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: role}, after)).To(Succeed())
	g.Expect(after.UID).To(Equal(owned.UID), "team-a's ClusterRole was not replaced")
	g.Expect(after.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationOwner, keyA.String()))
	operatortest.WaitForEnv(t, keyA, operatortest.ExpectReadyAndCurrent)

	// A hook of its own name: installed, and run again by an upgrade
	// (Helm replaces it, as the environment's).
	operatortest.EditSpec(t, keyB, hookValues(`{"configMap": "own-hook"}`))
	envB = operatortest.WaitForEnv(t, keyB, operatortest.ExpectReadyAndCurrent)
	hook := &corev1.ConfigMap{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "own-hook"}, hook)).To(Succeed())
	g.Expect(hook.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationOwner, keyB.String()))
	revision := envB.Status.Component("init").Release.Revision
	operatortest.EditSpec(t, keyB, hookValues(`{"configMap": "own-hook", "version": "2"}`))
	operatortest.WaitForEnv(t, keyB, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("init").Release.Revision).To(BeNumerically(">", revision))
	})
	again := &corev1.ConfigMap{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "own-hook"}, again)).To(Succeed())
	g.Expect(again.UID).NotTo(Equal(hook.UID), "the upgrade ran the hook again (before-hook-creation replaced it)")
}
