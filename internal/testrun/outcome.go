package testrun

import (
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Outcome is what a run's Job and pods say about the run.
type Outcome struct {
	// Result is Running until the Job ends (or its pod cannot start).
	Result v1alpha1.TestResult
	// ExitCode of the test container, when it ran to an end.
	ExitCode *int32
	// Message explains results the log does not: a timeout, a pod that
	// could not start, a fetch that failed.
	Message string
	// Pod and Container are where the telling log is.
	Pod, Container string
	// Started is true once the test container runs or ran: from then on
	// only the Job's own status changes matter.
	Started bool
	// Stuck is true for a Running outcome whose pod is waiting to start:
	// it becomes Error if it still waits after the start timeout.
	Stuck bool
	// CompletionTime is when the Job ended.
	CompletionTime *metav1.Time
	// StopJob is true when the run ended but the Job is still active (a
	// pod that can never start): the Job must be deleted.
	StopJob bool
}

// startFailures are the waiting reasons of a container that will not
// start by itself soon. InvalidImageName never will; the others get the
// start timeout, since a registry can come back or a Secret be created.
var startFailures = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}

// Read interprets a run's Job and its pods at time now. A pod whose
// containers wait with a start failure for longer than startTimeout (or
// with InvalidImageName at all) ends the run with Error.
func Read(job *batchv1.Job, pods []corev1.Pod, now time.Time, startTimeout time.Duration) Outcome {
	out := Outcome{Result: v1alpha1.ResultRunning}
	var finished, failed bool
	var cond batchv1.JobCondition
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			finished = true
		case batchv1.JobFailed:
			finished, failed, cond = true, true, c
		}
	}
	pod := newestPod(pods)
	if pod != nil {
		out.Pod = pod.Name
		out.Container = ContainerTest
	}
	test := containerStatus(pod, ContainerTest, false)
	fetch := containerStatus(pod, ContainerFetch, true)
	if test != nil && (test.State.Running != nil || test.State.Terminated != nil) {
		out.Started = true
	}
	if finished {
		out.CompletionTime = job.Status.CompletionTime
		if out.CompletionTime == nil {
			out.CompletionTime = conditionTime(job, cond)
		}
	}
	switch {
	case finished && !failed:
		out.Result = v1alpha1.ResultPassed
		out.ExitCode = ptr.To[int32](0)
		if test != nil && test.State.Terminated != nil {
			out.ExitCode = ptr.To(test.State.Terminated.ExitCode)
		}
	case finished && cond.Reason == batchv1.JobReasonDeadlineExceeded:
		out.Result = v1alpha1.ResultTimedOut
		out.Message = fmt.Sprintf("did not finish within its timeout of %s", deadline(job))
		if pod == nil {
			out.Message += "; no pod ever ran (kubectl describe job/" + job.Name + " says why)"
		} else if !out.Started {
			out.Message += "; the test container never started" + waitingDetail(pod)
		}
		if t := terminated(test); t != nil {
			out.ExitCode = ptr.To(t.ExitCode)
		}
	case finished:
		out.Result, out.Message = failure(job, cond, pod, test, fetch, &out)
	default:
		if pod != nil && !out.Started {
			reason, msg, since := startFailure(pod)
			if reason != "" {
				out.Stuck = true
				if reason == "InvalidImageName" || now.Sub(since) >= startTimeout {
					out.Result, out.StopJob = v1alpha1.ResultError, true
					out.Message = fmt.Sprintf("the pod could not start: %s", strings.TrimSpace(reason+": "+msg))
					out.CompletionTime = &metav1.Time{Time: now}
				}
			}
		}
	}
	return out
}

// failure explains a Job that failed other than by its deadline.
func failure(job *batchv1.Job, cond batchv1.JobCondition, pod *corev1.Pod, test, fetch *corev1.ContainerStatus, out *Outcome) (v1alpha1.TestResult, string) {
	if t := terminated(test); t != nil && t.ExitCode != 0 {
		out.ExitCode = ptr.To(t.ExitCode)
		msg := ""
		if t.Reason != "" && t.Reason != "Error" {
			msg = "the test container was " + t.Reason // OOMKilled
		}
		return v1alpha1.ResultFailed, msg
	}
	if t := terminated(fetch); t != nil && t.ExitCode != 0 {
		out.Container = ContainerFetch
		return v1alpha1.ResultError, fmt.Sprintf("fetching the source failed with exit code %d", t.ExitCode)
	}
	if pod != nil && pod.Status.Reason != "" {
		return v1alpha1.ResultError, strings.TrimSpace(fmt.Sprintf("the pod failed: %s %s", pod.Status.Reason, pod.Status.Message))
	}
	return v1alpha1.ResultError, strings.TrimSpace(fmt.Sprintf("the Job failed without a test result: %s %s", cond.Reason, cond.Message))
}

func terminated(cs *corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	if cs == nil {
		return nil
	}
	return cs.State.Terminated
}

// startFailure is the first container of pod waiting with a start
// failure, with how long the pod has existed.
func startFailure(pod *corev1.Pod) (reason, message string, since time.Time) {
	for _, cs := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && slices.Contains(startFailures, w.Reason) {
			return w.Reason, "container " + cs.Name + ": " + w.Message, pod.CreationTimestamp.Time
		}
	}
	return "", "", time.Time{}
}

func waitingDetail(pod *corev1.Pod) string {
	for _, cs := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return fmt.Sprintf(" (container %s: %s)", cs.Name, w.Reason)
		}
	}
	return ""
}

func containerStatus(pod *corev1.Pod, name string, init bool) *corev1.ContainerStatus {
	if pod == nil {
		return nil
	}
	list := pod.Status.ContainerStatuses
	if init {
		list = pod.Status.InitContainerStatuses
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// newestPod is the Job's latest pod; with backoffLimit 0 there is one,
// unless a pod was replaced after an eviction.
func newestPod(pods []corev1.Pod) *corev1.Pod {
	var p *corev1.Pod
	for i := range pods {
		if p == nil || pods[i].CreationTimestamp.After(p.CreationTimestamp.Time) {
			p = &pods[i]
		}
	}
	return p
}

func conditionTime(job *batchv1.Job, c batchv1.JobCondition) *metav1.Time {
	if !c.LastTransitionTime.IsZero() {
		return &c.LastTransitionTime
	}
	for _, jc := range job.Status.Conditions {
		if jc.Type == batchv1.JobComplete && !jc.LastTransitionTime.IsZero() {
			return &jc.LastTransitionTime
		}
	}
	return nil
}

func deadline(job *batchv1.Job) time.Duration {
	if job.Spec.ActiveDeadlineSeconds == nil {
		return 0
	}
	return time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second
}
