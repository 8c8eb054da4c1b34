package deploy_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

func TestManifestsDeployPinnedImageUntilAvailable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	files, _ := pushWebSource(t, ns, webDeployment, map[string]string{
		"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {a: b}\n"})
	env := webManifestsEnv(ns, "deploy")
	env.Spec.Registry.PullPrefix = "localhost:5001/" + ns
	key := operatortest.CreateEnv(t, env)

	env = waitForWebDeploying(t, key, func(g Gomega, env *v1alpha1.DevEnvironment, c *v1alpha1.ComponentStatus) {
		g.Expect(c.Message).To(ContainSubstring("deployments.apps/web"))
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReconciling)).NotTo(BeNil())
	})
	img := env.Status.Component("web").Image("web")
	d := &appsv1.Deployment{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("localhost:5001/" + ns + "/web@" + img.Digest))
	g.Expect(d.Labels).To(HaveKeyWithValue(v1alpha1.LabelEnvironment, "web"))
	g.Expect(d.Labels).To(HaveKeyWithValue(v1alpha1.LabelComponent, "web"))
	g.Expect(env.Status.Component("web").Inventory).To(ConsistOf(
		v1alpha1.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"},
		v1alpha1.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "extra"},
	))
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	env = rolledOut(t, key, "web", func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("web").Phase).To(Equal(v1alpha1.PhaseReady))
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// An object leaving the set is pruned.
	delete(files, "deploy/config.yaml")
	operatortest.AppFiles(t, ns, files)
	_ = operatortest.RequestReconcile(t, env)
	operatortest.ExpectGone(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "extra"}})
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("web").Inventory).To(HaveLen(1))
	})
	// The new source may have built a new digest: rolled out again.
	env = rolledOut(t, key, "web", func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("web").Inventory).To(HaveLen(1))
	})

	// Deleting the environment prunes what it applied.
	g.Expect(operatortest.Admin.Delete(ctx, env)).To(Succeed())
	operatortest.ExpectGone(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	operatortest.ExpectEnvGone(t, ns, "web")
	// The last state before deletion was Current.
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

func TestHelmReleaseWithImageValuesThenUninstall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	_, srcDigest := pushWebSource(t, ns, operatortest.ChartFiles(t, "web", "chart"))
	key := operatortest.CreateEnv(t, webHelmEnv(ns, &v1alpha1.HelmSpec{
		Chart:       v1alpha1.ChartRef{Source: "app", Path: "chart"},
		ReleaseName: "site",
		ImageValues: []v1alpha1.ImageValue{{Image: "web", Path: "version", From: "Revision"}},
	}))

	env := waitForWebDeploying(t, key, expectInstalled)
	g.Expect(*env.Status.Component("web").Release).To(Equal(v1alpha1.ReleaseStatus{Name: "site", Namespace: ns, Revision: 1, Status: "deployed",
		Workloads: []v1alpha1.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "site"}}}), "the release's workloads, for kubectl devloop logs")
	img := env.Status.Component("web").Image("web")
	cm := &corev1.ConfigMap{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site-version"}, cm)).To(Succeed())
	g.Expect(cm.Data["version"]).To(Equal("rev-" + srcDigest.Hex[:12]))
	d := &appsv1.Deployment{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site"}, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(operatortest.Registry.Host + "/" + ns + "/web@" + img.Digest))
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	env = rolledOut(t, key, "site")
	// Nothing changed: the release is not upgraded again.
	g.Expect(env.Status.Component("web").Release.Revision).To(Equal(1))
	g.Expect(env.Status.Component("web").Drift).To(BeEmpty())
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
	// The release's objects carry the environment's labels, as applied
	// manifests do.
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site"}, d)).To(Succeed())
	g.Expect(d.Labels).To(HaveKeyWithValue(v1alpha1.LabelEnvironment, "web"))

	// A hand edit of an object of the release is shown and put back
	// without a new revision (Helm itself would see nothing to upgrade).
	cm.Data["version"] = "edited"
	g.Expect(operatortest.Admin.Update(ctx, cm)).To(Succeed())
	handled := operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(handled))
	})
	expectDriftInStatus(g, env, "configmaps/site-version: data.version changed by hand")
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site-version"}, cm)).To(Succeed())
	g.Expect(cm.Data["version"]).To(Equal("rev-" + srcDigest.Hex[:12]))
	g.Expect(env.Status.Component("web").Release.Revision).To(Equal(1))
	expectDriftEvent(t, ns, "configmaps/site-version: data.version changed by hand")
	operatortest.ExpectReadyAndCurrent(g, env)
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	g.Expect(operatortest.Admin.Delete(ctx, env)).To(Succeed())
	operatortest.ExpectEnvGone(t, ns, "web")
	operatortest.ExpectGone(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site"}})
	operatortest.ExpectGone(t, cm)
	secrets := &corev1.SecretList{}
	g.Expect(operatortest.Admin.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": "site"})).To(Succeed())
	g.Expect(secrets.Items).To(BeEmpty(), "release storage left after uninstall")
	// The last state before deletion was Current.
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

func TestDeployWithoutRightsStallsNamingVerbAndResource(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.UseDeployEngine(ns)
	operatortest.CreateServiceAccount(t, ns, "nobody")
	operatortest.AppFiles(t, ns, map[string]string{
		"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n"})
	env := operatortest.Env(ns, "denied").ServiceAccount("nobody").AppSource().Components(builder.Component("config", builder.Manifests("deploy"))).Create(t, operatortest.Admin)

	env = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonDeployFailed))
		g.Expect(stalled.Message).To(ContainSubstring("cannot patch configmaps in namespace " + ns))
		g.Expect(stalled.Message).To(ContainSubstring("system:serviceaccount:" + ns + ":nobody"))
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	})
	g.Expect(env.Status.Component("config").Phase).To(Equal(v1alpha1.PhaseFailed))
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
}

