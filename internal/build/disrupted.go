package build

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// disruptedPod says which of a running builder Job's pods a disruption
// stopped (a drain's eviction, a preemption, its node gone), naming the
// node and the cluster's reason, so status says why the build started
// again on another node: "its pod on node devloop was stopped
// (EvictionByEvictionAPI); a new pod goes on". "" when none was. The Job
// counts no such pod as a failure (pods.RetryDisrupted).
func disruptedPod(jobPods []corev1.Pod) string {
	for _, p := range jobPods {
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue {
				continue
			}
			node := p.Spec.NodeName
			if node == "" {
				node = "?"
			}
			reason := c.Reason
			if reason == "" {
				reason = "disrupted"
			}
			return fmt.Sprintf("its pod on node %s was stopped (%s); a new pod goes on", node, reason)
		}
	}
	return ""
}
