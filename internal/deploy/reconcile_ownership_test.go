package deploy_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// gadgetCRD is a CustomResourceDefinition manifest.
const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.ownership.devloop.dev}
spec:
  group: ownership.devloop.dev
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// TestExistingCRDIsNotTakenOver: a manifest naming a CRD that exists
// already (installed by hand, cluster-wide) stops its component naming
// the owner; deleting the environment leaves the CRD. With adopt: true
// the environment takes it over, and then deletes it with itself.
func TestExistingCRDIsNotTakenOver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	env := operatortest.DeployDirEnv(t, ns, map[string]string{"deploy/crd.yaml": gadgetCRD})
	operatortest.AllowCRDs(t, ns, "deployer")
	crd := &unstructured.Unstructured{}
	g.Expect(yamlInto(gadgetCRD, &crd.Object)).To(Succeed())
	g.Expect(operatortest.Admin.Create(ctx, crd)).To(Succeed())
	t.Cleanup(func() { _ = operatortest.Admin.Delete(context.Background(), crd) })

	key := operatortest.CreateEnv(t, env)
	operatortest.WaitForStalled(t, key, "", "gadgets.ownership.devloop.dev already exists and belongs to no DevEnvironment", "adopt: true")
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(crd.GroupVersionKind())
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: crd.GetName()}, got)).To(Succeed())
	g.Expect(got.GetLabels()).NotTo(HaveKey(v1alpha1.LabelEnvironment), "not relabelled")

	g.Expect(operatortest.Admin.Delete(ctx, env)).To(Succeed())
	operatortest.ExpectEnvGone(t, ns, env.Name)
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: crd.GetName()}, got)).To(Succeed(), "the CRD survives the environment")

	// Adopted on purpose: the environment's from then on.
	adopting := operatortest.DeployDirSpec(ns, "adopts")
	adopting.Spec.Components[0].Manifests.Adopt = true
	g.Expect(operatortest.Admin.Create(ctx, adopting)).To(Succeed())
	operatortest.WaitForEnv(t, client.ObjectKeyFromObject(adopting), operatortest.ExpectReadyAndCurrent)
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: crd.GetName()}, got)).To(Succeed())
	g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.AnnotationOwner, ns+"/adopts"))
	g.Expect(operatortest.Admin.Delete(ctx, adopting)).To(Succeed())
	operatortest.ExpectGone(t, got)
}

// TestSameNamedEnvironmentsKeepTheirOwnObjects: environments named alike
// in two namespaces apply the same cluster-scoped object; the second is
// refused naming the first, and deleting it leaves the first's object.
func TestSameNamedEnvironmentsKeepTheirOwnObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	role := "devloop-shared-" + operatortest.Namespace(t)
	files := map[string]string{"deploy/role.yaml": operatortest.ClusterRoleManifest(role)}
	var keys []client.ObjectKey
	for range 2 {
		ns := operatortest.Namespace(t)
		env := operatortest.DeployDirEnv(t, ns, files)
		operatortest.GrantClusterRoles(t, ns)
		keys = append(keys, client.ObjectKeyFromObject(env))
		g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
		if len(keys) == 1 {
			operatortest.WaitForEnv(t, keys[0], operatortest.ExpectReadyAndCurrent)
		}
	}
	operatortest.WaitForStalled(t, keys[1], "", "belongs to DevEnvironment "+keys[0].Namespace+"/"+keys[0].Name)

	g.Expect(operatortest.Admin.Delete(ctx, &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: keys[1].Namespace, Name: keys[1].Name}})).To(Succeed())
	operatortest.ExpectEnvGone(t, keys[1].Namespace, keys[1].Name)
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: role}, &rbacv1.ClusterRole{})).To(Succeed(), "the other environment's object stays")

	g.Expect(operatortest.Admin.Delete(ctx, &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: keys[0].Namespace, Name: keys[0].Name}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(operatortest.Admin.Get(ctx, client.ObjectKey{Name: role}, &rbacv1.ClusterRole{}))
	}, operatortest.Timeout).Should(BeTrue(), "its owner's deletion removes it")
}

// yamlInto decodes a YAML manifest into obj.
func yamlInto(doc string, obj any) error { return yaml.Unmarshal([]byte(doc), obj) }

