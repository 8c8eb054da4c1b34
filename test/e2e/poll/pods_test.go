package poll

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(name string, phase corev1.PodPhase, ready bool) corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestReadyPodsRunAreReadyAndStay(t *testing.T) {
	g := NewWithT(t)
	leaving := pod("leaving", corev1.PodRunning, true)
	leaving.DeletionTimestamp = &metav1.Time{}
	pods := []corev1.Pod{pod("new", corev1.PodPending, false), pod("web", corev1.PodRunning, true),
		pod("starting", corev1.PodRunning, false), leaving, pod("done", corev1.PodSucceeded, false)}
	g.Expect(names(Ready(pods))).To(Equal([]string{"web"}))
	g.Expect(names(Live(pods))).To(Equal([]string{"new", "web", "starting", "done"}))
}

func TestDescribePodsSaysWhatAWaitSaw(t *testing.T) {
	g := NewWithT(t)
	g.Expect(DescribePods(nil)).To(Equal("no pods"))
	web := pod("web-1", corev1.PodRunning, true)
	web.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", ImageID: "r/web@sha256:ab", RestartCount: 2}}
	pulling := pod("web-2", corev1.PodPending, false)
	pulling.DeletionTimestamp = &metav1.Time{}
	pulling.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
	g.Expect(DescribePods([]corev1.Pod{web, pulling})).To(Equal(
		"web-1 Running Ready, web r/web@sha256:ab (2 restarts); web-2 Pending terminating, web waiting: ImagePullBackOff"))
}
