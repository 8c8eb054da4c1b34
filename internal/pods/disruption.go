package pods

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// RetryDisrupted is the pod failure policy of devloop's Jobs: a pod
// stopped by a disruption (a node drained, an eviction, a preemption, a
// node gone) does not count against the Job's backoff limit of 0, so the
// Job controller starts a new pod on another node and the build or test
// run goes on there without anyone's help. A pod that failed by itself
// still fails the Job at once: the same inputs would fail again.
func RetryDisrupted() *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
		},
	}}}
}
