package liveupdate_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/supervisor"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// liveEnv is WebEnv deploying a Deployment of the web image, with /web
// live-updatable.
func liveEnv(ns string) *v1alpha1.DevEnvironment {
	env := operatortest.WebEnv(ns)
	env.Spec.ServiceAccountName = operatortest.Deployer
	env.Spec.Components[0].Manifests.Paths = []string{"deploy"}
	env.Spec.Components[0].Images[0].LiveUpdate = &v1alpha1.LiveUpdate{Paths: []string{"/web"}}
	return env
}

func liveSource(binary, page string) map[string]string {
	return map[string]string{"bin/web": binary, "static/index.html": page, "deploy/web.yaml": operatortest.WebDeployment}
}

// deployLiveEnv creates liveEnv at binary v1 in a new namespace and
// waits for its Deployment, which it marks available.
func deployLiveEnv(t *testing.T) (string, *v1alpha1.DevEnvironment) {
	t.Helper()
	ns := operatortest.DeployNamespace(t)
	operatortest.AppFiles(t, ns, liveSource("binary v1", "<h1>1</h1>"))
	env := liveEnv(ns)
	NewWithT(t).Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())
	operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, cur *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})).To(Succeed(), "status: %+v", cur.Status)
	})
	operatortest.MarkDeploymentAvailable(t, ns, "web")
	return ns, env
}

// webDeploymentNow is the web Deployment as it is.
func webDeploymentNow(g Gomega, ns string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
	return d
}

// runningPod makes a pod of the web Deployment's template running image,
// as its ReplicaSet and a kubelet would (envtest runs neither).
func runningPod(t *testing.T, ns, name, image string) {
	t.Helper()
	testenv.MarkPodRunning(t, operatortest.Admin, startPod(t, ns, name, image), false)
}

// startPod makes a pod of the web Deployment's template (its labels: the
// operator watches the pods labelled as supervised) that does not run
// yet, owned by a ReplicaSet of the Deployment as the Deployment
// controller would make it (envtest runs none).
func startPod(t *testing.T, ns, name, image string) *corev1.Pod {
	t.Helper()
	g := NewWithT(t)
	d := webDeploymentNow(g, ns)
	rs := controlledBy(t, d, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-" + name},
		Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template}})
	return createPod(t, rs, ns, name, d.Spec.Template.Labels, image)
}

// controlledBy creates obj with owner as its controller, as a workload
// controller makes what it controls.
func controlledBy[T client.Object](t *testing.T, owner client.Object, obj T) T {
	t.Helper()
	gvk, err := apiutil.GVKForObject(owner, operatortest.Admin.Scheme())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	obj.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)})
	NewWithT(t).Expect(operatortest.Admin.Create(context.Background(), obj)).To(Succeed())
	return obj
}

// createPod makes a pod running image in its container web, controlled
// by owner when it is not nil.
func createPod(t *testing.T, owner client.Object, ns, name string, labels map[string]string, image string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{ServiceAccountName: operatortest.Deployer, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
	if owner != nil {
		return controlledBy(t, owner, pod)
	}
	NewWithT(t).Expect(operatortest.Admin.Create(context.Background(), pod)).To(Succeed())
	return pod
}

// pushLive pushes the web source with binary and page and asks for a
// reconcile, as `kubectl devloop push` does.
func pushLive(t *testing.T, env *v1alpha1.DevEnvironment, binary, page string) {
	t.Helper()
	operatortest.AppFiles(t, env.Namespace, liveSource(binary, page))
	operatortest.RequestReconcile(t, env)
}

// expectRolledOut: the web image, built anew since digest from, was
// rolled out, the web Deployment's template naming its digest. It
// returns the image's status.
func expectRolledOut(g Gomega, env *v1alpha1.DevEnvironment, from string) *v1alpha1.ImageStatus {
	ist := env.Status.Component("web").Image("web")
	g.Expect(ist.Digest).NotTo(Equal(from))
	g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateRollout))
	g.Expect(webDeploymentNow(g, env.Namespace).Spec.Template.Spec.Containers[0].Image).To(HaveSuffix("@" + ist.Digest))
	return ist
}

