//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/devloop-dev/devloop/internal/source"
)

func pushHelloSource(t *testing.T, ctx context.Context, repo, mainGo string) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"go.mod": "module example.com/hello\n\ngo 1.26\n", "main.go": mainGo}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := source.PushDir(ctx, dir, repo+":dev", true); err != nil {
		t.Fatal(err)
	}
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
	golang := goImage
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace(t, "e2e-build")}}
	srcRepo := registry + "/" + ns.Name + "/hello-src"
	pushHelloSource(t, ctx, srcRepo, helloMain)

	env := &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "hello"},
		Spec: v1alpha1.DevEnvironmentSpec{
			ServiceAccountName: "deployer",
			Registry:           &v1alpha1.RegistrySpec{Prefix: registry + "/" + ns.Name, Insecure: true},
			Sources: []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{
				Repository: srcRepo, Tag: "dev", Insecure: true}}},
			Components: []v1alpha1.Component{{
				Name: "hello",
				Images: []v1alpha1.ImageSpec{{
					Name: "hello", Source: "app", Base: registry + "/busybox:1.35",
					Run: &v1alpha1.BuildRun{Image: golang, Command: []string{"go", "build", "-o", "out/hello", "."},
						Env: []v1alpha1.EnvVar{{Name: "CGO_ENABLED", Value: "0"}, {Name: "GOTOOLCHAIN", Value: "local"},
							{Name: "GOFLAGS", Value: "-buildvcs=false"}, {Name: "GOPATH", Value: "/tmp/go"}}},
					Layers:     []v1alpha1.LayerMapping{{From: "out/hello", To: "/hello", Mode: "0755"}},
					Entrypoint: []string{"/hello"},
					Tags:       []string{"{{ .ContentHash }}", "rev-{{ .ShortRevision }}"},
				}},
				Manifests: &v1alpha1.ManifestsSpec{Source: "app"},
			}},
		},
	}
	start := time.Now()
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	g.Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(ctx, key, env)).To(Succeed())
		ready := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		if meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionStalled) {
			StopTrying("stalled: " + ready.Message).Now()
		}
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
	}, 5*time.Minute, time.Second).Should(Succeed())
	img := env.Status.Components[0].Images[0]
	t.Logf("built %s@%s by job %s in %s, tags %v", img.Repository, img.Digest, img.Build.Job, time.Since(start).Round(time.Millisecond), img.Tags)
	g.Expect(img.Build.Result).To(Equal(v1alpha1.BuildSucceeded))

	// The pushed image runs.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "run-hello"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "hello", Image: img.Repository + "@" + img.Digest,
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		}}},
	}
	g.Expect(c.Client.Create(ctx, pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded))
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
	logs, err := c.Clientset.CoreV1().Pods(ns.Name).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(logs)).To(Equal("hello from a builder job\n"))
	g.Expect(pod.Status.ContainerStatuses[0].ImageID).To(HaveSuffix(img.Digest))

	// A compile error: the real exit code and the compiler's words.
	pushHelloSource(t, ctx, srcRepo, strings.Replace(helloMain, "fmt.Println(", "fmt.Println(undefinedName, ", 1))
	g.Expect(c.Client.Get(ctx, key, env)).To(Succeed())
	patch := client.MergeFrom(env.DeepCopy())
	env.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: fmt.Sprint(time.Now().UnixNano())}
	g.Expect(c.Client.Patch(ctx, env, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(ctx, key, env)).To(Succeed())
		stalled := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring("container build ended with exit code 1"))
		g.Expect(stalled.Message).To(ContainSubstring("undefined: undefinedName"))
	}, 5*time.Minute, time.Second).Should(Succeed())
	b := env.Status.Components[0].Images[0].Build
	t.Logf("failed build %s: exit %d, log tail:\n%s", b.Job, *b.ExitCode, b.LogTail)
	g.Expect(b.LogTail).To(ContainSubstring("undefined: undefinedName"))
}
