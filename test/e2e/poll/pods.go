package poll

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Live are the pods not being deleted.
func Live(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// Ready are the live pods that run and are Ready.
func Ready(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range Live(pods) {
		if p.Status.Phase == corev1.PodRunning && IsReady(&p) {
			out = append(out, p)
		}
	}
	return out
}

// IsReady says whether the pod's Ready condition is True.
func IsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DescribePods says what a pod wait saw: each pod's name, phase,
// readiness, first container's image ID and restarts, and the reason a
// container waits (ImagePullBackOff, CrashLoopBackOff).
func DescribePods(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "no pods"
	}
	parts := make([]string, 0, len(pods))
	for i := range pods {
		parts = append(parts, describePod(&pods[i]))
	}
	return strings.Join(parts, "; ")
}

func describePod(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", p.Name, p.Status.Phase)
	if IsReady(p) {
		b.WriteString(" Ready")
	}
	if p.DeletionTimestamp != nil {
		b.WriteString(" terminating")
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, ", %s", cs.Name)
		if cs.ImageID != "" {
			fmt.Fprintf(&b, " %s", cs.ImageID)
		}
		if cs.RestartCount > 0 {
			fmt.Fprintf(&b, " (%d restarts)", cs.RestartCount)
		}
		if w := cs.State.Waiting; w != nil {
			fmt.Fprintf(&b, " waiting: %s", w.Reason)
		}
	}
	return b.String()
}