// TestTwoEnvironmentsClaimingOneRelease: the second environment naming a
// release the first installed is Stalled "owned by" and upgrades nothing;
// deleting it leaves the first's release installed.
func TestTwoEnvironmentsClaimingOneRelease(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	files := operatortest.ChartFiles(t, "upgradehook", "chart")
	first := operatortest.DeployDirEnv(t, ns, files)
	helmComponent := func(env *v1alpha1.DevEnvironment) {
		env.Spec.Components[0].Manifests = nil
		env.Spec.Components[0].Helm = &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: "app", Path: "chart"}, ReleaseName: "shared"}
	}
	helmComponent(first)
	g.Expect(operatortest.Admin.Create(ctx, first)).To(Succeed())
	first = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(first), operatortest.ExpectReadyAndCurrent)
	g.Expect(first.Status.Component("init").Release.Revision).To(Equal(1))

	second := operatortest.DeployDirSpec(ns, "second")
	helmComponent(second)
	g.Expect(operatortest.Admin.Create(ctx, second)).To(Succeed())
	operatortest.WaitForStalled(t, client.ObjectKeyFromObject(second), v1alpha1.ReasonDeployFailed, "helm release "+ns+"/shared is owned by another DevEnvironment (uid "+string(first.UID)+")")
	g.Expect(operatortest.ReleaseSecrets(t, ns, "shared")).To(Equal(1), "no revision written by the second")

	g.Expect(operatortest.Admin.Delete(ctx, second)).To(Succeed())
	operatortest.ExpectEnvGone(t, ns, "second")
	g.Expect(operatortest.ReleaseSecrets(t, ns, "shared")).To(Equal(1), "the first's release stays installed")
	operatortest.WaitForEnv(t, client.ObjectKeyFromObject(first), operatortest.ExpectReadyAndCurrent)
}

// TestEachEnvironmentItsOwnFieldManager: two environments in two
// namespaces apply their manifests under one field manager each, named
// after the environment; neither's objects name the other's or a shared
// one.
func TestEachEnvironmentItsOwnFieldManager(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	files := map[string]string{"deploy/config.yaml": operatortest.ConfigMapManifest("settings")}
	var namespaces []string
	for range 2 {
		ns := operatortest.Namespace(t)
		env := operatortest.DeployDirEnv(t, ns, files)
		g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
		operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), operatortest.ExpectReadyAndCurrent)
		namespaces = append(namespaces, ns)
	}
	for _, ns := range namespaces {
		cm := &corev1.ConfigMap{}
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm)).To(Succeed())
		var appliers []string
		for _, e := range cm.ManagedFields {
			if e.Operation == metav1.ManagedFieldsOperationApply {
				appliers = append(appliers, e.Manager)
			}
		}
		g.Expect(appliers).To(Equal([]string{deploy.FieldManagerFor(ns + "/jobs")}), ns)
		g.Expect(appliers[0]).To(Equal("devloop/" + ns + "/jobs"))
	}
}

// TestPendingReleaseOfSomeoneElseIsLeftAlone: a release left
// pending-upgrade by someone else's helm upgrade, started less than the
// action timeout ago, is not unlocked under it: the component is
// Deploying, saying so and until when, the environment Reconciling, and
// the release's storage is untouched.
func TestPendingReleaseOfSomeoneElseIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	env := operatortest.DeployDirEnv(t, ns, operatortest.ChartFiles(t, "upgradehook", "chart"))
	env.Spec.Components[0].Manifests = nil
	env.Spec.Components[0].Helm = &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: "app", Path: "chart"}, ReleaseName: "busy"}
	key := operatortest.CreateEnv(t, env)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)

	// Someone's helm upgrade, started 30s ago, is running: it wrote
	// revision 2 pending-upgrade, copying revision 1's labels as helm
	// upgrade does.
	cfg, err := helm.NewConfigFactory(operatortest.AdminConfig, "")(ns)
	g.Expect(err).NotTo(HaveOccurred())
	last, err := helm.LastRelease(cfg, "busy")
	g.Expect(err).NotTo(HaveOccurred())
	pending := *last
	pending.Info = &release.Info{Status: release.StatusPendingUpgrade, LastDeployed: helmtime.Time{Time: time.Now().Add(-30 * time.Second)}}
	pending.Version = last.Version + 1
	g.Expect(cfg.Releases.Create(&pending)).To(Succeed())

	operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		st := env.Status.Component("init")
		g.Expect(st.Phase).To(Equal(v1alpha1.PhaseDeploying))
		g.Expect(st.Message).To(ContainSubstring("helm release " + ns + "/busy revision 2 is pending-upgrade since"))
		g.Expect(st.Message).To(ContainSubstring("another helm action may be running; devloop unlocks it if it is still pending-upgrade at"))
		reconciling := operatortest.EnvCondition(env, v1alpha1.ConditionReconciling)
		g.Expect(reconciling).NotTo(BeNil())
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil())
	})
	now, err := helm.LastRelease(cfg, "busy")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(now.Version).To(Equal(2))
	g.Expect(now.Info.Status).To(Equal(release.StatusPendingUpgrade), "left to its action")
	g.Expect(operatortest.ReleaseSecrets(t, ns, "busy")).To(Equal(2))
}
