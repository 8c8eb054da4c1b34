package deploy_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// initJob is an admission-init Job, as the real projects run one before
// their webhooks, whose argument the test changes.
func initJob(arg string) string {
	return `apiVersion: batch/v1
kind: Job
metadata:
  name: admission-init
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: init
        image: busybox:1.36
        args: ["` + arg + `"]
`
}

// TestFailedJobFailsItsComponent: a Job out of retries is the component's
// failure, and the environment stalls naming it instead of waiting
// forever; a changed Job, whose pod template cannot change, is deleted and
// created again, and its success makes the environment Ready.
func TestFailedJobFailsItsComponentAndAChangedJobIsReplaced(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	files := map[string]string{"deploy/job.yaml": initJob("v1")}
	env := operatortest.DeployDirEnv(t, ns, files)
	key := operatortest.CreateEnv(t, env)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.PhaseOf(env, "init")).To(Equal(v1alpha1.PhaseDeploying))
	})
	first := &batchv1.Job{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "admission-init"}, first)).To(Succeed())
	operatortest.EndJob(t, ns, "admission-init", false)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		c := env.Status.Component("init")
		g.Expect(c.Phase).To(Equal(v1alpha1.PhaseFailed))
		g.Expect(c.Message).To(ContainSubstring("failed: jobs.batch/admission-init"))
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonDeployFailed))
		g.Expect(stalled.Message).To(ContainSubstring("component init:"))
	})
	operatortest.ExpectKstatus(t, env, status.FailedStatus)

	// The fix changes the Job's pod template: the Job is replaced.
	files["deploy/job.yaml"] = initJob("v2")
	operatortest.AppFiles(t, ns, files)
	_ = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.PhaseOf(env, "init")).To(Equal(v1alpha1.PhaseDeploying))
		job := &batchv1.Job{}
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "admission-init"}, job)).To(Succeed())
		g.Expect(job.UID).NotTo(Equal(first.UID), "a new Job")
		g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"v2"}))
	})
	g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReady).Message).NotTo(ContainSubstring("Invalid value"), "no struct dump")
	operatortest.EndJob(t, ns, "admission-init", true)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// TestStuckPodIsNamedWithTheRegistryField: a Deployment whose pod cannot
// pull its built image says so in the component's status, naming the pod,
// the image and spec.registry.pullPrefix.
func TestStuckPodIsNamedWithTheRegistryField(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	pushWebSource(t, ns, webDeployment)
	env := webManifestsEnv(ns, "deploy")
	env.Spec.Registry.PullPrefix = "wrong.example:5000/" + ns + "/web"
	key := operatortest.CreateEnv(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.PhaseOf(env, "web")).To(Equal(v1alpha1.PhaseDeploying))
	})
	image := env.Spec.Registry.PullPrefix + "/web@" + env.Status.Component("web").Image("web").Digest

	// What the kubelet reports for the Deployment's pod.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-abc12", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
	g.Expect(operatortest.Admin.Create(ctx, pod)).To(Succeed())
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: image, State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image \"" + image + "\":\n ErrImagePull: dial tcp: lookup wrong.example: no such host"}}}}
	g.Expect(operatortest.Admin.Status().Update(ctx, pod)).To(Succeed())

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		msg := env.Status.Component("web").Message
		g.Expect(msg).To(ContainSubstring("pod web-abc12: container web (image " + image + "): ImagePullBackOff"))
		g.Expect(msg).To(ContainSubstring("no such host"))
		g.Expect(msg).To(ContainSubstring("spec.registry.pullPrefix"))
		g.Expect(msg).NotTo(ContainSubstring("\n"))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	// Issue 32.3: the rollout's progress deadline passes (the condition
	// the deployment controller writes). The environment Stalls, and the
	// message keeps the cause and the field, not only kstatus's "Progress
	// deadline exceeded".
	g.Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
			return err
		}
		now := metav1.Now()
		d.Status.ObservedGeneration = d.Generation
		d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.UnavailableReplicas = 1, 1, 1
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-5d8f" has timed out progressing.`, LastUpdateTime: now, LastTransitionTime: now}}
		return operatortest.Admin.Status().Update(ctx, d)
	}, operatortest.Timeout).Should(Succeed())
	env = operatortest.WaitForStalled(t, key, "", "Progress deadline exceeded",
		"pod web-abc12: container web (image "+image+"): ImagePullBackOff", "spec.registry.pullPrefix")
	t.Logf("Stalled: %s", operatortest.EnvCondition(env, v1alpha1.ConditionStalled).Message)
	g.Expect(env.Status.Component("web").Message).To(ContainSubstring("spec.registry.pullPrefix"))
}
