package controllers

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
)

// TestRunningWarmBuildShowsItsLogTail is issue 18 item 11 in status: a
// warm build still compiling has the end of its output in
// status.components[].images[].build.logTail, brought up to date while it
// runs, not only once it failed.
func TestRunningWarmBuildShowsItsLogTail(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	suiteExec.hangIn(ns)
	// The fetch step succeeds; the run step compiles until it is stopped.
	suiteExec.set(func(_ []string, _, _ io.Writer) error { return nil })
	reg.pushSource(t, ns+"/src", "dev", map[string]string{"cmd/api/main.go": "package main // " + ns + "\n"})
	deployer(t, ns, "deployer", true)
	env := apiEnv(ns)
	env.Spec.ServiceAccountName = "deployer"
	img := &env.Spec.Components[0].Images[0]
	img.Platforms = []string{"linux/amd64"}
	img.Run.KeepWarm = true
	img.Run.Timeout = &metav1.Duration{Duration: time.Minute}
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	pod := &corev1.Pod{}
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: build.WarmPodName("api", "api", "linux/amd64")}, pod)
	}, timeout).Should(Succeed())
	pod.Status.Phase = corev1.PodRunning
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
	g.Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
	env = eventually(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		st := imageOf(env, "api", "api")
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Build).NotTo(BeNil())
		g.Expect(st.Build.Result).To(Equal(v1alpha1.BuildRunning))
		g.Expect(st.Build.LogTail).To(ContainSubstring("compiling forever"))
	})
	expectKstatus(t, env, status.InProgressStatus)
}
