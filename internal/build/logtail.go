package build

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/memo"
	"github.com/devloop-dev/devloop/internal/pods"
)

// runningTailInterval is how often a running build's log tail in status
// is brought up to date: often enough to see a long compile move, seldom
// enough that a build costs few status writes and log reads.
const runningTailInterval = 10 * time.Second

// refreshJobTail brings the log tail of a running builder Job up to date
// in status, at most every runningTailInterval: the end of its build
// container's log, read as the tenant like a failed build's, and the
// packages compiled so far (progress.go). A log that
// cannot be read (not started yet, no kubelet) leaves the tail as it was.
func (s *imageBuilds) refreshJobTail(ctx context.Context, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, jobPods []corev1.Pod) {
	s.next.RequeueWithin(runningTailInterval)
	if len(jobPods) == 0 || (s.e.LogsFor == nil && s.e.Logs == nil) {
		return
	}
	key := memo.Key(s.env.UID, "build-log/"+img.Name)
	if last, ok := s.e.recent.Get(key); ok && last.request == ist.Build.Job && time.Since(last.at) < runningTailInterval {
		return
	}
	s.e.recent.Put(key, memoEntry{request: ist.Build.Job, at: time.Now()})
	pod := newestPod(jobPods)
	if !started(pod, ContainerBuild) {
		return
	}
	logs, err := pods.ReaderFor(s.e.LogsFor, s.e.Logs, s.tenant)
	if err != nil || logs == nil {
		return
	}
	s.countJobProgress(ctx, logs, img.Name, ist.Build.Job, pod)
	out, err := logs.TailLog(ctx, s.env.Namespace, pod.Name, ContainerBuild, 40)
	if err != nil || out == "" {
		return
	}
	if len(out) > logTailBytes {
		out = out[len(out)-logTailBytes:]
	}
	ist.Build.LogTail = out
}

// newestPod is the pod created last (a Job's retry replaces its pod).
func newestPod(list []corev1.Pod) *corev1.Pod {
	newest := &list[0]
	for i := range list {
		if list[i].CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = &list[i]
		}
	}
	return newest
}

// started says whether the container has run or runs.
func started(pod *corev1.Pod, container string) bool {
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if cs.Name == container {
				return cs.State.Running != nil || cs.State.Terminated != nil
			}
		}
	}
	return false
}
