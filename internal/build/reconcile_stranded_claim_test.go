package build_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// What the scheduler (v1.37) wrote on a builder pod whose cache claim's
// volume was node 1's disk after node 1 was drained (two-node cluster,
// 2026-11-28).
const strandedMessage = "0/2 nodes are available: 1 node(s) didn't match PersistentVolume's node affinity, 1 node(s) were unschedulable. " +
	"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."

// strandPod writes the status the scheduler gives a pod it cannot place
// because of its volume's node.
func strandPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: strandedMessage, LastTransitionTime: metav1.Now()}}}
	NewWithT(t).Expect(operatortest.Admin.Status().Update(context.Background(), pod)).To(Succeed())
}

// bindClaimOn records, as the scheduler does for a claim of a
// WaitForFirstConsumer class, the node its volume was made on.
func bindClaimOn(t *testing.T, ns, name, node string) types.UID {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pvc)).To(Succeed())
		if pvc.Annotations == nil {
			pvc.Annotations = map[string]string{}
		}
		pvc.Annotations["volume.kubernetes.io/selected-node"] = node
		g.Expect(operatortest.Admin.Update(context.Background(), pvc)).To(Succeed())
	}, operatortest.Timeout).Should(Succeed())
	return pvc.UID
}

// releaseDeletedClaim plays the claim protection controller: once the
// claim ns/name is being deleted, its finalizer goes (no pod uses it).
func releaseDeletedClaim(t *testing.T, ns, name string, old types.UID) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		pvc := &corev1.PersistentVolumeClaim{}
		err := operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pvc)
		if err == nil && pvc.UID == old {
			g.Expect(pvc.DeletionTimestamp).NotTo(BeNil(), "the stranded claim is not being deleted")
			pvc.Finalizers = nil
			g.Expect(operatortest.Admin.Update(context.Background(), pvc)).To(Succeed())
		}
		g.Expect(err == nil && pvc.UID == old).To(BeFalse(), "the stranded claim is still there")
	}, operatortest.Timeout).Should(Succeed())
}

// A drain of the node a build cache claim's volume lives on (a local
// disk, ReadWriteOnce) strands the builder pod that mounts it: Pending,
// forever. devloop says so, drops the claim and its Job, and builds again
// with a fresh claim on a node that can run it; the environment waits
// (Reconciling), never Stalled. Another namespace's environment, whose
// builder is not stranded, keeps its Job and claim.
func TestABuilderStrandedByItsCacheClaimsNodeStartsAgainWithAFreshClaim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := apiNamespace(t)
	other, _ := apiNamespace(t)
	key := operatortest.CreateEnv(t, amd64APIEnv(ns))
	operatortest.CreateEnv(t, amd64APIEnv(other))
	job := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")
	otherJob := operatortest.WaitForBuilderJob(t, other, "linux-amd64")
	env := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(ctx, key, env)).To(Succeed())
	claim := build.CacheClaimName(env, "api")
	claimUID := bindClaimOn(t, ns, claim, "node-1")
	otherClaimUID := bindClaimOn(t, other, claim, "node-1")

	// Both Jobs' pods; only ns's cannot be scheduled.
	for _, j := range []batchv1.Job{job, otherJob} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: j.Name + "-p1",
				Labels:          map[string]string{batchv1.JobNameLabel: j.Name},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
			Spec: j.Spec.Template.Spec,
		}
		g.Expect(operatortest.Admin.Create(ctx, pod)).To(Succeed())
		if j.Namespace == ns {
			strandPod(t, pod)
		}
	}
	operatortest.RequestReconcile(t, env)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(apiMessage(env)).To(ContainSubstring(
			"build cache claim " + claim + " is on node node-1, where no pod can run now (0/2 nodes are available: 1 node(s) didn't match PersistentVolume's node affinity, 1 node(s) were unschedulable): a fresh cache on another node, this build starts cold"))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(Or(BeNil(), HaveField("Status", metav1.ConditionFalse)))
	operatortest.ExpectShortSummary(t, env)

	// The claim goes (its protection released as the controller would),
	// then the Job starts again on a new one.
	releaseDeletedClaim(t, ns, claim, claimUID)
	g.Eventually(func(g Gomega) {
		again := operatortest.BuilderJobs(g, ns)["linux-amd64"]
		g.Expect(again.UID).NotTo(BeEmpty())
		g.Expect(again.UID).NotTo(Equal(job.UID), "the stranded Job is still the one")
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc)).To(Succeed())
		g.Expect(pvc.UID).NotTo(Equal(claimUID))
		g.Expect(pvc.DeletionTimestamp).To(BeNil())
	}, operatortest.Timeout).Should(Succeed())
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(apiMessage(env)).To(ContainSubstring("building image api in job"))
	})

	// The other namespace's builder was never touched.
	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: other, Name: claim}, pvc)).To(Succeed())
	g.Expect(pvc.UID).To(Equal(otherClaimUID))
	g.Expect(pvc.DeletionTimestamp).To(BeNil())
	g.Expect(operatortest.BuilderJobs(g, other)["linux-amd64"].UID).To(Equal(otherJob.UID))
}

// A claim of a class that binds at once (no node recorded by the
// scheduler) would be placed by its class alone, maybe on the drained
// node again: devloop keeps it and its Job, and says what the build waits
// for, never Stalled. Seen on the local cluster, whose default class
// makes volumes on node 1 only: dropping such a claim made the next one
// there again, over and over.
func TestABuilderStrandedByAnImmediateClaimWaitsSayingWhy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := apiNamespace(t)
	key := operatortest.CreateEnv(t, amd64APIEnv(ns))
	job := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")
	env := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(ctx, key, env)).To(Succeed())
	claim := build.CacheClaimName(env, "api")
	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc)).To(Succeed())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-p1",
			Labels:          map[string]string{batchv1.JobNameLabel: job.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: job.Spec.Template.Spec,
	}
	g.Expect(operatortest.Admin.Create(ctx, pod)).To(Succeed())
	strandPod(t, pod)
	operatortest.RequestReconcile(t, env)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(apiMessage(env)).To(ContainSubstring(
			"build cache claim " + claim + " is on a node where no pod can run now (0/2 nodes are available: 1 node(s) didn't match PersistentVolume's node affinity, 1 node(s) were unschedulable): waiting for that node"))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	operatortest.ExpectShortSummary(t, env)
	// Another reconcile later, the claim and the Job are the same.
	operatortest.RequestReconcile(t, env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(apiMessage(env)).To(ContainSubstring("waiting for that node"))
	})
	again := &corev1.PersistentVolumeClaim{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, again)).To(Succeed())
	g.Expect(again.UID).To(Equal(pvc.UID))
	g.Expect(again.DeletionTimestamp).To(BeNil())
	g.Expect(operatortest.BuilderJobs(g, ns)["linux-amd64"].UID).To(Equal(job.UID))
}