func TestDeployWithoutServiceAccountStalls(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.UseDeployEngine(ns)
	operatortest.AppFiles(t, ns, map[string]string{"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"})
	env := operatortest.Env(ns, "anonymous").AppSource().Components(builder.Component("config", builder.Manifests("deploy"))).Create(t, operatortest.Admin)
	env = operatortest.WaitForStalled(t, client.ObjectKeyFromObject(env), v1alpha1.ReasonNoServiceAccount, "spec.serviceAccountName: no ServiceAccount to deploy as")
	operatortest.ExpectKstatus(t, env, status.FailedStatus)

	// Nothing was deployed, so nothing wedges the deletion.
	g.Expect(operatortest.Admin.Delete(context.Background(), env.DeepCopy())).To(Succeed())
	operatortest.ExpectEnvGone(t, ns, "anonymous")
}

func TestDroppedComponentIsPruned(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	operatortest.AppFiles(t, ns, map[string]string{
		"a/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"b/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
	})
	env := operatortest.Env(ns, "pair").ServiceAccount(operatortest.Deployer).AppSource().
		Components(builder.Component("a", builder.Manifests("a")), builder.Component("b", builder.Manifests("b"), builder.DependsOn("a"))).Obj()
	key := operatortest.CreateEnv(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.ComponentsReady).To(Equal("2/2"))
	})
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b"}, &corev1.ConfigMap{})).To(Succeed())

	patch := client.MergeFrom(env.DeepCopy())
	env.Spec.Components = env.Spec.Components[:1]
	g.Expect(operatortest.Admin.Patch(ctx, env, patch)).To(Succeed())
	operatortest.ExpectGone(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}})
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Components).To(HaveLen(1))
	})
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &corev1.ConfigMap{})).To(Succeed())
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

