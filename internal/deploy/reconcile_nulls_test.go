package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// The nodepolicy chart renders a NodePolicy, shaped like an operator's
// cluster policy, whose default values render `spec.validator.plugin:
// null` (an object in the CRD's schema) and `spec.migManager.config.name:
// null` (a string), neither nullable.
var nodePolicyKind = schema.GroupVersionKind{Group: "nulls.devloop.dev", Version: "v1", Kind: "NodePolicy"}

// nodePolicyEnv pushes the nodepolicy chart as the source of an
// environment of ns whose component "policy" installs it with values
// (JSON; empty for none), acting as sa, and returns the environment.
func nodePolicyEnv(t *testing.T, ns, sa, values string) *v1alpha1.DevEnvironment {
	t.Helper()
	operatortest.AllowCRDs(t, ns, sa)
	operatortest.AppFiles(t, ns, operatortest.DirFiles(t, "testdata/charts/nodepolicy", "chart"))
	return operatortest.Env(ns, "policy").ServiceAccount(sa).AppSource().
		Components(builder.Component("policy", builder.Chart("chart", builder.Values(values)))).Create(t, operatortest.Admin)
}

// nodePolicySpec reads the spec of the release's NodePolicy as stored.
func nodePolicySpec(g Gomega, ns string) map[string]any {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(nodePolicyKind)
	g.Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "policy-policy"}, cr)).To(Succeed())
	spec, _, err := unstructured.NestedMap(cr.Object, "spec")
	g.Expect(err).NotTo(HaveOccurred())
	return spec
}

// reconciled requests a reconcile and waits until the operator handled
// it, so what the test reads next is that reconcile's outcome.
func reconciled(t *testing.T, env *v1alpha1.DevEnvironment) *v1alpha1.DevEnvironment {
	t.Helper()
	handled := operatortest.RequestReconcile(t, env)
	return operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(handled))
	})
}

// TestChartRenderingNullsIsReadyWithoutDrift: a chart whose templates
// render null fields installs (Helm accepts them), and the drift check
// that follows — a server-side apply dry run, which the API server
// refuses for a null the schema does not allow — reads a null as no key,
// as Helm and kubectl do: no drift, and the environment stays Ready. The
// check still sees a hand edit of the same object.
func TestChartRenderingNullsIsReadyWithoutDrift(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	env := nodePolicyEnv(t, ns, operatortest.Deployer, "")
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	spec := nodePolicySpec(g, ns)
	g.Expect(spec["validator"]).To(Equal(map[string]any{"version": "v1.0.0", "resources": map[string]any{"limits": map[string]any{"cpu": "100m"}}}))
	g.Expect(spec["migManager"]).To(Equal(map[string]any{"config": map[string]any{"default": "all-disabled"}}))

	// A reconcile of the unchanged release looks for drift: none.
	env = reconciled(t, env)
	operatortest.ExpectReadyAndCurrent(g, env)
	c := env.Status.Component("policy")
	g.Expect(c.Drift).To(BeEmpty())
	g.Expect(c.Release.Revision).To(Equal(1), "nothing to upgrade")
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// The check is not blind to the object: a hand edit is shown and put
	// back.
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(nodePolicyKind)
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "policy-policy"}, cr)).To(Succeed())
	g.Expect(unstructured.SetNestedField(cr.Object, "edited", "spec", "validator", "version")).To(Succeed())
	g.Expect(operatortest.Admin.Update(ctx, cr)).To(Succeed())
	env = reconciled(t, env)
	// Whichever reconcile saw it (one may have run before the request)
	// said so in an event, and put the field back.
	expectDriftEvent(t, ns, "nodepolicies.nulls.devloop.dev/policy-policy: spec.validator.version changed by hand")
	g.Expect(nodePolicySpec(g, ns)["validator"]).To(HaveKeyWithValue("version", "v1.0.0"))
	operatortest.ExpectReadyAndCurrent(g, env)
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// TestNullInHelmValuesRemovesTheChartDefault: `key: null` in
// spec.components[].helm.values is Helm's way to remove a chart's default
// (values files and --set alike). The API server stores the null (the
// field keeps unknown fields, and nothing in the schema prunes below it)
// when the environment is created, replaced or applied server-side, as
// `kubectl apply --server-side` does here, first without, then with the
// null; devloop hands it to Helm, and the rendered object loses the key.
// (A JSON merge patch — client-side `kubectl apply` of an edit — deletes
// it before it is stored: RFC 7386's null; docs/helm-values.md.)
func TestNullInHelmValuesRemovesTheChartDefault(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	operatortest.AllowCRDs(t, ns, operatortest.Deployer)
	operatortest.AppFiles(t, ns, operatortest.DirFiles(t, "testdata/charts/nodepolicy", "chart"))
	env := operatortest.Env(ns, "policy").ServiceAccount(operatortest.Deployer).AppSource().Components(builder.Component("policy", builder.Chart("chart", builder.Values(`{"validator":{"version":"v2.0.0"}}`)))).Obj()
	applyServerSide(t, env)
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	g.Expect(nodePolicySpec(g, ns)["validator"]).To(HaveKey("resources"), "the chart's default")

	env.Spec.Components[0].Helm.Values.Raw = []byte(`{"validator":{"version":"v2.0.0","resources":null}}`)
	applyServerSide(t, env)
	stored := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(ctx, key, stored)).To(Succeed())
	g.Expect(string(stored.Spec.Components[0].Helm.Values.Raw)).To(MatchJSON(`{"validator":{"version":"v2.0.0","resources":null}}`), "stored with its null")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("policy").Release.Revision).To(Equal(2), "upgraded")
	})
	validator := nodePolicySpec(g, ns)["validator"]
	g.Expect(validator).To(HaveKeyWithValue("version", "v2.0.0"), "the values were used")
	g.Expect(validator).NotTo(HaveKey("resources"), "the chart's default was removed")
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// applyServerSide applies env's spec as `kubectl apply --server-side`
// does, under kubectl's field manager.
func applyServerSide(t *testing.T, env *v1alpha1.DevEnvironment) {
	t.Helper()
	g := NewWithT(t)
	data, err := json.Marshal(env)
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{}
	g.Expect(json.Unmarshal(data, &u.Object)).To(Succeed())
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("DevEnvironment"))
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	g.Expect(operatortest.Admin.Patch(context.Background(), u, client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership)).To(Succeed())
}

