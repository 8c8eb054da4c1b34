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
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/cli"
	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/internal/source"
)

const registry = devcluster.Registry

// namespace makes a restricted namespace with the deployer ServiceAccount;
// it is deleted after the test unless the test failed (to look at).
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	c := need(t)
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e6)
	NewWithT(t).Expect(c.PrepareNamespace(context.Background(), name)).To(Succeed())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("keeping namespace %s to look at", name)
			return
		}
		_ = c.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return name
}

// sampleIn is config/samples/dev's environment moved to namespace ns: its
// registry prefix and source repository under ns.
func sampleIn(t *testing.T, ns string) *v1alpha1.DevEnvironment {
	t.Helper()
	env, err := need(t).Sample()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	env.Namespace = ns
	env.Spec.Registry.Prefix = registry + "/" + ns
	env.Spec.Sources[0].OCI.Repository = registry + "/" + ns + "/src"
	return env
}

// devEnv is the environment most cases start from: the deployer
// ServiceAccount, the registry prefix under ns, and one OCI source "app"
// at <ns>/src:dev that the case pushes (pushOnly).
func devEnv(ns, name string, components ...v1alpha1.Component) *v1alpha1.DevEnvironment {
	return &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.DevEnvironmentSpec{
			ServiceAccountName: "deployer",
			Registry:           &v1alpha1.RegistrySpec{Prefix: registry + "/" + ns, Insecure: true},
			Sources: []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{
				Repository: registry + "/" + ns + "/src", Tag: "dev", Insecure: true}}},
			Components: components,
		},
	}
}

// copyDir copies a source tree to a fresh temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		return os.WriteFile(target, data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// setGreeting rewrites the sample service's greeting in a copied tree.
func setGreeting(t *testing.T, dir, greeting string) {
	t.Helper()
	path := filepath.Join(dir, "cmd", "web", "main.go")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "const greeting = ") {
			lines[i] = fmt.Sprintf("const greeting = %q", greeting)
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// push pushes dir as the environment's source "app" and asks for a
// reconcile now, as `kubectl devloop push` does; it returns the request.
func push(t *testing.T, env *v1alpha1.DevEnvironment, dir string) string {
	t.Helper()
	pushOnly(t, env, dir)
	return requestReconcile(t, env)
}

// pushOnly pushes dir as the environment's source "app".
func pushOnly(t *testing.T, env *v1alpha1.DevEnvironment, dir string) {
	t.Helper()
	src := env.Spec.Sources[0]
	ref := src.OCI.Repository + ":" + src.OCI.Tag
	g := NewWithT(t)
	// Packed as `kubectl devloop push` packs: the layers of images that
	// copy the pushed files are prebuilt for a local registry.
	img, err := cli.PackSource(dir, env, src.Name, source.CompressionAuto.For(strings.Split(src.OCI.Repository, "/")[0]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(source.PushArtifact(context.Background(), img, ref, source.PushOptions{Insecure: src.OCI.Insecure})).To(Succeed())
}

func requestReconcile(t *testing.T, env *v1alpha1.DevEnvironment) string {
	t.Helper()
	c := need(t)
	value := fmt.Sprint(time.Now().UnixNano())
	NewWithT(t).Eventually(func() error {
		cur := &v1alpha1.DevEnvironment{}
		if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(env), cur); err != nil {
			return err
		}
		patch := client.MergeFrom(cur.DeepCopy())
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[v1alpha1.ReconcileRequestAnnotation] = value
		return c.Client.Patch(context.Background(), cur, patch)
	}, time.Minute).Should(Succeed())
	return value
}

// waitEnv polls the environment until check passes; a Stalled environment
// ends the wait at once unless allowStalled.
func waitEnv(t *testing.T, key client.ObjectKey, timeout time.Duration, allowStalled bool, check func(g Gomega, env *v1alpha1.DevEnvironment)) *v1alpha1.DevEnvironment {
	t.Helper()
	c := need(t)
	env := &v1alpha1.DevEnvironment{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(context.Background(), key, env)).To(Succeed())
		if !allowStalled && env.Status.ObservedGeneration == env.Generation {
			if s := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue {
				StopTrying("stalled: " + s.Message).Now()
			}
		}
		check(g, env)
	}, timeout, 200*time.Millisecond).Should(Succeed())
	return env
}

func readyNow(g Gomega, env *v1alpha1.DevEnvironment) {
	g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	ready := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s", ready.Message)
}

// imageOf is the status of image name.
func imageOf(env *v1alpha1.DevEnvironment, name string) *v1alpha1.ImageStatus {
	_, ist := env.BuiltImage(name)
	return ist
}

func componentOf(env *v1alpha1.DevEnvironment, name string) *v1alpha1.ComponentStatus {
	return env.Status.Component(name)
}

// readyPods lists the Running, Ready pods with the label selector.
func readyPods(g Gomega, ns string, labels map[string]string) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(dc.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
			out = append(out, p)
		}
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// webLabels select the sample service's pods (release hello).
var webLabels = map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": "hello"}

func mkdirWrite(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o755)
}

func createServiceAccount(ctx context.Context, ns, name string) error {
	return dc.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
}

func intstrHTTP() intstr.IntOrString { return intstr.FromString("http") }
