package operatortest

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/testrun"
)

// EndTestJob plays the Job controller and kubelet for a test Job: a pod
// whose test container exited with code (with log), then the terminal
// condition (Complete for 0, Failed with reason otherwise).
func EndTestJob(t testing.TB, job *batchv1.Job, code int32, reason, log string) {
	t.Helper()
	endTestJob(t, job, code, reason, log, nil)
}

// EndTestJobWithReport is EndTestJob for a Job with a report step: the
// test container exited with code, the report sidecar was stopped after
// it and left summary as its termination message; a code other than 0
// fails the Job as its backoff limit would.
func EndTestJobWithReport(t testing.TB, job *batchv1.Job, code int32, summary []byte) {
	t.Helper()
	reason := ""
	if code != 0 {
		reason = batchv1.JobReasonBackoffLimitExceeded
	}
	endTestJob(t, job, code, reason, "Ran 6 of 6 Specs\n", []corev1.ContainerStatus{
		Terminated(testrun.ContainerFetch, 0, ""), Terminated(testrun.ContainerReport, 0, string(summary))})
}

// endTestJob makes the Job's pod, ended as code says with the init
// containers given, serves log as its test container's, then ends the
// Job.
func endTestJob(t testing.TB, job *batchv1.Job, code int32, reason, log string, inits []corev1.ContainerStatus) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-p1", Labels: map[string]string{batchv1.JobNameLabel: job.Name}},
		Spec:       job.Spec.Template.Spec,
	}
	g.Expect(Admin.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.InitContainerStatuses = inits
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{Terminated(testrun.ContainerTest, code, "")}
	g.Expect(Admin.Status().Update(ctx, pod)).To(Succeed())
	PodLogs.Set(job.Namespace, pod.Name, testrun.ContainerTest, log)

	g.Eventually(func() error {
		cur := &batchv1.Job{}
		if err := Admin.Get(ctx, client.ObjectKeyFromObject(job), cur); err != nil {
			return err
		}
		cur.Status = endedJobStatus(reason, 3*time.Second)
		return Admin.Status().Update(ctx, cur)
	}, Timeout).Should(Succeed())
}

// endedJobStatus is the status the Job controller writes when a Job that
// ran for the given time ends: Complete with reason "", else Failed for
// reason.
func endedJobStatus(reason string, ran time.Duration) batchv1.JobStatus {
	now := metav1.Now()
	start := metav1.NewTime(now.Add(-ran))
	if reason == "" {
		return batchv1.JobStatus{StartTime: &start, Succeeded: 1, CompletionTime: &now, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}}
	}
	return batchv1.JobStatus{StartTime: &start, Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: now},
	}}
}
