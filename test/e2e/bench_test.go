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
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/internal/testenv"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// benchIterations per path; DEVLOOP_BENCH_ITERATIONS overrides.
func benchIterations() int { return envInt("DEVLOOP_BENCH_ITERATIONS", 10) }

// liveIterations of the prebuilt live update path, which also shows that
// that many consecutive live updates make no new pod or ReplicaSet;
// DEVLOOP_BENCH_LIVE_ITERATIONS overrides.
func liveIterations() int { return envInt("DEVLOOP_BENCH_LIVE_ITERATIONS", 100) }

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		fmt.Sscan(v, &def)
	}
	return def
}

// TestChangeToServingLatency is the benchmark of the inner loop on the
// real cluster, side by side in one run: from a change on this machine to
// the new code answering HTTP through its Service, polled every 20 ms
// (not pod Ready). One small Go server (benchServerMain) answers with its
// version and its ITERATION variable in every path:
//
//	floor: `kubectl set env` on a plain Deployment of the same image: the
//	    least any tool can take to roll a pod on this cluster;
//	(a) push, rollout: the server's binary, prebuilt here, pushed as the
//	    OCI source the way `kubectl devloop push` packs it, a reconcile
//	    requested, the image assembled in the operator, rolled out;
//	(b) warm compile, rollout: its Go source pushed, compiled in its warm
//	    builder pod, rolled out;
//	(c) push, live update: as (a) with images[].liveUpdate on the binary:
//	    synced into the running pod, the program restarted;
//	(d) warm compile, live update: as (b) with liveUpdate.
//
// It prints p50 and p90 of each and their ratio to the floor; the figures
// in docs/performance.md come from it. No timing is asserted. Path (c)
// runs liveIterations times and checks that none of them made a new pod,
// a new ReplicaSet, a container restart or a Deployment change.
func TestChangeToServingLatency(t *testing.T) {
	c := need(t)
	n := benchIterations()
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:3], " ")
	}
	loadBefore := load()
	server := buildBenchServer(t)

	type row struct {
		name    string
		samples []time.Duration
	}
	var rows []row
	a, image := benchPush(t, server, false, n)
	rows = append(rows, row{"(a) push, rollout", a})
	rows = append(rows, row{"floor: kubectl set env, plain Deployment", benchFloor(t, c, image, n)})
	rows = append(rows, row{"(b) warm compile, rollout", benchWarm(t, false, n)})
	live, _ := benchPush(t, server, true, liveIterations())
	rows = append(rows, row{fmt.Sprintf("(c) push, live update (%d in a row)", len(live)), live})
	rows = append(rows, row{"(d) warm compile, live update", benchWarm(t, true, n)})
	rows[0], rows[1] = rows[1], rows[0]

	var b strings.Builder
	fmt.Fprintf(&b, "change to new code serving (HTTP through the Service, polled every 20 ms), %d iterations per path unless said; "+
		"single-node local cluster, 2 cores; load average %s before, %s after\n", n, loadBefore, load())
	fmt.Fprintf(&b, "| path | p50 | p90 | p50 / floor p50 |\n|---|---|---|---|\n")
	fp50, _ := percentiles(rows[0].samples)
	for _, r := range rows {
		p50, p90 := percentiles(r.samples)
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f |\n", r.name, p50.Round(10*time.Millisecond), p90.Round(10*time.Millisecond), float64(p50)/float64(fp50))
	}
	t.Log("\n" + b.String())
	out := filepath.Join(testenv.RepoRoot(), "bin", "e2e-bench.md")
	_ = os.WriteFile(out, []byte(b.String()), 0o644)
	t.Logf("written to %s", out)
}

// offPhase waits a random part of a second before a change. The kubelet
// looks at its containers once a second (the PLEG relist), and the next
// look after the new container starts is when the pod can turn Ready. A
// change made right after the previous one finished comes at a fixed
// offset from that look: every sample of a path would then fall on the
// same side of it, or drift from one side to the other, and the p50 would
// move by up to a second between identical runs. A developer's change
// comes at any moment; so do these, for every path alike.
func offPhase() {
	time.Sleep(rand.N(time.Second))
}

