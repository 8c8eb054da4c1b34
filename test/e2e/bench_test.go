//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// benchIterations per path; DEVLOOP_BENCH_ITERATIONS overrides.
func benchIterations() int {
	n := 10
	if v := os.Getenv("DEVLOOP_BENCH_ITERATIONS"); v != "" {
		fmt.Sscan(v, &n)
	}
	return n
}

// TestChangeToRunningPodLatency is the benchmark of the inner loop on the
// real cluster: from a changed file on this machine to the new pod Ready.
//
//	(a) prebuilt binary: the changed binary pushed as an OCI source, the
//	    image assembled in the operator, the release upgraded;
//	(b) in-cluster compile: the changed Go source pushed, compiled by a
//	    builder Job with a warm cache, then as (a);
//	floor: `kubectl set env` on a plain Deployment of the same image, the
//	    least any tool can take to roll a pod on this cluster.
//
// It prints p50 and p90 of each, and the ratios to the floor; the figures
// in docs/performance.md come from it. No timing is asserted.
func TestChangeToRunningPodLatency(t *testing.T) {
	c := need(t)
	n := benchIterations()
	prebuilt, image := benchPrebuilt(t, c, n)
	floor := benchFloor(t, c, image, n)
	compiled := benchCompiled(t, c, n)

	var b strings.Builder
	fmt.Fprintf(&b, "change-to-running-pod latency, %d iterations each (single-node local cluster, 2 cores)\n", n)
	fmt.Fprintf(&b, "| path | p50 | p90 | p50 - floor p50 | p50 / floor p50 |\n|---|---|---|---|---|\n")
	fp50, _ := percentiles(floor)
	for _, row := range []struct {
		name string
		d    []time.Duration
	}{{"floor: kubectl set env, plain Deployment", floor}, {"(a) prebuilt binary pushed", prebuilt}, {"(b) in-cluster compile, warm cache", compiled}} {
		p50, p90 := percentiles(row.d)
		fmt.Fprintf(&b, "| %s | %s | %s | %+.2fs | %.2f |\n", row.name, p50.Round(10*time.Millisecond), p90.Round(10*time.Millisecond),
			(p50 - fp50).Seconds(), float64(p50)/float64(fp50))
	}
	t.Log("\n" + b.String())
	out := filepath.Join(testenv.RepoRoot(), "bin", "e2e-bench.md")
	_ = os.WriteFile(out, []byte(b.String()), 0o644)
	t.Logf("written to %s", out)
}

// offPhase waits a random part of a second before a change. The kubelet
// looks at its containers once a second (the PLEG relist), and the next
// look after the new container starts is when the pod can turn Ready. A
// change made right after the previous pod turned Ready comes at a fixed
// offset from that look: every sample of a path would then fall on the
// same side of it, or drift from one side to the other, and the p50 would
// move by up to a second between identical runs. A developer's change
// comes at any moment; so do these, for every path alike.
func offPhase() {
	time.Sleep(rand.N(time.Second))
}

// benchPrebuilt measures path (a) and returns the samples and the image
// it ran last (for the floor).
func benchPrebuilt(t *testing.T, c *devcluster.Cluster, n int) ([]time.Duration, string) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-bench-a")
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin", "web")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/web")
	cmd.Dir = c.SampleDir()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	chart := copyDir(t, filepath.Join(c.SampleDir(), "chart"))
	g.Expect(os.Rename(chart, filepath.Join(dir, "chart"))).To(Succeed())

	env := &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prebuilt"},
		Spec: v1alpha1.DevEnvironmentSpec{
			ServiceAccountName: "deployer",
			Registry:           &v1alpha1.RegistrySpec{Prefix: registry + "/" + ns, Insecure: true},
			Sources: []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{
				Repository: registry + "/" + ns + "/out", Tag: "dev", Insecure: true}}},
			Components: []v1alpha1.Component{{
				Name: "web",
				Images: []v1alpha1.ImageSpec{{Name: "web", Source: "app",
					Layers:     []v1alpha1.LayerMapping{{From: "bin/web", To: "/web", Mode: "0755"}},
					Entrypoint: []string{"/web"}, User: "65532:65532"}},
				Helm: &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: "app", Path: "chart"}, ReleaseName: "hello"},
			}},
		},
	}
	pushOnly(t, env, dir)
	g.Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = waitEnv(t, key, 3*time.Minute, false, readyNow)

	samples := make([]time.Duration, 0, n)
	for i := range n {
		old := imageOf(env, "web").Digest
		appendToFile(t, bin, fmt.Sprintf("\nbench %d %d\n", i, time.Now().UnixNano()))
		offPhase()
		t0 := time.Now()
		pushed, requested := pushTimed(t, env, dir)
		d := waitNewPod(t, ns, webLabels, old, t0)
		samples = append(samples, d)
		env = waitReadyWithNewImage(t, key, old)
		t.Logf("(a) %2d: %s (source pushed at %s, reconcile requested at %s, environment Ready at %s)", i, d.Round(time.Millisecond),
			pushed, requested, time.Since(t0).Round(10*time.Millisecond))
	}
	return samples, imageOf(env, "web").Repository + "@" + imageOf(env, "web").Digest
}

