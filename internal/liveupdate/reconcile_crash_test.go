package liveupdate_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestLiveUpdateOfACrashingProgram: a program that crashes after a live
// update's restart is reported as any crash (the pod going down
// reconciles the environment: TestLivePodEventsConcernTheirEnvironment),
// and the next change, which no sync can bring into a crash-looping
// container, is rolled out instead, status naming the pod and why.
func TestLiveUpdateOfACrashingProgram(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, env := deployLiveEnv(t)
	key := client.ObjectKeyFromObject(env)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	image := webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image
	pod := startPod(t, ns, "web-a", image)
	testenv.MarkPodRunning(t, operatortest.Admin, pod, false)

	// v2, only the binary: synced in place.
	pushLive(t, env, "binary v2", "<h1>1</h1>")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive))
		g.Expect(podLiveDigest(g, ns, "web-a")).To(Equal(ist.Digest))
	})
	v2 := *env.Status.Component("web").Image("web")

	// v2's program crashes: the Deployment controller counts the pod
	// unavailable, then the kubelet backs off restarting it.
	d := webDeploymentNow(g, ns)
	d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UnavailableReplicas = 0, 0, 1
	d.Status.Conditions[0] = appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"}
	g.Expect(operatortest.Admin.Status().Update(ctx, d)).To(Succeed())
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
		Message: "back-off 10s restarting failed container=web"}}
	pod.Status.ContainerStatuses[0].RestartCount = 2
	g.Expect(operatortest.Admin.Status().Update(ctx, pod)).To(Succeed())
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(Equal("1 of 1 components not Ready: web"))
		g.Expect(env.Status.Component("web").Message).To(ContainSubstring("pod web-a: container web (image " + image + "): CrashLoopBackOff"))
	})

	// v3, only the binary again: no sync reaches a crash-looping
	// container, so it is rolled out.
	pushLive(t, env, "binary v3", "<h1>1</h1>")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ist := expectRolledOut(g, env, v2.Digest)
		g.Expect(ist.UpdateReason).To(Equal("sync failed on pod " + ns + "/web-a: container web is not running (CrashLoopBackOff): no sync can reach it"))
	})
	g.Expect(operatortest.LiveSyncs.Of(ns, "web-a", env.Status.Component("web").Image("web").Digest)).To(BeEmpty(), "no sync was tried")
	operatortest.MarkDeploymentAvailable(t, ns, "web")
	operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
}
