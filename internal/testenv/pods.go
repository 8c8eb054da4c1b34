package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MarkPodRunning writes the status a kubelet reports for pod once all its
// containers run: phase Running, every container Running, and the pod and
// its containers Ready or not as ready says. envtest runs no kubelet, so
// a test that needs a running pod plays its part with this.
func MarkPodRunning(t testing.TB, k8s client.Client, pod *corev1.Pod, ready bool) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: ready,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		})
	}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatalf("marking pod %s/%s running: %v", pod.Namespace, pod.Name, err)
	}
}
