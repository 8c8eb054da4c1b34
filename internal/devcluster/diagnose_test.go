package devcluster

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clientfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestRolloutFailureNamesWhatHoldsThePod: an operator pod never scheduled
// because the node is tainted disk-pressure used to read "no pod reports a
// problem"; the description now names the pod's unscheduled condition and
// the node's taint, and shows the log of a running container that is not
// ready.
func TestRolloutFailureNamesWhatHoldsThePod(t *testing.T) {
	pending := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "devloop-manager-1", Namespace: "devloop-system"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/disk-pressure: }",
		}}},
	}
	unready := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "devloop-registry-1", Namespace: "devloop-system"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "registry", RestartCount: 2,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}},
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "devloop"},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.kubernetes.io/disk-pressure", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, Message: "kubelet has disk pressure"},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		}},
	}
	c := &Cluster{
		Client:    clientfake.NewClientBuilder().WithObjects(pending, unready, node).Build(),
		Clientset: fake.NewClientset(unready),
	}
	pods := c.describePods("devloop-system")
	for _, want := range []string{
		"pod devloop-manager-1: Pending; PodScheduled=False Unschedulable 0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/disk-pressure: }",
		"container registry: ready=false restarts=2 running since",
		"    | fake logs", // the fake clientset's log of the running, unready container
	} {
		if !strings.Contains(pods, want) {
			t.Errorf("pods described as\n%s\nwant %q in it", pods, want)
		}
	}
	nodes := c.nodeProblems()
	want := "node devloop: DiskPressure=True kubelet has disk pressure; node devloop: taint node.kubernetes.io/disk-pressure:NoSchedule"
	if nodes != want {
		t.Errorf("node problems %q, want %q", nodes, want)
	}
	if got := c.describePods("elsewhere"); got != "no pod in namespace elsewhere" {
		t.Errorf("empty namespace described as %q", got)
	}
}
