package build

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/internal/memo"
)

// jobDisruption is what status says of job's disrupted pod while the Job
// runs: what its pods say now, else what they said before. The evicted
// pod is removed once its grace period ends, long before the build its
// replacement runs is done, so what was seen is remembered (by the Job's
// UID: a Job started again is another).
func (s *imageBuilds) jobDisruption(job *batchv1.Job, jobPods []corev1.Pod) string {
	key := memo.Key(s.env.UID, "disrupted/"+string(job.UID))
	if note := disruptedPod(jobPods); note != "" {
		s.e.disruptions.Put(key, note)
		return note
	}
	note, _ := s.e.disruptions.Get(key)
	return note
}

// forgetDisruption drops what was remembered of job once it ended.
func (s *imageBuilds) forgetDisruption(job *batchv1.Job) {
	s.e.disruptions.Delete(memo.Key(s.env.UID, "disrupted/"+string(job.UID)))
}

// disruptedPod says which of a running builder Job's pods a disruption
// stopped (a drain's eviction, a preemption, its node gone), naming the
// node and the cluster's reason, so status says why the build started
// again on another node: "its pod on node devloop was stopped
// (EvictionByEvictionAPI); a new pod goes on". "" when none was. The Job
// counts no such pod as a failure (pods.RetryDisrupted).
func disruptedPod(jobPods []corev1.Pod) string {
	for i := range jobPods {
		if node, reason, ok := disruption(&jobPods[i]); ok {
			return fmt.Sprintf("its pod on node %s was stopped (%s); a new pod goes on", node, reason)
		}
	}
	return ""
}

// disruption is the node and the reason of a disruption that stopped
// pod, ok false when none did.
func disruption(pod *corev1.Pod) (node, reason string, ok bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue {
			continue
		}
		node, reason = pod.Spec.NodeName, c.Reason
		if node == "" {
			node = "?"
		}
		if reason == "" {
			reason = "disrupted"
		}
		return node, reason, true
	}
	return "", "", false
}