// podLiveDigest is the digest the pod was last synced to.
func podLiveDigest(g Gomega, ns, name string) string {
	pod := &corev1.Pod{}
	g.Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
	return pod.Annotations[v1alpha1.LiveDigestAnnotation]
}

// TestLiveUpdateDecidesPerChangedPath drives the real reconciler, build
// (in-process, pushing to the real registry) and deploy engine: a change
// of the live path only is synced into the running pods without touching
// the Deployment; a pod started later is synced too; a sync failing on a
// pod, a path outside the set and an env change are rolled out, and
// status says why each time.
func TestLiveUpdateDecidesPerChangedPath(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, env := deployLiveEnv(t)
	key := client.ObjectKeyFromObject(env)

	// First deploy: a rollout, as always.
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.TemplateDigest).To(Equal(ist.Digest))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateRollout))
	})
	v1 := *env.Status.Component("web").Image("web")
	before := webDeploymentNow(g, ns)
	image := before.Spec.Template.Spec.Containers[0].Image
	g.Expect(image).To(HaveSuffix("@" + v1.Digest))
	g.Expect(before.Spec.Template.Labels).To(HaveKeyWithValue(v1alpha1.LabelLiveUpdate, v1alpha1.LiveUpdateSupervised),
		"the operator watches the template's pods")
	runningPod(t, ns, "web-a", image)
	runningPod(t, ns, "web-b", image)

	// Only the binary changes: synced in place into both pods.
	pushLive(t, env, "binary v2", "<h1>1</h1>")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.Digest).NotTo(Equal(v1.Digest))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive), "reason: %s", ist.UpdateReason)
		g.Expect(ist.LiveDigest).To(Equal(ist.Digest))
		g.Expect(ist.TemplateDigest).To(Equal(v1.Digest))
		g.Expect(ist.UpdateReason).To(Equal("synced in place: /web"))
		g.Expect(podLiveDigest(g, ns, "web-a")).To(Equal(ist.Digest))
		g.Expect(podLiveDigest(g, ns, "web-b")).To(Equal(ist.Digest))
	})
	v2 := *env.Status.Component("web").Image("web")
	g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReady).Message).To(ContainSubstring("live update serving: web/web"))
	for _, pod := range []string{"web-a", "web-b"} {
		calls := operatortest.LiveSyncs.Of(ns, pod, v2.Digest)
		g.Expect(calls).To(HaveLen(1), "one sync per pod")
		g.Expect(calls[0].Container).To(Equal("web"))
		g.Expect(calls[0].Command).To(Equal([]string{supervisor.Path, "sync", "--digest=" + v2.Digest}))
		g.Expect(calls[0].Files).To(Equal(map[string]string{"/web": "755:binary v2"}), "the tar holds the changed file only, mode kept")
	}
	after := webDeploymentNow(g, ns)
	g.Expect(after.Generation).To(Equal(before.Generation), "no rollout: the template is unchanged")
	g.Expect(after.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonLiveUpdated, "synced in place into "+ns+"/web-a, "+ns+"/web-b")

	// A pod started later (rescheduled, scaled up) is synced to the
	// latest digest as soon as it runs, without a new build or reconcile
	// request: nothing else reconciles this environment within the
	// timeout (sources every minute, drift every 5), the pod's start
	// does.
	runningPod(t, ns, "web-c", image)
	g.Eventually(func(g Gomega) {
		g.Expect(podLiveDigest(g, ns, "web-c")).To(Equal(v2.Digest))
	}, operatortest.Timeout).Should(Succeed())
	g.Expect(operatortest.LiveSyncs.Of(ns, "web-c", v2.Digest)[0].Files).To(Equal(map[string]string{"/web": "755:binary v2"}))
	g.Expect(operatortest.LiveSyncs.Of(ns, "web-a", v2.Digest)).To(HaveLen(1), "a synced pod is not synced again")

	// A sync failing on one pod: the component is rolled out instead.
	operatortest.LiveSyncs.FailFor(ns, "web-b", "sync: no supervisor answers at /.devloop/live/.supervisor.sock")
	pushLive(t, env, "binary v3", "<h1>1</h1>")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ist := expectRolledOut(g, env, v2.Digest)
		g.Expect(ist.UpdateReason).To(ContainSubstring("sync failed on pod " + ns + "/web-b"))
		g.Expect(ist.UpdateReason).To(ContainSubstring("no supervisor answers"))
		g.Expect(ist.LiveDigest).To(BeEmpty())
	})
	operatortest.MarkDeploymentAvailable(t, ns, "web")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.TemplateDigest).To(Equal(ist.Digest))
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReady).Message).NotTo(ContainSubstring("live update"))
	})

	// A file outside liveUpdate.paths: a rollout naming it.
	rolled := webDeploymentNow(g, ns)
	pushLive(t, env, "binary v3", "<h1>2</h1>")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.UpdateReason).To(Equal("/srv/static/index.html changed, outside liveUpdate.paths"))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateRollout))
		d := webDeploymentNow(g, ns)
		g.Expect(d.Generation).To(BeNumerically(">", rolled.Generation))
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix("@" + ist.Digest))
	})
	operatortest.MarkDeploymentAvailable(t, ns, "web")
	operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)

	// An env var of the image: a rollout naming the config field.
	g.Expect(operatortest.Admin.Get(ctx, key, env)).To(Succeed())
	patched := env.DeepCopy()
	patched.Spec.Components[0].Images[0].Env = []v1alpha1.EnvVar{{Name: "GREETING", Value: "hi"}}
	g.Expect(operatortest.Admin.Patch(ctx, patched, client.MergeFrom(env))).To(Succeed())
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.UpdateReason).To(Equal("the image config's Env changed"))
		g.Expect(webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image).To(HaveSuffix("@" + ist.Digest))
	})
	operatortest.MarkDeploymentAvailable(t, ns, "web")
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)

	// A pod of a template that runs the newest digest itself is told it
	// is current (an empty sync), so its supervisor starts the program
	// without waiting out its start gate.
	latest := env.Status.Component("web").Image("web").Digest
	runningPod(t, ns, "web-d", webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image)
	g.Eventually(func(g Gomega) {
		g.Expect(podLiveDigest(g, ns, "web-d")).To(Equal(latest))
	}, operatortest.Timeout).Should(Succeed())
	g.Expect(operatortest.LiveSyncs.Of(ns, "web-d", latest)[0].Files).To(BeEmpty())
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	g.Expect(env.Status.Component("web").Image("web").LastUpdate).To(Equal(v1alpha1.UpdateRollout), "telling a pod it is current is no live update")
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// TestLiveUpdateTakenOffRollsOutTheNewestBuild: liveUpdate taken off an
// image while a live update serves in place rolls out the newest build
// (rebuilt without the supervisor) in one step, and status keeps no live
// update fields for it (they described builds it no longer has).
func TestLiveUpdateTakenOffRollsOutTheNewestBuild(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, env := deployLiveEnv(t)
	key := client.ObjectKeyFromObject(env)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	v1 := env.Status.Component("web").Image("web").Digest
	runningPod(t, ns, "web-a", webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image)
	pushLive(t, env, "binary v2", "<h1>1</h1>")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("web").Image("web").ServesLive()).To(BeTrue())
	})
	v2 := env.Status.Component("web").Image("web").Digest
	before := webDeploymentNow(g, ns).Generation

	patched := env.DeepCopy()
	patched.Spec.Components[0].Images[0].LiveUpdate = nil
	g.Expect(operatortest.Admin.Patch(ctx, patched, client.MergeFrom(env))).To(Succeed())
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.Digest).NotTo(BeElementOf(v1, v2), "rebuilt without the supervisor")
		g.Expect(webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image).To(HaveSuffix("@" + ist.Digest))
		g.Expect(ist.TemplateDigest).To(BeEmpty())
		g.Expect(ist.LiveDigest).To(BeEmpty())
		g.Expect(ist.LastUpdate).To(BeEmpty())
		g.Expect(ist.UpdateReason).To(BeEmpty())
	})
	d := webDeploymentNow(g, ns)
	g.Expect(d.Generation).To(Equal(before+1), "one rollout, to the newest build")
	g.Expect(d.Spec.Template.Labels).NotTo(HaveKey(v1alpha1.LabelLiveUpdate))
}