// benchPush measures path (a), or (c) with live: a prebuilt binary whose
// version is patched in place per change (no compile in the loop). It
// returns the samples and the image it ran last (for the floor).
func benchPush(t *testing.T, server []byte, live bool, n int) ([]time.Duration, string) {
	g := NewWithT(t)
	name := "push"
	if live {
		name = "push-live"
	}
	ns := namespace(t, "e2e-bench-"+name)
	dir := sourceDir(t, Files{"deploy/bench.yaml": benchManifests})
	bin := filepath.Join(dir, "bin", "server")
	writeBenchServer(t, bin, server, 0)
	img := Image("server", Program("bin/server", "/server"))
	env, url := startBenchEnv(t, ns, name, dir, img, live, 5*time.Minute)
	key := client.ObjectKeyFromObject(env)
	before := workloadState(t, ns)

	samples := make([]time.Duration, 0, n)
	for i := 1; i <= n; i++ {
		old := imageOf(env, "server").Digest
		writeBenchServer(t, bin, server, i)
		offPhase()
		t0 := time.Now()
		pushed, requested := pushTimed(t, env, dir)
		d := waitServing(t, url, fmt.Sprintf("version %d ", i), t0, 2*time.Minute)
		samples = append(samples, d)
		env = waitReadyWithNewImage(t, key, "server", old)
		how := updateKind(imageOf(env, "server"))
		if live {
			g.Expect(how).To(Equal("live update"), "update %d: %s", i, imageOf(env, "server").UpdateReason)
		}
		if !live || i <= 10 || i%10 == 0 {
			t.Logf("%s %3d: %s (source pushed at %s, reconcile requested at %s, Ready at %s, %s)", name, i, d.Round(time.Millisecond),
				pushed, requested, time.Since(t0).Round(10*time.Millisecond), how)
		}
	}
	if live {
		g.Expect(workloadState(t, ns)).To(Equal(before), "%d live updates made no new pod or ReplicaSet, restarted no container, changed no Deployment", n)
		t.Logf("%d live updates in a row: still %s", n, before)
	}
	ist := imageOf(env, "server")
	return samples, ist.Repository + "@" + ist.Digest
}

// benchWarm measures path (b), or (d) with live: the server's Go source
// changed here, pushed, compiled in the image's warm builder pod.
func benchWarm(t *testing.T, live bool, n int) []time.Duration {
	g := NewWithT(t)
	name := "warm"
	if live {
		name = "warm-live"
	}
	ns := namespace(t, "e2e-bench-"+name)
	dir := sourceDir(t, Files{
		"go.mod":            GoModule("example.com/bench"),
		"main.go":           benchSource(0),
		"deploy/bench.yaml": benchManifests,
	})
	build := GoBuild(goImage, []string{"go", "build", "-trimpath", "-ldflags=-s -w", "-o", "out/server", "."})
	build.Cache, build.KeepWarm = &v1alpha1.BuildCache{}, true
	img := Image("server", Paths("go.mod", "main.go"), Run(build), Program("out/server", "/server"))
	env, url := startBenchEnv(t, ns, name, dir, img, live, 8*time.Minute)
	key := client.ObjectKeyFromObject(env)

	samples := make([]time.Duration, 0, n)
	// The first change warms the builder's cache with the server's own
	// package.
	for i := 0; i <= n; i++ {
		old := imageOf(env, "server").Digest
		g.Expect(os.WriteFile(filepath.Join(dir, "main.go"), []byte(benchSource(i+1)), 0o644)).To(Succeed())
		offPhase()
		t0 := time.Now()
		pushed, requested := pushTimed(t, env, dir)
		d := waitServing(t, url, fmt.Sprintf("version %d ", i+1), t0, 3*time.Minute)
		env = waitReadyWithNewImage(t, key, "server", old)
		how := updateKind(imageOf(env, "server"))
		if live {
			g.Expect(how).To(Equal("live update"), "update %d: %s", i, imageOf(env, "server").UpdateReason)
		}
		if i == 0 {
			t.Logf("%s warm-up: %s", name, d.Round(time.Millisecond))
			continue
		}
		samples = append(samples, d)
		t.Logf("%s %2d: %s (source pushed at %s, reconcile requested at %s, Ready at %s, %s)", name, i, d.Round(time.Millisecond),
			pushed, requested, time.Since(t0).Round(10*time.Millisecond), how)
	}
	return samples
}

// startBenchEnv creates the environment of one bench path: the component
// "bench" of img (with liveUpdate on /server when live) and the manifests
// in dir, pushed; it waits until the environment is Ready and version 0
// answers through the Service, and returns the environment and its URL.
func startBenchEnv(t *testing.T, ns, name, dir string, img v1alpha1.ImageSpec, live bool, within time.Duration) (*v1alpha1.DevEnvironment, string) {
	t.Helper()
	if live {
		img.LiveUpdate = &v1alpha1.LiveUpdate{Paths: []string{"/server"}}
	}
	env := newEnv(ns, name).Registry().Components(Component("bench", Images(img), Manifests("deploy"))).Build()
	pushOnly(t, env, dir)
	NewWithT(t).Expect(need(t).Client.Create(context.Background(), env)).To(Succeed())
	env = waitEnv(t, client.ObjectKeyFromObject(env), within, false, readyNow)
	url := serviceURL(t, ns, "bench")
	waitServing(t, url, "version 0 ", time.Now(), 2*time.Minute)
	return env, url
}

