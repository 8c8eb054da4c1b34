package testrun_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testrun"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// What the scheduler (v1.37) wrote on a pod whose cache claim's volume
// was node 1's disk after node 1 was drained (two-node cluster,
// 2026-11-28).
const strandedBySchedulerMessage = "0/2 nodes are available: 1 node(s) didn't match PersistentVolume's node affinity, 1 node(s) were unschedulable. " +
	"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."

// testJobPod makes the Job's pod as the Job controller would; stranded,
// it gets the status the scheduler gives a pod it cannot place because of
// its volume's node.
func testJobPod(t *testing.T, job *batchv1.Job, stranded bool) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-p1", Labels: map[string]string{batchv1.JobNameLabel: job.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: job.Spec.Template.Spec,
	}
	NewWithT(t).Expect(operatortest.Admin.Create(ctx, pod)).To(Succeed())
	if stranded {
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: strandedBySchedulerMessage, LastTransitionTime: metav1.Now()}}}
		NewWithT(t).Expect(operatortest.Admin.Status().Update(ctx, pod)).To(Succeed())
	}
}

// A test run whose cache claim's volume is on a node drained or gone
// (a ReadWriteOnce claim of a node's own disk) cannot start: its pod is
// Pending until the run's timeout. The run and its suite say why, naming
// the claim and the scheduler's reason; the run stays Running (it may
// start when the node comes back) and the environment is not Stalled.
// Another namespace's run of the same suite, whose pod is only not
// scheduled yet, says nothing of the kind.
func TestATestRunStrandedByItsCacheClaimSaysWhy(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	other := operatortest.Namespace(t)
	env := operatortest.TestsEnv(t, ns, builder.Suite("unit").Cache("1Gi")).Create(t, operatortest.Admin)
	otherEnv := operatortest.TestsEnv(t, other, builder.Suite("unit").Cache("1Gi")).Create(t, operatortest.Admin)
	claim := testrun.CacheClaimName(env.Name, "unit")

	jobs := map[string]*batchv1.Job{}
	for _, e := range []*v1alpha1.DevEnvironment{env, otherEnv} {
		operatortest.Annotate(t, e, v1alpha1.TriggerAnnotation, "unit")
		_, run := operatortest.ExpectRun(t, e, "unit", 1, v1alpha1.ResultRunning)
		jobs[e.Namespace] = operatortest.WaitForJob(t, e.Namespace, run.JobName)
	}
	testJobPod(t, jobs[ns], true)
	testJobPod(t, jobs[other], false)
	operatortest.RequestReconcile(t, env)
	otherRequest := operatortest.RequestReconcile(t, otherEnv)

	want := "test cache claim " + claim + " is on a node where no pod can run now (0/2 nodes are available: " +
		"1 node(s) didn't match PersistentVolume's node affinity, 1 node(s) were unschedulable): the run starts when that node takes pods again"
	done := operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		run := operatortest.RunOf(env, "unit", 1)
		g.Expect(run).NotTo(BeNil())
		g.Expect(run.Result).To(Equal(v1alpha1.ResultRunning))
		g.Expect(run.Message).To(Equal(want))
		g.Expect(env.Status.Tests[0].Message).To(Equal("run #1 waits: " + want))
	})
	g.Expect(operatortest.EnvCondition(done, v1alpha1.ConditionStalled)).To(Or(BeNil(), HaveField("Status", metav1.ConditionFalse)))

	// The node takes pods again: the pod is placed, and status no longer
	// says it waits.
	pod := &corev1.Pod{}
	g.Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: jobs[ns].Name + "-p1"}, pod)).To(Succeed())
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	g.Expect(operatortest.Admin.Status().Update(context.Background(), pod)).To(Succeed())
	request := operatortest.RequestReconcile(t, env)
	operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
		run := operatortest.RunOf(env, "unit", 1)
		g.Expect(run.Result).To(Equal(v1alpha1.ResultRunning))
		g.Expect(run.Message).To(BeEmpty())
		g.Expect(env.Status.Tests[0].Message).To(BeEmpty())
	})

	// The other namespace's run, only not scheduled yet, says nothing.
	operatortest.WaitForEnv(t, client.ObjectKeyFromObject(otherEnv), func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(otherRequest))
		run := operatortest.RunOf(env, "unit", 1)
		g.Expect(run).NotTo(BeNil())
		g.Expect(run.Result).To(Equal(v1alpha1.ResultRunning))
		g.Expect(run.Message).To(BeEmpty())
		g.Expect(env.Status.Tests[0].Message).To(BeEmpty())
	})
}
