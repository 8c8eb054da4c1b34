package testrun

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func job(conds ...batchv1.JobCondition) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "env-unit-1"},
		Spec:   batchv1.JobSpec{ActiveDeadlineSeconds: ptr.To[int64](600)},
		Status: batchv1.JobStatus{Conditions: conds}}
}

func cond(typ batchv1.JobConditionType, reason string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(t0)}
}

func pod(init []corev1.ContainerStatus, main ...corev1.ContainerStatus) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "env-unit-1-abcde", CreationTimestamp: metav1.NewTime(t0)},
		Status: corev1.PodStatus{InitContainerStatuses: init, ContainerStatuses: main}}
}

func exited(name string, code int32, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}
}

func waiting(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "pull access denied"}}}
}

func running(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func TestRead(t *testing.T) {
	grace := time.Minute
	cases := []struct {
		name  string
		job   *batchv1.Job
		pods  []corev1.Pod
		now   time.Time
		check func(g Gomega, o Outcome)
	}{
		{"passed", job(cond(batchv1.JobComplete, "")), []corev1.Pod{pod(nil, exited("test", 0, "Completed"))}, t0, func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultPassed))
			g.Expect(*o.ExitCode).To(BeZero())
			g.Expect(o.Pod).To(Equal("env-unit-1-abcde"))
			g.Expect(o.Container).To(Equal(ContainerTest))
			g.Expect(o.CompletionTime.Time).To(Equal(t0))
		}},
		{"failed with exit code", job(cond(batchv1.JobFailed, "BackoffLimitExceeded")), []corev1.Pod{pod([]corev1.ContainerStatus{exited("fetch", 0, "Completed")}, exited("test", 2, "Error"))}, t0, func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultFailed))
			g.Expect(*o.ExitCode).To(Equal(int32(2)))
			g.Expect(o.Message).To(BeEmpty(), "the log says why")
		}},
		{"OOM killed", job(cond(batchv1.JobFailed, "BackoffLimitExceeded")), []corev1.Pod{pod(nil, exited("test", 137, "OOMKilled"))}, t0, func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultFailed))
			g.Expect(o.Message).To(Equal("the test container was OOMKilled"))
		}},
		{"timed out while running", job(cond(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded)), []corev1.Pod{pod(nil, exited("test", 137, "Error"))}, t0, func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultTimedOut))
			g.Expect(o.Message).To(Equal("did not finish within its timeout of 10m0s"))
			g.Expect(*o.ExitCode).To(Equal(int32(137)))
		}},
		{"timed out with no pod", job(cond(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded)), nil, t0, func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultTimedOut))
			g.Expect(o.Message).To(ContainSubstring("no pod ever ran (kubectl describe job/env-unit-1 says why)"))
		}},
		{"fetch failed", job(cond(batchv1.JobFailed, "BackoffLimitExceeded")), []corev1.Pod{pod([]corev1.ContainerStatus{exited("fetch", 1, "Error")}, waiting("test", "PodInitializing"))}, t0, func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultError))
			g.Expect(o.Message).To(Equal("fetching the source failed with exit code 1"))
			g.Expect(o.Container).To(Equal(ContainerFetch))
		}},
		{"evicted", job(cond(batchv1.JobFailed, "BackoffLimitExceeded")), []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Reason: "Evicted", Message: "node low on memory"}}}, t0, func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultError))
			g.Expect(o.Message).To(Equal("the pod failed: Evicted node low on memory"))
		}},
		{"job failed without pods", job(cond(batchv1.JobFailed, "PodFailurePolicy")), nil, t0, func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultError))
			g.Expect(o.Message).To(ContainSubstring("the Job failed without a test result: PodFailurePolicy"))
		}},
		{"running", job(), []corev1.Pod{pod(nil, running("test"))}, t0.Add(time.Hour), func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultRunning))
			g.Expect(o.Started).To(BeTrue())
			g.Expect(o.Stuck).To(BeFalse())
		}},
		{"no pod yet", job(), nil, t0, func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultRunning))
			g.Expect(o.Started).To(BeFalse())
		}},
		{"image pull failing, within the start timeout", job(), []corev1.Pod{pod(nil, waiting("test", "ImagePullBackOff"))}, t0.Add(grace / 2), func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultRunning))
			g.Expect(o.Stuck).To(BeTrue())
		}},
		{"image pull failing past the start timeout", job(), []corev1.Pod{pod(nil, waiting("test", "ImagePullBackOff"))}, t0.Add(grace), func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultError))
			g.Expect(o.StopJob).To(BeTrue())
			g.Expect(o.Message).To(Equal("the pod could not start: ImagePullBackOff: container test: pull access denied"))
			g.Expect(o.CompletionTime.Time).To(Equal(t0.Add(grace)))
		}},
		{"invalid image name at once", job(), []corev1.Pod{pod(nil, waiting("test", "InvalidImageName"))}, t0, func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultError))
		}},
		{"fetch image failing", job(), []corev1.Pod{pod([]corev1.ContainerStatus{waiting("fetch", "ErrImagePull")}, waiting("test", "PodInitializing"))}, t0.Add(2 * grace), func(g Gomega, o Outcome) {
			g.Expect(o.Result).To(Equal(v1alpha1.ResultError))
			g.Expect(o.Message).To(ContainSubstring("container fetch"))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.check(NewWithT(t), Read(c.job, c.pods, c.now, grace))
		})
	}
}
