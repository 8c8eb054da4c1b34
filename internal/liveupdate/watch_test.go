package liveupdate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// TestLivePodEventsConcernTheirEnvironment: which events of a pod
// labelled as supervised reconcile the environment whose template it
// runs (branch logic; TestLiveUpdateDecidesPerChangedPath shows the watch
// syncing a pod started later on envtest, the e2e test on a kubelet).
func TestLivePodEventsConcernTheirEnvironment(t *testing.T) {
	env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "dev"}}
	env.Spec.Registry = &v1alpha1.RegistrySpec{PullPrefix: "reg:5000/team"}
	status := func(digest, template, live string) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Images: []v1alpha1.ImageStatus{{
			Name: "web", Repository: "push:5000/team/web", Digest: digest, TemplateDigest: template, LiveDigest: live}}}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	creating := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	crashLoop := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	exited := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}
	pod := func(image, annotation string, state corev1.ContainerState) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-1",
			Annotations: map[string]string{v1alpha1.LiveDigestAnnotation: annotation}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar", Image: "proxy"}, {Name: "web", Image: image}}}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "sidecar", State: running}, {Name: "web", State: state}}
		return p
	}
	const a, b = "reg:5000/team/web@sha256:a", "reg:5000/team/web@sha256:b"
	cases := []struct {
		name                   string
		digest, template, live string
		pod                    *corev1.Pod
		want                   bool
	}{
		{"started after a live update, not synced", "sha256:b", "sha256:a", "sha256:b", pod(a, "", running), true},
		{"synced to the live update", "sha256:b", "sha256:a", "sha256:b", pod(a, "sha256:b", running), false},
		{"synced to an older live update", "sha256:b", "sha256:a", "sha256:b", pod(a, "sha256:x", running), true},
		{"still starting", "sha256:b", "sha256:a", "sha256:b", pod(a, "", creating), false},
		{"crash loop after a live update", "sha256:b", "sha256:a", "sha256:b", pod(a, "sha256:b", crashLoop), true},
		{"exited, between a crash and its restart", "sha256:b", "sha256:a", "sha256:b", pod(a, "sha256:b", exited), true},
		{"a template of the newest digest: told it is current", "sha256:b", "sha256:b", "", pod(b, "", running), true},
		{"a template of the newest digest, told so", "sha256:b", "sha256:b", "", pod(b, "sha256:b", running), false},
		{"another template's pod", "sha256:b", "sha256:b", "", pod(a, "", running), false},
		{"a rollout is due: nothing to sync", "sha256:b", "sha256:a", "", pod(a, "", running), false},
		{"no live-updatable template yet", "sha256:b", "", "", pod(b, "", running), false},
	}
	for _, tc := range cases {
		status(tc.digest, tc.template, tc.live)
		if got := concerns(env, tc.pod); got != tc.want {
			t.Errorf("%s: concerns = %v, want %v", tc.name, got, tc.want)
		}
	}
}
