package build_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// A drain evicts a builder Job's pod mid-build: the Job does not fail
// (its pod failure policy ignores a disruption) and its controller starts
// a new pod on another node. Status says so, naming the node the pod was
// stopped on, and the environment keeps building (Reconciling, never
// Stalled). Before, a drain failed the Job (BackoffLimitExceeded) and
// stalled the environment (seen on two nodes).
func TestABuilderJobWhosePodADrainEvictedGoesOnSayingWhere(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := apiNamespace(t)
	key := operatortest.CreateEnv(t, amd64APIEnv(ns))
	job := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")
	g.Expect(job.Spec.PodFailurePolicy).NotTo(BeNil(), "a builder Job without a pod failure policy fails when a drain evicts its pod")
	g.Expect(job.Spec.PodFailurePolicy.Rules).To(ContainElement(HaveField("Action", batchv1.PodFailurePolicyActionIgnore)))
	// Nor does the evicted pod hold the drain and the Job's next pod back
	// for the default 30 s: its build ignores SIGTERM (PID 1), and the
	// next pod redoes its work anyway.
	g.Expect(job.Spec.Template.Spec.TerminationGracePeriodSeconds).To(HaveValue(BeNumerically("<=", 5)), "a builder pod's grace period")

	// The evicted pod, as the eviction API and the kubelet leave it, and
	// the Job still active (its controller starts the next pod).
	evicted := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-p1",
			Labels:          map[string]string{batchv1.JobNameLabel: job.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: job.Spec.Template.Spec,
	}
	evicted.Spec.NodeName = "node-1"
	g.Expect(operatortest.Admin.Create(ctx, evicted)).To(Succeed())
	evicted.Status = corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI",
		Message: "Eviction API: evicting", LastTransitionTime: metav1.Now()}}}
	g.Expect(operatortest.Admin.Status().Update(ctx, evicted)).To(Succeed())
	env := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(ctx, key, env)).To(Succeed())
	operatortest.RequestReconcile(t, env)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(apiMessage(env)).To(ContainSubstring(
			"building image api in job " + job.Name + ": its pod on node node-1 was stopped (EvictionByEvictionAPI); a new pod goes on"))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	operatortest.ExpectShortSummary(t, env)
	g.Expect(env.Status.Component("api").Image("api").Build.Result).To(Equal(v1alpha1.BuildRunning))

	// The evicted pod is removed at the end of its grace period (on two
	// nodes, before any reconcile read it: the note was never seen); its
	// replacement builds on the other node. Status still says why.
	g.Expect(operatortest.Admin.Delete(ctx, evicted)).To(Succeed())
	next := evicted.DeepCopy()
	next.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-p2", Labels: evicted.Labels, OwnerReferences: evicted.OwnerReferences}
	next.Spec.NodeName = "node-2"
	next.Status = corev1.PodStatus{}
	g.Expect(operatortest.Admin.Create(ctx, next)).To(Succeed())
	operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Annotations[v1alpha1.ReconcileRequestAnnotation]).To(Equal(env.Status.LastHandledReconcileAt))
		g.Expect(apiMessage(env)).To(ContainSubstring("its pod on node node-1 was stopped (EvictionByEvictionAPI); a new pod goes on"))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
}

// apiMessage is component api's message, "" before it has a status.
func apiMessage(env *v1alpha1.DevEnvironment) string {
	if c := env.Status.Component("api"); c != nil {
		return c.Message
	}
	return ""
}

// A drain evicts a warm builder mid-build: while the pod stops, status
// names its node and says it starts again; once it is gone a new warm
// builder is made (the e2e case on two nodes builds in it). Never
// Stalled.
func TestAWarmBuilderADrainEvictedSaysWhereAndStartsAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := apiNamespace(t)
	operatortest.WarmExec.HangIn(ns) // the build runs until the pod goes
	key := operatortest.CreateEnv(t, warmAPIEnv(ns))
	pod := operatortest.RunPod(t, ns, warmAPIPod)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(apiMessage(env)).To(ContainSubstring("in warm builder"))
	})

	// The eviction: DisruptionTarget, then the deletion; a finalizer of
	// the test's keeps it terminating, as its grace period would.
	g.Expect(operatortest.Admin.SubResource("binding").Create(ctx, pod, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "node-1"}})).To(Succeed())
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	pod.Finalizers = append(pod.Finalizers, "devloop.dev/test-hold")
	g.Expect(operatortest.Admin.Update(ctx, pod)).To(Succeed())
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.Now()})
	g.Expect(operatortest.Admin.Status().Update(ctx, pod)).To(Succeed())
	g.Expect(operatortest.Admin.Delete(ctx, pod)).To(Succeed())
	env := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(ctx, key, env)).To(Succeed())
	operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(apiMessage(env)).To(ContainSubstring(
			"warm builder " + warmAPIPod + " on node node-1 was stopped (EvictionByEvictionAPI): it starts again on a node that takes pods"))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	operatortest.ExpectShortSummary(t, env)

	// Gone: a new warm builder.
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	pod.Finalizers = nil
	g.Expect(operatortest.Admin.Update(ctx, pod)).To(Succeed())
	// The kubelet confirms a bound pod's end with a deletion of grace 0.
	g.Expect(client.IgnoreNotFound(operatortest.Admin.Delete(ctx, pod, client.GracePeriodSeconds(0)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		next := &corev1.Pod{}
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(pod), next)).To(Succeed())
		g.Expect(next.UID).NotTo(Equal(pod.UID))
	}, operatortest.Timeout).Should(Succeed())
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(Or(BeNil(), HaveField("Status", metav1.ConditionFalse)))
	})
}