func TestFailingReleaseStallsWithHelmError(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	operatortest.AppFiles(t, ns, operatortest.ChartFiles(t, "web", "chart"))
	env := operatortest.Env(ns, "broken").ServiceAccount(operatortest.Deployer).AppSource().Components(builder.Component("site", builder.Chart("chart", builder.Values(`{"broken": true}`)))).Create(t, operatortest.Admin)
	env = operatortest.WaitForStalled(t, client.ObjectKeyFromObject(env), v1alpha1.ReasonDeployFailed, "failed 3 times in a row", "Not_A_Valid_Name")
	g.Expect(env.Status.Component("site").Phase).To(Equal(v1alpha1.PhaseFailed))
	// The count lives in status, so a restarted operator (the engine keeps
	// no state of its own) stalls it again rather than retrying from zero.
	rel := env.Status.Component("site").Release
	g.Expect(rel).NotTo(BeNil())
	g.Expect(rel.Failures).To(Equal(3))
	g.Expect(rel.FailedDigest).To(HavePrefix("sha256:"))
	operatortest.ExpectKstatus(t, env, status.FailedStatus)

	// Any later reconcile (here, an unrelated annotation) leaves the
	// stalled release alone: the same chart and values would fail again.
	key := client.ObjectKeyFromObject(env)
	patch := client.MergeFrom(env.DeepCopy())
	env.Annotations = map[string]string{"example.com/note": "looked at"}
	g.Expect(operatortest.Admin.Patch(ctx, env, patch)).To(Succeed())
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring("not retried until the chart, values or images change"))
		g.Expect(stalled.Message).To(ContainSubstring("Not_A_Valid_Name"), "the cause stays")
		g.Expect(env.Status.Component("site").Release.Failures).To(Equal(3), "the count matches what the docs say")
	})
	// A reconcile request allows one more attempt, which fails again.
	_ = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(env.Annotations[v1alpha1.ReconcileRequestAnnotation]))
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring("failed 3 times in a row"))
		g.Expect(stalled.Message).NotTo(ContainSubstring("not retried"), "it was tried")
		g.Expect(env.Status.Component("site").Release.Failures).To(Equal(3))
	})
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
}

func TestHandEditsAreShownAndCorrected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	pushWebSource(t, ns, webDeployment, map[string]string{
		"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: declared}\n"})
	env := webManifestsEnv(ns, "deploy")
	key := operatortest.CreateEnv(t, env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("web")).NotTo(BeNil())
		g.Expect(env.Status.Component("web").Inventory).To(HaveLen(2))
	})
	env = rolledOut(t, key, "web", func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("web").AppliedDigest).NotTo(BeEmpty())
	})
	// A reconcile with nothing edited finds no drift.
	handled := operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(handled))
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	g.Expect(env.Status.Component("web").Drift).To(BeEmpty())

	// A hand edit of a value of the ConfigMap is shown and put back; the
	// environment stays Ready, so status keeps it until the next look.
	cm := &corev1.ConfigMap{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm)).To(Succeed())
	cm.Data["mode"] = "edited"
	g.Expect(operatortest.Admin.Update(ctx, cm)).To(Succeed())
	handled = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(handled))
	})
	expectDriftInStatus(g, env, "configmaps/settings: data.mode changed by hand")
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("mode", "declared"))
	operatortest.ExpectReadyAndCurrent(g, env)
	expectDriftEvent(t, ns, "configmaps/settings: data.mode changed by hand")

	// Scaling the Deployment by hand is undone; the event names it (the
	// status line lasts only until the rollout's next look).
	d := &appsv1.Deployment{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
	d.Spec.Replicas = ptr.To(int32(3))
	g.Expect(operatortest.Admin.Update(ctx, d)).To(Succeed())
	_ = operatortest.RequestReconcile(t, env)
	expectDriftEvent(t, ns, "deployments.apps/web: spec.replicas changed by hand")
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))

	// Once rolled out again, the next look finds nothing to correct.
	operatortest.MarkDeploymentAvailable(t, ns, "web")
	handled = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(handled))
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("web").Drift).To(BeEmpty())
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// expectDriftEvent waits for a DriftCorrected Warning event in ns whose
// note contains line.
// expectDriftInStatus checks component web's drift line as of the
// reconcile that corrected it: status keeps it only until the next look,
// which on a busy machine (a requeue or a watch event queued beside the
// requested reconcile) may already have come and found nothing; the
// DriftCorrected event (expectDriftEvent, which every caller checks too)
// is the lasting record. A line other than line is always wrong.
func expectDriftInStatus(g Gomega, env *v1alpha1.DevEnvironment, line string) {
	g.Expect(env.Status.Component("web").Drift).To(Or(Equal([]string{line}), BeEmpty()))
}

func expectDriftEvent(t *testing.T, ns, line string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(operatortest.Admin.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range events.Items {
			if e.Reason == v1alpha1.ReasonDriftCorrected && e.Type == corev1.EventTypeWarning {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(line)))
	}, operatortest.Timeout).Should(Succeed())
}
