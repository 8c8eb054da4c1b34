package liveupdate_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// node makes a node of platform os/arch, as its kubelet labels it.
func node(t *testing.T, name, os, arch string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{corev1.LabelOSStable: os, corev1.LabelArchStable: arch}}}
	NewWithT(t).Expect(operatortest.Admin.Create(context.Background(), n)).To(Succeed())
	t.Cleanup(func() { _ = operatortest.Admin.Delete(context.Background(), n) })
}

// runningPodOn is runningPod scheduled on a node.
func runningPodOn(t *testing.T, ns, name, nodeName, image string) {
	t.Helper()
	g := NewWithT(t)
	d := webDeploymentNow(g, ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: d.Spec.Template.Labels},
		Spec: corev1.PodSpec{NodeName: nodeName, ServiceAccountName: operatortest.Deployer, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
	pod = controlledBy(t, d, pod)
	testenv.MarkPodRunning(t, operatortest.Admin, pod, false)
}

// TestMultiPlatformImageLiveUpdatedPerPlatform (issue 33): an image of
// two platforms (an index) is live updated, each platform planned from
// its own image of the index and each pod synced with the tar of its
// node's platform (read from the node's labels); a pod on a node of a
// platform the image is not built for cannot be synced, and the image is
// rolled out, status naming the node's platform. (envtest's operator has
// a linux/amd64 supervisor only: the two platforms are amd64 variants;
// TestTarPlatform covers the choice between architectures.)
func TestMultiPlatformImageLiveUpdatedPerPlatform(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	operatortest.AppFiles(t, ns, liveSource("binary v1", "<h1>1</h1>"))
	env := liveEnv(ns)
	// Two platforms the test's supervisor (a linux/amd64 binary) is built
	// for: an index of two images, each planned for itself.
	env.Spec.Components[0].Images[0].Platforms = []string{"linux/amd64/v3", "linux/amd64"}
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(t, key, func(g Gomega, cur *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})).To(Succeed(), "status: %+v", cur.Status)
	})
	operatortest.MarkDeploymentAvailable(t, ns, "web")
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	v1 := *env.Status.Component("web").Image("web")
	image := webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image
	g.Expect(image).To(HaveSuffix("@" + v1.Digest))
	node(t, ns+"-amd", "linux", "amd64")
	runningPodOn(t, ns, "web-amd", ns+"-amd", image)
	runningPodOn(t, ns, "web-amd2", ns+"-amd", image)

	// Only the binary changes: both pods synced in place, no rollout.
	pushLive(t, env, "binary v2", "<h1>1</h1>")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.Digest).NotTo(Equal(v1.Digest))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive), "reason: %s", ist.UpdateReason)
		g.Expect(podLiveDigest(g, ns, "web-amd")).To(Equal(ist.Digest))
		g.Expect(podLiveDigest(g, ns, "web-amd2")).To(Equal(ist.Digest))
	})
	v2 := *env.Status.Component("web").Image("web")
	for _, pod := range []string{"web-amd", "web-amd2"} {
		calls := operatortest.LiveSyncs.Of(ns, pod, v2.Digest)
		g.Expect(calls).To(HaveLen(1))
		g.Expect(calls[0].Files).To(Equal(map[string]string{"/web": "755:binary v2"}))
	}
	g.Expect(webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image).To(Equal(image), "no rollout")

	// A pod on a node of another platform: no tar for it, a rollout.
	node(t, ns+"-s390x", "linux", "s390x")
	runningPodOn(t, ns, "web-s390x", ns+"-s390x", image)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ist := expectRolledOut(g, env, v1.Digest)
		g.Expect(ist.UpdateReason).To(ContainSubstring("sync failed on pod " + ns + "/web-s390x"))
		g.Expect(ist.UpdateReason).To(ContainSubstring("is linux/s390x, which the image is not built for"))
	})
}