// TestDriftCheckFailureSaysTheReleaseDeployed: when the drift check of a
// deployed release fails (here the ServiceAccount may create the release's
// NodePolicy but not patch it, which the dry run needs), the message says
// the release itself deployed before why the check failed.
func TestDriftCheckFailureSaysTheReleaseDeployed(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.UseDeployEngine(ns)
	const sa = "policy-creator"
	operatortest.CreateServiceAccount(t, ns, sa)
	operatortest.Allow(t, ns, sa,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"*"}},
		rbacv1.PolicyRule{APIGroups: []string{nodePolicyKind.Group}, Resources: []string{"nodepolicies"},
			Verbs: []string{"get", "list", "watch", "create", "delete"}})
	env := nodePolicyEnv(t, ns, sa, "")
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		c := env.Status.Component("policy")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Release).NotTo(BeNil())
		g.Expect(c.Release.Revision).To(Equal(1), "installed")
	})
	env = reconciled(t, env)
	env = operatortest.WaitForStalled(t, key, v1alpha1.ReasonDeployFailed,
		"release policy deployed (revision 1); checking drift failed: forbidden: cannot patch nodepolicies.nulls.devloop.dev")
	g.Expect(env.Status.Component("policy").Release.Status).To(Equal("deployed"))
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
}

// TestManifestsWithNullsAreReadyWithoutDrift: a manifests component reads
// `key: null` as kubectl does, as no key, in its source and in what its
// patches write: its server-side apply and the drift check's dry run are
// not refused for a null the schema does not allow, and the environment
// is Ready without drift.
func TestManifestsWithNullsAreReadyWithoutDrift(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	crd := &unstructured.Unstructured{}
	data, err := os.ReadFile("testdata/charts/nodepolicy/crds/nodepolicies.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(data, &crd.Object)).To(Succeed())
	if err := operatortest.Admin.Create(ctx, crd); !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	operatortest.AppFiles(t, ns, map[string]string{"deploy/policy.yaml": `apiVersion: nulls.devloop.dev/v1
kind: NodePolicy
metadata:
  name: applied-policy
spec:
  validator:
    version: v1.0.0
    plugin: null
  migManager:
    config: {name: null, default: all-disabled}
`})
	policy := builder.Component("policy", builder.Manifests("deploy"))
	// A patch's null (after the source's were dropped) is no key either.
	policy.Manifests.Patches = []v1alpha1.Patch{{Target: &v1alpha1.PatchTarget{Kind: "NodePolicy", Name: "applied-policy"},
		Patch: "- {op: add, path: /spec/validator/plugin, value: null}\n"}}
	env := operatortest.Env(ns, "policy").ServiceAccount(operatortest.Deployer).AppSource().Components(policy).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(nodePolicyKind)
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "applied-policy"}, cr)).To(Succeed())
	g.Expect(cr.Object["spec"]).To(Equal(map[string]any{
		"validator":  map[string]any{"version": "v1.0.0"},
		"migManager": map[string]any{"config": map[string]any{"default": "all-disabled"}},
	}))

	env = reconciled(t, env)
	operatortest.ExpectReadyAndCurrent(g, env)
	g.Expect(env.Status.Component("policy").Drift).To(BeEmpty())
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}
