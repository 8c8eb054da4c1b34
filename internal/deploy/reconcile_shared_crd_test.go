package deploy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// crdTemplateChart is a chart whose CRD is one of its templates (Volcano's
// chart ships its CRDs so), beside a ConfigMap of the release's own.
func crdTemplateChart(crdName string) map[string]string {
	group := strings.SplitN(crdName, ".", 2)[1]
	plural := strings.SplitN(crdName, ".", 2)[0]
	return map[string]string{
		"chart/Chart.yaml": "apiVersion: v2\nname: queues\nversion: 0.1.0\n",
		"chart/templates/crd.yaml": fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %s}
spec:
  group: %s
  names: {kind: Queue, plural: %s, singular: queue}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, crdName, group, plural),
		"chart/templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: scheduler-config}\ndata: {period: 1s}\n",
	}
}

// TestASecondReleaseOfAChartWithCRDTemplates: two environments in two
// namespaces install one chart whose CRD is a template (Volcano's). The
// second is refused by Helm (the CRD is the first release's): it stops
// naming the object, whose release it is and the way out (a patch that
// leaves the object out), not Helm's ownership dump, and touches nothing
// of the first's. With that patch (`$patch: delete`, as kustomize's) it
// installs the rest of the chart and turns Ready; the first's CRD stays
// the first's, and deleting the second leaves it.
func TestASecondReleaseOfAChartWithCRDTemplates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	nsA := operatortest.Namespace(t)
	crdName := "queues." + strings.ReplaceAll(nsA, "-", "") + ".devloop.dev"
	files := crdTemplateChart(crdName)
	helmEnv := func(ns string) *v1alpha1.DevEnvironment {
		env := operatortest.DeployDirEnv(t, ns, files)
		operatortest.AllowCRDs(t, ns, operatortest.Deployer)
		env.Spec.Components[0].Manifests = nil
		env.Spec.Components[0].Helm = &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: "app", Path: "chart"}, ReleaseName: "volcano"}
		return env
	}

	first := helmEnv(nsA)
	keyA := operatortest.CreateEnv(t, first)
	operatortest.WaitForEnv(t, keyA, operatortest.ExpectReadyAndCurrent)
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed())
	g.Expect(crd.GetAnnotations()).To(HaveKeyWithValue("meta.helm.sh/release-namespace", nsA))
	version := crd.GetResourceVersion()

	nsB := operatortest.Namespace(t)
	second := helmEnv(nsB)
	keyB := operatortest.CreateEnv(t, second)
	stalled := operatortest.WaitForStalled(t, keyB, v1alpha1.ReasonDeployFailed,
		"CustomResourceDefinition "+crdName, "release volcano in namespace "+nsA,
		"spec.components[0].helm.patches", "$patch: delete")
	msg := stalled.Status.Component("init").Message
	t.Logf("the second environment reads: %s", msg)
	g.Expect(msg).NotTo(ContainSubstring("annotation validation error"), "Helm's ownership check is not the message")
	g.Expect(len(msg)).To(BeNumerically("<=", 512), msg)
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "scheduler-config"}, &corev1.ConfigMap{})).
		NotTo(Succeed(), "the refused install created nothing")

	// The way out the message names.
	g.Expect(operatortest.Admin.Get(ctx, keyB, second)).To(Succeed())
	second.Spec.Components[0].Helm.Patches = []v1alpha1.Patch{{
		Target: &v1alpha1.PatchTarget{Kind: "CustomResourceDefinition"},
		Patch:  "$patch: delete",
	}}
	g.Expect(operatortest.Admin.Update(ctx, second)).To(Succeed())
	operatortest.WaitForEnv(t, keyB, operatortest.ExpectReadyAndCurrent)
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "scheduler-config"}, &corev1.ConfigMap{})).To(Succeed())
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed())
	g.Expect(crd.GetAnnotations()).To(HaveKeyWithValue("meta.helm.sh/release-namespace", nsA), "still the first's")
	g.Expect(crd.GetResourceVersion()).To(Equal(version), "untouched by the second")

	g.Expect(operatortest.Admin.Delete(ctx, second)).To(Succeed())
	operatortest.ExpectEnvGone(t, nsB, second.Name)
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed(), "the first's CRD survives the second's deletion")
	operatortest.WaitForEnv(t, keyA, operatortest.ExpectReadyAndCurrent)
}
