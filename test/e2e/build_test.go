//go:build e2e

// Package e2e runs devloop against the real single-node cluster of
// hack/cluster (make cluster-up): real pods, real Jobs, the real registry.
//
//	make cluster-up && go test -tags e2e ./test/e2e/ -v -count=1
package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// The cluster's registry: one name for pushes from the host and from pods
// and for pulls by the node (hack/cluster/README.md).
const clusterRegistry = "10.250.0.1:5000"

// cluster is what a test needs of the running cluster.
type cluster struct {
	kubeconfig string
	k8s        client.Client
	clientset  kubernetes.Interface
}

func connect(t *testing.T) *cluster {
	t.Helper()
	kubeconfig := filepath.Join(testenv.RepoRoot(), "bin", "cluster", "kubeconfig")
	if _, err := os.Stat(kubeconfig); err != nil {
		t.Skipf("no local cluster (%v): run `make cluster-up` first", err)
	}
	if resp, err := http.Get("http://" + clusterRegistry + "/v2/"); err != nil {
		t.Skipf("the cluster's registry does not answer (%v): run `make cluster-up` first", err)
	} else {
		resp.Body.Close()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{kubeconfig: kubeconfig, k8s: k8s, clientset: kubernetes.NewForConfigOrDie(cfg)}
}

// buildImages makes the operator image (the helper of builder pods) and a
// Go builder image from this machine's Go, both with devloop's own builder,
// ko-style: no Docker, no public registry.
func buildImages(t *testing.T, ctx context.Context) (helper, golang string) {
	t.Helper()
	b, err := build.NewBuilder(build.Registry{Prefix: clusterRegistry + "/devloop", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	noTags := func(string) ([]string, error) { return nil, nil }

	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, "manager"), "./cmd/manager")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build manager: %v\n%s", err, out)
	}
	start := time.Now()
	res, err := b.Build(ctx, build.Image{Name: "manager",
		Layers:     []v1alpha1.LayerMapping{{From: "manager", To: "/manager", Mode: "0755"}},
		Entrypoint: []string{"/manager"}, User: "65532:65532"}, bin, noTags)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("operator image %s@%s in %s", res.Repository, res.Digest, time.Since(start).Round(time.Millisecond))
	helper = res.Repository + "@" + res.Digest

	start = time.Now()
	goroot := "/usr/local/go"
	var layers []v1alpha1.LayerMapping
	for _, p := range []string{"bin", "pkg", "src", "go.env", "VERSION"} {
		layers = append(layers, v1alpha1.LayerMapping{From: "go/" + p, To: goroot + "/" + p})
	}
	res, err = b.Build(ctx, build.Image{Name: "golang", Base: clusterRegistry + "/busybox:1.35", Layers: layers,
		Env: []v1alpha1.EnvVar{{Name: "PATH", Value: goroot + "/bin:/bin"}}}, filepath.Dir(goroot), noTags)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Go builder image %s@%s in %s", res.Repository, res.Digest, time.Since(start).Round(time.Millisecond))
	return helper, res.Repository + "@" + res.Digest
}

// startOperator runs the operator binary on the host against the cluster.
func startOperator(t *testing.T, c *cluster, helper string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "manager")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build manager: %v\n%s", err, out)
	}
	logPath := filepath.Join(testenv.RepoRoot(), "bin", "e2e-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	op := exec.Command(bin, "--kubeconfig", c.kubeconfig, "--helper-image", helper, "--log-format", "console",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--work-dir", t.TempDir())
	op.Stdout, op.Stderr = logFile, logFile
	if err := op.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = op.Process.Signal(os.Interrupt)
		_ = op.Wait()
		logFile.Close()
		t.Logf("operator log: %s", logPath)
	})
}

// installCRD applies the CRD with server-side apply, as `kubectl apply`.
func installCRD(t *testing.T, c *cluster) {
	t.Helper()
	crd := filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "devloop.dev_devenvironments.yaml")
	kubectl := filepath.Join(testenv.RepoRoot(), "bin", "k8s", "v1.36.3-etcd3.6.8", "kubectl")
	out, err := exec.Command(kubectl, "--kubeconfig", c.kubeconfig, "apply", "--server-side", "-f", crd).CombinedOutput()
	if err != nil {
		t.Fatalf("installing the CRD: %v\n%s", err, out)
	}
	out, err = exec.Command(kubectl, "--kubeconfig", c.kubeconfig, "wait", "--for=condition=Established", "crd/devenvironments.devloop.dev").CombinedOutput()
	if err != nil {
		t.Fatalf("waiting for the CRD: %v\n%s", err, out)
	}
}

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
	c := connect(t)
	helper, golang := buildImages(t, ctx)
	installCRD(t, c)
	startOperator(t, c, helper)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-build-",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	g.Expect(c.k8s.Create(ctx, ns)).To(Succeed())
	t.Cleanup(func() { _ = c.k8s.Delete(context.Background(), ns) })
	g.Expect(testenv.CreateDeployer(ctx, c.k8s, ns.Name, "deployer")).To(Succeed())
	srcRepo := clusterRegistry + "/" + ns.Name + "/hello-src"
	pushHelloSource(t, ctx, srcRepo, helloMain)

	env := &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "hello"},
		Spec: v1alpha1.DevEnvironmentSpec{
			ServiceAccountName: "deployer",
			Registry:           &v1alpha1.RegistrySpec{Prefix: clusterRegistry + "/" + ns.Name, Insecure: true},
			Sources: []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{
				Repository: srcRepo, Tag: "dev", Insecure: true}}},
			Components: []v1alpha1.Component{{
				Name: "hello",
				Images: []v1alpha1.ImageSpec{{
					Name: "hello", Source: "app", Base: clusterRegistry + "/busybox:1.35",
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
	g.Expect(c.k8s.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	g.Eventually(func(g Gomega) {
		g.Expect(c.k8s.Get(ctx, key, env)).To(Succeed())
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
	g.Expect(c.k8s.Create(ctx, pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded))
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
	logs, err := c.clientset.CoreV1().Pods(ns.Name).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(logs)).To(Equal("hello from a builder job\n"))
	g.Expect(pod.Status.ContainerStatuses[0].ImageID).To(HaveSuffix(img.Digest))

	// A compile error: the real exit code and the compiler's words.
	pushHelloSource(t, ctx, srcRepo, strings.Replace(helloMain, "fmt.Println(", "fmt.Println(undefinedName, ", 1))
	g.Expect(c.k8s.Get(ctx, key, env)).To(Succeed())
	patch := client.MergeFrom(env.DeepCopy())
	env.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: fmt.Sprint(time.Now().UnixNano())}
	g.Expect(c.k8s.Patch(ctx, env, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.k8s.Get(ctx, key, env)).To(Succeed())
		stalled := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring("container build ended with exit code 1"))
		g.Expect(stalled.Message).To(ContainSubstring("undefined: undefinedName"))
	}, 5*time.Minute, time.Second).Should(Succeed())
	b := env.Status.Components[0].Images[0].Build
	t.Logf("failed build %s: exit %d, log tail:\n%s", b.Job, *b.ExitCode, b.LogTail)
	g.Expect(b.LogTail).To(ContainSubstring("undefined: undefinedName"))
}
