package deploy_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// gpuPoliciesCRD is a custom resource shaped like GPU Operator's
// ClusterPolicy, namespaced so the tests' deployer may apply it.
const gpuPoliciesCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gpupolicies.health.devloop.dev
spec:
  group: health.devloop.dev
  names: {kind: GPUPolicy, plural: gpupolicies, singular: gpupolicy}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

// gpuPolicy is the custom resource the component deploys.
const gpuPolicy = `apiVersion: health.devloop.dev/v1
kind: GPUPolicy
metadata:
  name: cluster-policy
spec:
  validator: {version: dev}
`

// notReadyPolicy writes what GPU Operator writes of its ClusterPolicy on
// a node without GPUs: Ready False with no message (kstatus says only
// InProgress), the cause in its Error condition. The test plays the
// operator, once the component applied the policy.
func notReadyPolicy(t *testing.T, ns string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		p := &unstructured.Unstructured{}
		p.SetGroupVersionKind(schema.GroupVersionKind{Group: "health.devloop.dev", Version: "v1", Kind: "GPUPolicy"})
		g.Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cluster-policy"}, p)).To(Succeed())
		g.Expect(unstructured.SetNestedField(p.Object, "notReady", "status", "state")).To(Succeed())
		g.Expect(unstructured.SetNestedSlice(p.Object, []any{
			map[string]any{"type": "Ready", "status": "False", "reason": "Error", "message": ""},
			map[string]any{"type": "Error", "status": "True", "reason": "OperandNotReady", "message": "ClusterPolicy is not ready, states not ready: [state-driver]"},
		}, "status", "conditions")).To(Succeed())
		g.Expect(operatortest.Admin.Status().Update(context.Background(), p)).To(Succeed())
	}, operatortest.Timeout, 100*time.Millisecond).Should(Succeed())
}

// ownReason is the part of the policy's line that only its own
// conditions tell.
const ownReason = "OperandNotReady: ClusterPolicy is not ready, states not ready: [state-driver]"

// createGPUPoliciesCRD installs the CRD once for the package's tests (as
// the cluster's admin would: the component under test only uses it) and
// waits until it is established.
func createGPUPoliciesCRD(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	// Unstructured: the tests' scheme does not know CRDs.
	crd := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal([]byte(gpuPoliciesCRD), &crd.Object)).To(Succeed())
	if err := operatortest.Admin.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", "Established"), HaveKeyWithValue("status", "True"))))
	}, operatortest.Timeout, 100*time.Millisecond).Should(Succeed())
}

// policyFiles are the source's files: the web Deployment and the policy
// under deploy/ (manifests) and as a chart under chart/ (Helm).
func policyFiles() map[string]string {
	return map[string]string{
		"deploy/deployment.yaml":          operatortest.WebDeployment,
		"deploy/policy.yaml":              gpuPolicy,
		"chart/Chart.yaml":                "apiVersion: v2\nname: gpu\nversion: 0.1.0\n",
		"chart/templates/deployment.yaml": operatortest.WebDeployment,
		"chart/templates/policy.yaml":     gpuPolicy,
	}
}

// policyEnvs are the environment of each kind of component, deploying
// the web Deployment and the policy.
var policyEnvs = map[string]func(ns string) *v1alpha1.DevEnvironment{
	"manifests": func(ns string) *v1alpha1.DevEnvironment { return webManifestsEnv(ns, "deploy") },
	"helm": func(ns string) *v1alpha1.DevEnvironment {
		return webHelmEnv(ns, &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: builder.AppSource, Path: "chart"}})
	},
}

// A custom resource that never turns Ready holds the component, and so
// the environment, un-Ready, and the component's message carries the
// object's own reason, not only kstatus's "InProgress". Told to ignore
// it (spec.components[].health), the environment turns Ready, still
// deploying the object and saying that it is not waited for. Both for a
// manifests and a Helm component, each in a namespace of its own.
func TestHealthWaitNamesTheObjectsOwnReasonAndIgnoreLetsItBeReady(t *testing.T) {
	createGPUPoliciesCRD(t)
	for kind, envOf := range policyEnvs {
		t.Run(kind, func(t *testing.T) {
			g := NewWithT(t)
			ns := operatortest.DeployNamespace(t)
			pushWebSource(t, ns, policyFiles())
			key := operatortest.CreateEnv(t, envOf(ns))

			// The operator under development finds the policy cannot be
			// met, then the Deployment rolls out (so the component cannot
			// be Ready before the policy says it is not): the policy alone
			// holds Ready, and the message says why in its own words.
			notReadyPolicy(t, ns)
			operatortest.MarkDeploymentAvailable(t, ns, "web")
			env := operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
				g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
				c := env.Status.Component("web")
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Phase).To(Equal(v1alpha1.PhaseDeploying), "message: %s", c.Message)
				g.Expect(c.Message).To(ContainSubstring("gpupolicies.health.devloop.dev/cluster-policy: InProgress: " + ownReason))
				g.Expect(c.Message).NotTo(ContainSubstring("deployments.apps/web"), "the Deployment rolled out")
			})
			ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(string(ready.Status)).To(Equal("False"))
			operatortest.ExpectKstatus(t, env, status.InProgressStatus)

			// Not waited for: Ready, the policy still deployed as it was.
			operatortest.EditSpec(t, key, func(env *v1alpha1.DevEnvironment) {
				env.Spec.Components[0].Health = &v1alpha1.HealthSpec{Ignore: []v1alpha1.HealthIgnore{{Kind: "GPUPolicy"}}}
			})
			env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
				operatortest.ExpectReadyAndCurrent(g, env)
				c := env.Status.Component("web")
				g.Expect(c.Phase).To(Equal(v1alpha1.PhaseReady))
				g.Expect(c.Message).To(ContainSubstring("1 object not waited for (spec.components[0].health), not Current: gpupolicies.health.devloop.dev/cluster-policy"))
			})
			operatortest.ExpectKstatus(t, env, status.CurrentStatus)
			policy := &unstructured.Unstructured{}
			policy.SetGroupVersionKind(schema.GroupVersionKind{Group: "health.devloop.dev", Version: "v1", Kind: "GPUPolicy"})
			g.Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cluster-policy"}, policy)).To(Succeed())
			state, _, _ := unstructured.NestedString(policy.Object, "status", "state")
			g.Expect(state).To(Equal("notReady"))

			// Waiting again (the ignore entry removed): un-Ready again.
			operatortest.EditSpec(t, key, func(env *v1alpha1.DevEnvironment) { env.Spec.Components[0].Health = nil })
			env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
				g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
				g.Expect(env.Status.Component("web").Phase).To(Equal(v1alpha1.PhaseDeploying))
			})
			operatortest.ExpectKstatus(t, env, status.InProgressStatus)
		})
	}
}
