package liveupdate_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// webChart is a chart of one Deployment receiving the web image through
// values (image: repository@digest) and a greeting as an env var.
var webChart = map[string]string{
	"chart/Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
	"chart/values.yaml": "image: web:latest\ngreeting: hello\n",
	"chart/templates/web.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: {{ .Values.image }}
        env:
        - {name: GREETING, value: {{ .Values.greeting | quote }}}
`,
}

// chartSource is the web binary and page with webChart.
func chartSource(binary string) map[string]string {
	files := map[string]string{"bin/web": binary, "static/index.html": "<h1>1</h1>"}
	for k, v := range webChart {
		files[k] = v
	}
	return files
}

// chartLiveEnv is WebEnv deploying webChart instead of manifests, the
// image written into its values by reference, /web live-updatable.
func chartLiveEnv(ns string) *v1alpha1.DevEnvironment {
	env := operatortest.WebEnv(ns)
	env.Spec.ServiceAccountName = operatortest.Deployer
	c := &env.Spec.Components[0]
	c.Manifests = nil
	c.Helm = builder.Component("web", builder.Chart("chart", builder.Values(`{"greeting":"hello"}`))).Helm
	c.Helm.ImageValues = []v1alpha1.ImageValue{{Image: "web", Path: "image", From: "Reference"}}
	c.Images[0].LiveUpdate = &v1alpha1.LiveUpdate{Paths: []string{"/web"}}
	return env
}

// installChartLive installs chartLiveEnv in ns from files and waits until
// it is Ready with its Deployment's template at the image's digest, and a
// pod of that template runs (web-a, under the supervisor).
func installChartLive(t *testing.T, ns string, files map[string]string) *v1alpha1.DevEnvironment {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	operatortest.AppFiles(t, ns, files)
	env := chartLiveEnv(ns)
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(t, key, func(g Gomega, cur *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, webDeploymentNow(g, ns))).To(Succeed(), "status: %+v", cur.Status)
	})
	operatortest.MarkDeploymentAvailable(t, ns, "web")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.TemplateDigest).To(Equal(ist.Digest))
	})
	image := webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image
	g.Expect(image).To(HaveSuffix("@" + env.Status.Component("web").Image("web").Digest))
	runningPod(t, ns, "web-a", image)
	return env
}

// TestChartImageLiveUpdatedInPlace (issue 33): an image a chart receives
// through helm.imageValues, changed only under liveUpdate.paths, is
// synced into the running pods with no Helm action (the release's
// revision stays), the Deployment untouched; a values change then
// upgrades the release and rolls the newest build out with it, status
// saying so.
func TestChartImageLiveUpdatedInPlace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	env := installChartLive(t, ns, chartSource("binary v1"))
	key := client.ObjectKeyFromObject(env)
	v1 := *env.Status.Component("web").Image("web")
	revision := env.Status.Component("web").Release.Revision
	before := webDeploymentNow(g, ns)
	g.Expect(before.Spec.Template.Labels).To(HaveKeyWithValue(v1alpha1.LabelLiveUpdate, v1alpha1.LiveUpdateSupervised),
		"the chart's Deployment runs under the supervisor")

	// Only the binary changes: synced in place, no Helm action.
	operatortest.AppFiles(t, ns, chartSource("binary v2"))
	operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.Digest).NotTo(Equal(v1.Digest))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive), "reason: %s", ist.UpdateReason)
		g.Expect(ist.TemplateDigest).To(Equal(v1.Digest), "the release still pins the template's digest")
		g.Expect(podLiveDigest(g, ns, "web-a")).To(Equal(ist.Digest))
	})
	v2 := *env.Status.Component("web").Image("web")
	g.Expect(env.Status.Component("web").Release.Revision).To(Equal(revision), "no Helm upgrade")
	g.Expect(operatortest.LiveSyncs.Of(ns, "web-a", v2.Digest)[0].Files).To(Equal(map[string]string{"/web": "755:binary v2"}))
	after := webDeploymentNow(g, ns)
	g.Expect(after.Generation).To(Equal(before.Generation), "no new ReplicaSet: the template is unchanged")
	g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReady).Message).To(ContainSubstring("live update serving: web/web"))

	// A values change: the release is upgraded, and the newest build
	// rolls out with it (not the template's older digest).
	g.Expect(operatortest.Admin.Get(ctx, key, env)).To(Succeed())
	patched := env.DeepCopy()
	patched.Spec.Components[0].Helm.Values = &apiextensionsv1.JSON{Raw: []byte(`{"greeting":"hi"}`)}
	g.Expect(operatortest.Admin.Patch(ctx, patched, client.MergeFrom(env))).To(Succeed())
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("web").Release.Revision).To(Equal(revision + 1))
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.Digest).To(Equal(v2.Digest))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateRollout))
		g.Expect(ist.UpdateReason).To(ContainSubstring("is upgraded (chart, values or another image changed)"))
		g.Expect(ist.TemplateDigest).To(Equal(v2.Digest))
		g.Expect(ist.LiveDigest).To(BeEmpty())
		d := webDeploymentNow(g, ns)
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix("@" + v2.Digest))
		g.Expect(d.Spec.Template.Spec.Containers[0].Env[0].Value).To(Equal("hi"))
	})
	operatortest.MarkDeploymentAvailable(t, ns, "web")
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	g.Expect(env.Status.Component("web").Release.Revision).To(Equal(revision+1), "one upgrade, not a second one back")
	g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReady).Message).NotTo(ContainSubstring("live update"))
}
