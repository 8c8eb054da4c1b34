package liveupdate_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// migrateHook is a pre-upgrade hook Job of webChart that Helm waits for:
// an upgrade stays in flight (outside the reconcile) until the test ends
// the Job, as the vcsim chart's hook keeps one going on a real cluster.
const migrateHook = `apiVersion: batch/v1
kind: Job
metadata:
  name: web-migrate
  annotations:
    helm.sh/hook: pre-upgrade
    helm.sh/hook-delete-policy: before-hook-creation
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: busybox:1.36
        args: [migrate]
`

// TestChartUpgradeInFlightKeepsTheNewestBuilds is the e2e defect of issue
// 33 (the chart case saw revision 3 where one upgrade was due): a values
// change upgrades a release whose image serves a live update in place,
// pinning the newest build; while that upgrade waits for its hook, a
// reconcile works from the status as it was before the upgrade (what a
// reconcile that read the environment from a lagging cache, or after a
// failed status write, sees and writes back: the image serving live,
// templates at the older digest). It must not take the action in flight
// for a stale one and, once the action ends, upgrade the release again
// back to the older digest: one upgrade, revision 2, pinning the newest
// build, status saying so.
func TestChartUpgradeInFlightKeepsTheNewestBuilds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	source := func(binary string) map[string]string {
		files := chartSource(binary)
		files["chart/templates/migrate.yaml"] = migrateHook
		return files
	}
	env := installChartLive(t, ns, source("binary v1"))
	key := client.ObjectKeyFromObject(env)
	v1 := *env.Status.Component("web").Image("web")

	// A binary-only change: served in place, no Helm action.
	operatortest.AppFiles(t, ns, source("binary v2"))
	operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.ServesLive()).To(BeTrue(), "image status: %+v", ist)
		g.Expect(podLiveDigest(g, ns, "web-a")).To(Equal(ist.Digest))
	})
	g.Expect(env.Status.Component("web").Release.Revision).To(Equal(1))
	serving := *env.Status.Component("web").Image("web")

	// A values change: an upgrade pinning v2, in flight while its hook runs.
	patched := env.DeepCopy()
	patched.Spec.Components[0].Helm.Values = &apiextensionsv1.JSON{Raw: []byte(`{"greeting":"hi"}`)}
	g.Expect(operatortest.Admin.Patch(ctx, patched, client.MergeFrom(env))).To(Succeed())
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateRollout))
		g.Expect(ist.TemplateDigest).To(Equal(serving.Digest))
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-migrate"}, &batchv1.Job{})).To(Succeed(), "the hook runs")
	})

	// Status as a reconcile from before the upgrade writes it back.
	stale := env.DeepCopy()
	*stale.Status.Component("web").Image("web") = serving
	g.Expect(operatortest.Admin.Status().Patch(ctx, stale, client.MergeFrom(env))).To(Succeed())
	// The next reconciles find the action still in flight.
	operatortest.RequestReconcile(t, stale)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(env.Annotations[v1alpha1.ReconcileRequestAnnotation]))
	})

	operatortest.EndJob(t, ns, "web-migrate", true)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("web").Release).NotTo(BeNil())
		g.Expect(env.Status.Component("web").Release.Revision).To(BeNumerically(">=", 2))
		d := webDeploymentNow(g, ns)
		g.Expect(d.Spec.Template.Spec.Containers[0].Env[0].Value).To(Equal("hi"))
	})
	operatortest.MarkDeploymentAvailable(t, ns, "web")
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	rel := env.Status.Component("web").Release
	ist := env.Status.Component("web").Image("web")
	t.Logf("release revision %d; image %s: templates %s, live %q (%s)", rel.Revision, ist.Digest, ist.TemplateDigest, ist.LiveDigest, ist.UpdateReason)
	g.Expect(rel.Revision).To(Equal(2), "one upgrade: none back to the older digest")
	g.Expect(ist.TemplateDigest).To(Equal(serving.Digest), "the release pins the newest build")
	g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateRollout))
	g.Expect(ist.LiveDigest).To(BeEmpty())
	image := webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image
	g.Expect(image).To(HaveSuffix("@"+serving.Digest), "not v1's %s", v1.Digest)
}