// benchFloor rolls a plain Deployment of image with kubectl.
func benchFloor(t *testing.T, c *devcluster.Cluster, image string, n int) []time.Duration {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-bench-floor")
	labels := map[string]string{"app": "bench"}
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
						Name: "server", Image: image,
						Env:   []corev1.EnvVar{{Name: "ITERATION", Value: "0"}},
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
							TCPSocket: &corev1.TCPSocketAction{Port: intstrHTTP()}}},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
				},
			},
		},
	}
	g.Expect(c.Client.Create(ctx, d)).To(Succeed())
	g.Expect(c.Client.Create(ctx, benchService(ns))).To(Succeed())
	url := serviceURL(t, ns, "bench")
	waitServing(t, url, "iteration 0\n", time.Now(), 2*time.Minute)
	samples := make([]time.Duration, 0, n)
	for i := 1; i <= n; i++ {
		offPhase()
		t0 := time.Now()
		out, err := exec.Command(kubectlPath(), append([]string{"--kubeconfig", c.Kubeconfig}, "-n", ns, "set", "env", "deployment/floor", fmt.Sprintf("ITERATION=%d", i))...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		took := waitServing(t, url, fmt.Sprintf("iteration %d\n", i), t0, time.Minute)
		samples = append(samples, took)
		t.Logf("floor %2d: %s", i, took.Round(time.Millisecond))
		waitPods(t, poll.Wait{What: "the floor's one Ready pod", Every: 10 * time.Millisecond, Within: time.Minute}, ns, labels,
			func(g Gomega, pods []corev1.Pod) { g.Expect(poll.Ready(pods)).To(HaveLen(1)) })
	}
	return samples
}

// waitReadyWithNewImage waits, polling every 50 ms, until the environment
// is Ready with an image other than old: when `kubectl devloop push`
// would report the change done.
func waitReadyWithNewImage(t *testing.T, key client.ObjectKey, image, old string) *v1alpha1.DevEnvironment {
	t.Helper()
	c := need(t)
	env := &v1alpha1.DevEnvironment{}
	waitCheck(t, poll.Wait{What: "DevEnvironment " + key.String() + " Ready with a new " + image, Every: 50 * time.Millisecond, Within: time.Minute},
		func(g Gomega) {
			g.Expect(c.Client.Get(context.Background(), key, env)).To(Succeed())
			readyNow(g, env)
			g.Expect(imageOf(env, image).Digest).NotTo(Equal(old))
		})
	return env
}

// updateKind says how the image's newest digest reached the pods.
func updateKind(ist *v1alpha1.ImageStatus) string {
	if ist.LastUpdate == v1alpha1.UpdateLive {
		return "live update"
	}
	return "rollout"
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

// workloadState names the namespace's pods (with their containers'
// restart counts), ReplicaSets and Deployments (with their generations):
// equal before and after, nothing was rolled or restarted.
func workloadState(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	c := need(t)
	var parts []string
	pods := &corev1.PodList{}
	NewWithT(t).Expect(c.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		parts = append(parts, fmt.Sprintf("pod %s (%d restarts)", p.Name, restarts))
	}
	rss := &appsv1.ReplicaSetList{}
	NewWithT(t).Expect(c.Client.List(ctx, rss, client.InNamespace(ns))).To(Succeed())
	for _, rs := range rss.Items {
		parts = append(parts, "replicaset "+rs.Name)
	}
	deps := &appsv1.DeploymentList{}
	NewWithT(t).Expect(c.Client.List(ctx, deps, client.InNamespace(ns))).To(Succeed())
	for _, d := range deps.Items {
		parts = append(parts, fmt.Sprintf("deployment %s (generation %d)", d.Name, d.Generation))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// readyPodNames waits for Ready pods with labels and names them.
func readyPodNames(t *testing.T, ns string, labels map[string]string) []string {
	t.Helper()
	var names []string
	waitPods(t, poll.Wait{What: "Ready pods " + klabels.SelectorFromSet(labels).String(), Every: 10 * time.Millisecond, Within: time.Minute},
		ns, labels, func(g Gomega, pods []corev1.Pod) {
			names = nil
			for _, p := range poll.Ready(pods) {
				names = append(names, p.Name)
			}
			g.Expect(names).NotTo(BeEmpty())
		})
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
