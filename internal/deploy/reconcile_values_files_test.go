package deploy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// treeFiles reads the files under root as source files at the source's
// root, as a project's tree is laid out.
func treeFiles(t testing.TB, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for k, v := range operatortest.DirFiles(t, root, "_") {
		files[strings.TrimPrefix(k, "_/")] = v
	}
	return files
}

// TestValuesFilesFromTheSource: Volcano's loop installs its chart with
// the chart's values.yaml and a developer's override from elsewhere in the
// tree, then inline values; a values file the source lacks stalls the
// environment naming the entry and the path.
func TestValuesFilesFromTheSource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	files := treeFiles(t, "testdata/valuesfiles/volcano")
	operatortest.AppFiles(t, ns, files)
	env := operatortest.Env(ns, "volcano").ServiceAccount(operatortest.Deployer).PushedSource("volcano", "src").Components(v1alpha1.Component{Name: "volcano", Helm: &v1alpha1.HelmSpec{
		Chart:       v1alpha1.ChartRef{Source: "volcano", Path: "installer/helm/chart/volcano"},
		ValuesFiles: []string{"installer/helm/chart/volcano/values.yaml", "hack/values-dev.yaml"},
		Values:      &apiextensionsv1.JSON{Raw: []byte(`{"custom":{"admission_enable":false}}`)},
	}}).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
	cm := &corev1.ConfigMap{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "volcano-scheduler"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{
		"image":     "volcanosh/vc-scheduler:dev", // the override over the chart's file
		"replicas":  "1",                          // the chart's file
		"logLevel":  "5",                          // the override
		"admission": "false",                      // inline values over both
	}))

	// The override leaves the source: the environment stalls naming it.
	delete(files, "hack/values-dev.yaml")
	operatortest.AppFiles(t, ns, files)
	_ = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForStalled(t, key, "", `spec.components[0].helm.valuesFiles[1]: "hack/values-dev.yaml" does not exist`)
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
}

// TestImageValuesRegistryNameAndTag: the GPU Operator's chart names its
// image as operator.repository + "/" + operator.image + ":" +
// operator.version. With from: Registry, Name and Tag the chart renders
// the pull prefix, the image's name (with its '/') and the content tag,
// which the rewriter then recognizes as the built image and pins.
func TestImageValuesRegistryNameAndTag(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	pushWebSource(t, ns, treeFiles(t, "testdata/valuesfiles/gpu-operator"))
	env := webHelmEnv(ns, &v1alpha1.HelmSpec{
		Chart: v1alpha1.ChartRef{Source: "app", Path: "deployments/gpu-operator"},
		ImageValues: []v1alpha1.ImageValue{
			{Image: "nvidia/gpu-operator", Path: "operator.repository", From: "Registry"},
			{Image: "nvidia/gpu-operator", Path: "operator.image", From: "Name"},
			{Image: "nvidia/gpu-operator", Path: "operator.version", From: "Tag"},
		},
	})
	env.Name = "gpu-operator"
	env.Spec.Registry.PullPrefix = "localhost:5001/" + ns
	env.Spec.Components[0].Name = "operator"
	env.Spec.Components[0].Images[0].Name = "nvidia/gpu-operator"
	key := operatortest.CreateEnv(t, env)

	d := &appsv1.Deployment{}
	g.Eventually(func() error {
		return operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gpu-operator"}, d)
	}, operatortest.Timeout).Should(Succeed())
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("operator").Image("nvidia/gpu-operator")).NotTo(BeNil())
	})
	img := env.Status.Component("operator").Image("nvidia/gpu-operator")
	container := d.Spec.Template.Spec.Containers[0]
	g.Expect(container.Env).To(ContainElement(corev1.EnvVar{Name: "OPERATOR_IMAGE",
		Value: "localhost:5001/" + ns + "/nvidia/gpu-operator:" + img.ContentHash}), "what the chart rendered")
	g.Expect(container.Image).To(Equal("localhost:5001/"+ns+"/nvidia/gpu-operator@"+img.Digest), "pinned")
	env = rolledOut(t, key, "gpu-operator")
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}