// benchCompiled measures path (b) on the sample without its validator.
func benchCompiled(t *testing.T, c *devcluster.Cluster, n int) []time.Duration {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-bench-b")
	env := sampleIn(t, ns)
	comp := &env.Spec.Components[0]
	comp.Images = comp.Images[:1]
	comp.Helm.ImageValues = nil
	env.Spec.Tests = nil
	dir := copyDir(t, c.SampleDir())
	pushOnly(t, env, dir)
	g.Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = waitEnv(t, key, 6*time.Minute, false, readyNow)

	samples := make([]time.Duration, 0, n)
	// The first change warms the cache with this package's own objects.
	for i := -1; i < n; i++ {
		old := imageOf(env, "web").Digest
		setGreeting(t, dir, fmt.Sprintf("hello from bench %d %d", i, time.Now().UnixNano()))
		offPhase()
		t0 := time.Now()
		pushed, requested := pushTimed(t, env, dir)
		d := waitNewPod(t, ns, webLabels, old, t0)
		env = waitReadyWithNewImage(t, key, old)
		if i < 0 {
			t.Logf("(b) warm-up: %s", d.Round(time.Millisecond))
			continue
		}
		samples = append(samples, d)
		t.Logf("(b) %2d: %s (source pushed at %s, reconcile requested at %s, environment Ready at %s)", i, d.Round(time.Millisecond),
			pushed, requested, time.Since(t0).Round(10*time.Millisecond))
	}
	return samples
}

// benchFloor rolls a plain Deployment of image with kubectl.
func benchFloor(t *testing.T, c *devcluster.Cluster, image string, n int) []time.Duration {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-bench-floor")
	labels := map[string]string{"app": "floor"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "floor"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(2)),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: "web", Image: image,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstrHTTP()}}},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
				},
			},
		},
	}
	g.Expect(c.Client.Create(ctx, d)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(readyPods(g, ns, labels)).To(HaveLen(1)) }, 2*time.Minute).Should(Succeed())
	kubectl := filepath.Join(testenv.RepoRoot(), "bin", "k8s", "v1.36.3-etcd3.6.8", "kubectl")
	samples := make([]time.Duration, 0, n)
	for i := range n {
		old := readyPodNames(t, ns, labels)
		offPhase()
		t0 := time.Now()
		out, err := exec.Command(kubectl, "--kubeconfig", c.Kubeconfig, "-n", ns, "set", "env", "deployment/floor", fmt.Sprintf("ITERATION=%d", i)).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		var took time.Duration
		g.Eventually(func(g Gomega) {
			for _, p := range readyPods(g, ns, labels) {
				if !slices.Contains(old, p.Name) {
					took = time.Since(t0) // seen by a 50 ms poll: Ready conditions are second-granular
					return
				}
			}
			g.Expect("new pod").To(Equal("Ready"))
		}, time.Minute, 50*time.Millisecond).Should(Succeed())
		samples = append(samples, took)
		t.Logf("floor %2d: %s", i, took.Round(time.Millisecond))
		g.Eventually(func(g Gomega) { g.Expect(readyPods(g, ns, labels)).To(HaveLen(1)) }, time.Minute).Should(Succeed())
	}
	return samples
}

// waitReadyWithNewImage waits, polling every 50 ms, until the environment
// is Ready with a web image other than old: when `kubectl devloop push`
// would report the change rolled out.
func waitReadyWithNewImage(t *testing.T, key client.ObjectKey, old string) *v1alpha1.DevEnvironment {
	t.Helper()
	c := need(t)
	env := &v1alpha1.DevEnvironment{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(context.Background(), key, env)).To(Succeed())
		readyNow(g, env)
		g.Expect(imageOf(env, "web").Digest).NotTo(Equal(old))
	}, time.Minute, 50*time.Millisecond).Should(Succeed())
	return env
}

// pushTimed pushes dir as the environment's source and requests a
// reconcile, as `kubectl devloop push` does, and says when each was done.
func pushTimed(t *testing.T, env *v1alpha1.DevEnvironment, dir string) (pushed, requested time.Duration) {
	t.Helper()
	t0 := time.Now()
	pushOnly(t, env, dir)
	pushed = time.Since(t0).Round(time.Millisecond)
	requestReconcile(t, env)
	return pushed, time.Since(t0).Round(time.Millisecond)
}

// waitNewPod waits for a Ready pod with the labels whose image is not old
// and returns how long after t0 it became Ready.
func waitNewPod(t *testing.T, ns string, labels map[string]string, old string, t0 time.Time) time.Duration {
	t.Helper()
	var took time.Duration
	NewWithT(t).Eventually(func(g Gomega) {
		for _, p := range readyPods(g, ns, labels) {
			if len(p.Status.ContainerStatuses) > 0 && !strings.HasSuffix(p.Status.ContainerStatuses[0].ImageID, old) {
				took = time.Since(t0) // seen by a 50 ms poll: Ready conditions are second-granular
				return
			}
		}
		g.Expect("pod of a new image").To(Equal("Ready"))
	}, 5*time.Minute, 50*time.Millisecond).Should(Succeed())
	return took
}

func readyPodNames(t *testing.T, ns string, labels map[string]string) []string {
	var names []string
	NewWithT(t).Eventually(func(g Gomega) {
		names = nil
		for _, p := range readyPods(g, ns, labels) {
			names = append(names, p.Name)
		}
		g.Expect(names).NotTo(BeEmpty())
	}, time.Minute).Should(Succeed())
	return names
}

func appendToFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func percentiles(d []time.Duration) (p50, p90 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) time.Duration {
		i := int(q*float64(len(s))+0.5) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return at(0.5), at(0.9)
}
