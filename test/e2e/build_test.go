//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// helloSource is a Go module whose main is mainGo.
func helloSource(mainGo string) Files {
	return Files{"go.mod": GoModule("example.com/hello"), "main.go": mainGo}
}

const helloMain = `package main

import "fmt"

func main() { fmt.Println("hello from a builder job") }
`

// TestBuilderJobCompilesInTheCluster: an image with a run step is compiled
// by a real builder Job (fetch, go build as a non-root user under the
// restricted profile, assemble and push by the operator's own image); the
// pushed image runs in a pod; a compile error reaches status with the real
// exit code and log tail.
func TestBuilderJobCompilesInTheCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := need(t)
	ns := namespace(t, "e2e-build")
	env := newEnv(ns, "hello").SourceRepository("hello-src").Registry().Components(
		Component("hello", Manifests(), Images(Image("hello", Base(busybox),
			Run(GoBuild(goImage, []string{"go", "build", "-o", "out/hello", "."}, GoPath)),
			Program("out/hello", "/hello"),
			Tags("{{ .ContentHash }}", "rev-{{ .ShortRevision }}"))))).Build()
	pushDir(t, env, sourceDir(t, helloSource(helloMain)))

	start := time.Now()
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = waitEnv(t, key, 5*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
	})
	img := env.Status.Components[0].Images[0]
	t.Logf("built %s@%s by job %s in %s, tags %v", img.Repository, img.Digest, img.Build.Job, time.Since(start).Round(time.Millisecond), img.Tags)
	g.Expect(img.Build.Result).To(Equal(v1alpha1.BuildSucceeded))

	// The pushed image runs.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "run-hello"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "hello", Image: img.Repository + "@" + img.Digest,
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		}}},
	}
	g.Expect(c.Client.Create(ctx, pod)).To(Succeed())
	pod = waitPod(t, poll.Wait{What: "pod run-hello ran to completion", Every: 500 * time.Millisecond, Within: time.Minute},
		client.ObjectKeyFromObject(pod), func(g Gomega, pod *corev1.Pod) {
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded))
		})
	logs, err := c.Clientset.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(logs)).To(Equal("hello from a builder job\n"))
	g.Expect(pod.Status.ContainerStatuses[0].ImageID).To(HaveSuffix(img.Digest))

	// A compile error: the real exit code and the compiler's words.
	pushDir(t, env, sourceDir(t, helloSource(strings.Replace(helloMain, "fmt.Println(", "fmt.Println(undefinedName, ", 1))))
	requestReconcile(t, env)
	env = waitEnv(t, key, 5*time.Minute, true, func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring("container build ended with exit code 1"))
		g.Expect(stalled.Message).To(ContainSubstring("undefined: undefinedName"))
	})
	b := env.Status.Components[0].Images[0].Build
	t.Logf("failed build %s: exit %d, log tail:\n%s", b.Job, *b.ExitCode, b.LogTail)
	g.Expect(b.LogTail).To(ContainSubstring("undefined: undefinedName"))
}
