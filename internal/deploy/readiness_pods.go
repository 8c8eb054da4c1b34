package deploy

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/message"
)

// stuckReasons are container waiting reasons that do not go away by
// themselves soon: the kubelet backs off and tries again, but something
// (an image reference, a registry, the program) must change.
var stuckReasons = map[string]bool{
	"ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// maxPodsLooked bounds the pods read per workload.
const maxPodsLooked = 20

// podTrouble says why a workload's pods cannot get going — the first pod
// with a container stuck (image pull, crash loop, bad config) or that no
// node can run — or "". Pods are read only for workloads that are not
// ready; a ServiceAccount that may not list pods just gets no detail.
func podTrouble(ctx context.Context, c client.Reader, o *unstructured.Unstructured) string {
	if why := replicaFailure(o); why != "" {
		return why
	}
	var selector map[string]any
	switch o.GroupVersionKind().GroupKind().String() {
	case "Deployment.apps", "StatefulSet.apps", "DaemonSet.apps", "ReplicaSet.apps", "Job.batch":
		selector, _, _ = unstructured.NestedMap(o.Object, "spec", "selector")
	case "Pod":
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, pod); err != nil {
			return ""
		}
		return podProblem(pod)
	default:
		return ""
	}
	if selector == nil {
		return ""
	}
	ls := &metav1.LabelSelector{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(selector, ls); err != nil {
		return ""
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil || sel.Empty() {
		return ""
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(o.GetNamespace()), client.MatchingLabelsSelector{Selector: sel}, client.Limit(maxPodsLooked)); err != nil {
		return ""
	}
	for i := range pods.Items {
		if p := podProblem(&pods.Items[i]); p != "" {
			return p
		}
	}
	return ""
}

// podProblem is why one pod cannot get going, or "".
func podProblem(pod *corev1.Pod) string {
	if !pod.DeletionTimestamp.IsZero() {
		return ""
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		w := cs.State.Waiting
		if w == nil || !stuckReasons[w.Reason] {
			continue
		}
		msg := fmt.Sprintf("pod %s: container %s (image %s): %s", pod.Name, cs.Name, imageOf(pod, cs), w.Reason)
		if w.Message != "" {
			msg += ": " + oneLine(w.Message)
		}
		return message.Truncate(msg, 512)
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			return message.Truncate(fmt.Sprintf("pod %s: Unschedulable: %s", pod.Name, oneLine(cond.Message)), 512)
		}
	}
	return ""
}

// imageOf is the image a container was asked to run (the status may hold
// what the node resolved instead).
func imageOf(pod *corev1.Pod, cs corev1.ContainerStatus) string {
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name == cs.Name {
			return c.Image
		}
	}
	return cs.Image
}

// oneLine folds whitespace runs, newlines included, into single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// replicaFailure is why a Deployment or ReplicaSet could not create its
// pods — Pod Security, a quota, an admission webhook refused them — from
// its ReplicaFailure condition, or "". There are no pods to read then, and
// "Replicas: 0/1" alone says nothing of why (Dynamo's chart in a namespace
// enforcing restricted).
func replicaFailure(o *unstructured.Unstructured) string {
	switch o.GroupVersionKind().GroupKind().String() {
	case "Deployment.apps", "ReplicaSet.apps":
	default:
		return ""
	}
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != "ReplicaFailure" || m["status"] != "True" {
			continue
		}
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		return message.Truncate(fmt.Sprintf("pods not created (%s): %s", reason, oneLine(msg)), 512)
	}
	return ""
}
