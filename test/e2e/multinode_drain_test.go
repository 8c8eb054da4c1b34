//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/devcluster"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// A node drained while a build runs on it (issue 45, "Builds move with the
// nodes"): a builder Job without a cache claim, a builder Job with one (the
// default class's volumes are node 1's disk: a claim first bound there
// cannot follow the build), and a warm builder with one. Each time the
// build command runs, the node its pod runs on is drained as an
// administrator drains it (kubectl drain). The environment must reach
// Ready with no help, never be Stalled on the way, and leave no pod of
// its own Pending behind. What status said on the way, and how long Ready
// took after the drain, are printed.
func TestMultiNodeDrainMidBuild(t *testing.T) {
	c := need(t)
	twoNodes(t, c)
	ns := namespace(t, "e2e-drain")
	dir := sourceDir(t, Files{"bin/app": "#!/bin/sh\necho app\n"})
	pushDir(t, newEnv(ns, "source").Build(), dir)
	// Long enough to drain the node while it runs, on a busy machine.
	slowBuild := func(seconds string) *v1alpha1.BuildRun {
		return &v1alpha1.BuildRun{Image: busybox, Command: []string{"sh", "-c",
			"sleep " + seconds + " && mkdir -p out && cp bin/app out/app"}}
	}
	cases := []struct {
		name  string
		cache bool
		warm  bool
	}{
		{name: "job", cache: false},
		{name: "job-cache", cache: true},
		{name: "warm-cache", cache: true, warm: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			run := slowBuild("30")
			run.KeepWarm = tc.warm
			if tc.cache {
				run.Cache = &v1alpha1.BuildCache{Paths: []string{"/tmp/cache"}}
			}
			env := newEnv(ns, tc.name).Registry().Components(
				Component("app", Images(Image("app", Run(run), Program("out/app", "/app"))))).Build()
			NewWithT(t).Expect(c.Client.Create(ctx, env)).To(Succeed())
			key := client.ObjectKeyFromObject(env)

			builder := waitBuilderRunning(t, ns, tc.name, tc.warm)
			node := builder.Spec.NodeName
			load, _ := os.ReadFile("/proc/loadavg")
			start := time.Now()
			drainNode(t, c, node)
			t.Logf("%s: drained %s while builder pod %s ran its build (load %s)", tc.name, node, builder.Name, strings.TrimSpace(string(load)))

			if tc.cache {
				// The local cluster's default class binds a claim at once,
				// on node 1's disk: a fresh claim would land there again.
				// devloop keeps it and says so; the node's return (the end
				// of its maintenance) lets the build go on.
				waiting := waitEnv(t, key, 4*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
					g.Expect(conditionMessages(env)).To(ContainSubstring("is on a node where no pod can run now"))
				})
				t.Logf("%s: after %s: %s", tc.name, time.Since(start).Round(100*time.Millisecond), conditionMessages(waiting))
				uncordon(t, c, node)
			}
			var seen []string
			done := waitEnv(t, key, 6*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
				if m := conditionMessages(env); !slices.Contains(seen, m) {
					seen = append(seen, m)
				}
				readyNow(g, env)
				g.Expect(imageOf(env, "app").Digest).NotTo(BeEmpty())
			})
			t.Logf("%s: Ready %s after draining %s; built by %s; status on the way:\n%s", tc.name,
				time.Since(start).Round(100*time.Millisecond), node, imageOf(done, "app").Build.Job, strings.Join(seen, "---\n"))
			if !tc.cache {
				// Status said the build moved, naming the drained node.
				NewWithT(t).Expect(strings.Join(seen, "\n")).To(ContainSubstring("its pod on node "+node+" was stopped"),
					"status never said the builder pod was stopped on %s", node)
			}

			// Nothing of the environment is left waiting for the drained node.
			waitPods(t, poll.Wait{What: "no pod of " + tc.name + " left Pending or on " + node, Every: time.Second, Within: 2 * time.Minute},
				ns, map[string]string{v1alpha1.LabelEnvironment: v1alpha1.LabelValue(tc.name)}, func(g Gomega, pods []corev1.Pod) {
					for _, p := range poll.Live(pods) {
						g.Expect(p.Status.Phase).NotTo(Equal(corev1.PodPending), "pod %s", p.Name)
						if p.Status.Phase == corev1.PodRunning && !tc.cache { // the cache cases' node came back
							g.Expect(p.Spec.NodeName).NotTo(Equal(node), "pod %s runs on the drained node", p.Name)
						}
					}
				})
		})
	}
}

// waitBuilderRunning waits until env's builder pod runs its build: a
// builder Job's build container, or a warm builder while status says it
// builds.
func waitBuilderRunning(t *testing.T, ns, env string, warm bool) corev1.Pod {
	t.Helper()
	var builder corev1.Pod
	waitPods(t, poll.Wait{What: "a builder of " + env + " running its build", Every: 200 * time.Millisecond, Within: 4 * time.Minute},
		ns, map[string]string{v1alpha1.LabelEnvironment: v1alpha1.LabelValue(env)}, func(g Gomega, pods []corev1.Pod) {
			var running []corev1.Pod
			for _, p := range poll.Live(pods) {
				if warm && p.Labels[v1alpha1.LabelRole] == v1alpha1.RoleWarmBuild && poll.IsReady(&p) ||
					!warm && buildCommandRuns(p.Status.InitContainerStatuses) {
					running = append(running, p)
				}
			}
			g.Expect(running).NotTo(BeEmpty())
			builder = running[0]
		})
	if warm {
		key := client.ObjectKey{Namespace: ns, Name: env}
		waitEnv(t, key, 3*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(conditionMessages(env)).To(ContainSubstring("in warm builder"))
		})
	}
	return builder
}

// drainNode drains node as an administrator would, and makes it
// schedulable again when the test ends.
func drainNode(t *testing.T, c *devcluster.Cluster, node string) {
	t.Helper()
	kubectl := func(args ...string) ([]byte, error) {
		cmd := exec.Command(kubectlPath(), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
		return cmd.CombinedOutput()
	}
	t.Cleanup(func() { uncordon(t, c, node) })
	out, err := kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=3m")
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "kubectl drain %s: %s", node, out)
}

// uncordon makes node schedulable again.
func uncordon(t *testing.T, c *devcluster.Cluster, node string) {
	out, err := exec.Command(kubectlPath(), "--kubeconfig", c.Kubeconfig, "uncordon", node).CombinedOutput()
	if err != nil {
		t.Logf("uncordon %s: %v: %s", node, err, out)
	}
}
