//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// benchLabels select the bench Deployment's pods.
var benchLabels = map[string]string{"app": "bench"}

// livePods are the bench Deployment's pods not being deleted.
func livePods(g Gomega, ns string) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(dc.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(benchLabels))).To(Succeed())
	return poll.Live(pods.Items)
}

func replicaSets(g Gomega, ns string) []string {
	list := &appsv1.ReplicaSetList{}
	g.Expect(dc.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var names []string
	for _, rs := range list.Items {
		names = append(names, rs.Name)
	}
	slices.Sort(names)
	return names
}

// TestLiveUpdateServesNewCodeWithoutARollout is issue 20 on the real
// cluster: a Go HTTP server image (scratch base) with liveUpdate on its
// binary; five pushes that change only the binary each reach the running
// pod in place — the new version answers through the API server's proxy
// (polled every 20 ms from the push), with no new pod or ReplicaSet; the
// pod deleted after the fifth comes back serving the fifth.
func TestLiveUpdateServesNewCodeWithoutARollout(t *testing.T) {
	c := need(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-live")
	env, live := startLiveServer(t, ns)
	dir, server, bin := live.dir, live.server, live.bin
	key := client.ObjectKeyFromObject(env)
	var pod string
	waitPods(t, poll.Wait{What: "one Ready bench pod serving version 0", Every: 200 * time.Millisecond, Within: 2 * time.Minute},
		ns, benchLabels, func(g Gomega, pods []corev1.Pod) {
			pods = poll.Live(pods)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(poll.IsReady(&pods[0])).To(BeTrue())
			pod = pods[0].Name
			g.Expect(probe(ns, pod)(ctx)).To(Equal("version 0 iteration 0"))
		})
	rsBefore := replicaSets(g, ns)
	d := &appsv1.Deployment{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bench"}, d)).To(Succeed())
	generation := d.Generation
	t.Logf("version 0 serving in pod %s (ReplicaSets %v)", pod, rsBefore)

	var latencies []time.Duration
	for v := 1; v <= 5; v++ {
		writeBenchServer(t, bin, server, v)
		start := time.Now()
		request := push(t, env, dir)
		want := fmt.Sprintf("version %d iteration 0", v)
		_, took := waitAnswer(t, poll.Wait{What: fmt.Sprintf("pod %s serving version %d after the push", pod, v),
			Every: 20 * time.Millisecond, Within: 2 * time.Minute, Since: start}, probe(ns, pod), is(want))
		latencies = append(latencies, took)
		env = waitEnv(t, key, time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			// The status of this push, not the previous one's.
			g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
			ist := imageOf(env, "server")
			g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive), "update reason: %s", ist.UpdateReason)
			g.Expect(ist.LiveDigest).To(Equal(ist.Digest))
		})
		t.Logf("version %d serving %s after the push (push included): %s", v, latencies[v-1].Round(time.Millisecond), imageOf(env, "server").UpdateReason)
	}
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	t.Logf("change → new code serving, 5 live updates: p50 %s, max %s", sorted[len(sorted)/2].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond))

	pods := livePods(g, ns)
	g.Expect(pods).To(HaveLen(1))
	g.Expect(pods[0].Name).To(Equal(pod), "no new pod")
	g.Expect(pods[0].Status.ContainerStatuses[0].RestartCount).To(BeZero(), "the container was not restarted, only its program")
	g.Expect(replicaSets(g, ns)).To(Equal(rsBefore), "no new ReplicaSet")
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bench"}, d)).To(Succeed())
	g.Expect(d.Generation).To(Equal(generation), "the Deployment was not changed")
	g.Expect(pods[0].Annotations).To(HaveKeyWithValue(v1alpha1.LiveDigestAnnotation, imageOf(env, "server").Digest))

	// The pod deleted after 5 live updates comes back serving the 5th.
	start := time.Now()
	g.Expect(c.Client.Delete(ctx, &pods[0])).To(Succeed())
	var replacement string
	var first string
	waitPods(t, poll.Wait{What: "a replacement pod serving version 5", Every: 20 * time.Millisecond, Within: 2 * time.Minute},
		ns, benchLabels, func(g Gomega, pods []corev1.Pod) {
			pods = poll.Live(pods)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].Name).NotTo(Equal(pod))
			replacement = pods[0].Name
			answer := probe(ns, replacement)(ctx)
			if first == "" && !strings.HasPrefix(answer, "error") {
				first = answer
			}
			g.Expect(answer).To(Equal("version 5 iteration 0"))
		})
	t.Logf("replacement pod %s serving version 5 %s after the delete (its first answer: %q)", replacement, time.Since(start).Round(time.Millisecond), first)
	g.Expect(replicaSets(g, ns)).To(Equal(rsBefore), "still no new ReplicaSet")

	// A build whose program crashes as it starts: reported as any crash,
	// the pod named with its CrashLoopBackOff.
	writeBenchServer(t, bin, server, crashVersion)
	start = time.Now()
	push(t, env, dir)
	env = waitEnv(t, key, 2*time.Minute, true, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionReady)).To(BeFalse())
		g.Expect(componentOf(env, "live").Message).To(ContainSubstring("CrashLoopBackOff"))
	})
	ist := imageOf(env, "server")
	t.Logf("crash reported %s after the push: %s (update: %s, %s)", time.Since(start).Round(time.Millisecond),
		componentOf(env, "live").Message, ist.LastUpdate, ist.UpdateReason)

	// The fix, a binary-only change again, reaches the crash-looping pod:
	// no sync can (its container is down), so it is rolled out.
	writeBenchServer(t, bin, server, 6)
	start = time.Now()
	request := push(t, env, dir)
	url := serviceURL(t, ns, "bench")
	waitAnswer(t, poll.Wait{What: "the Service answers with the fix", Every: 20 * time.Millisecond, Within: 3 * time.Minute},
		get(url), is("version 6 iteration 0\n"))
	served := time.Since(start)
	env = waitEnv(t, key, 2*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
		readyNow(g, env)
		g.Expect(imageOf(env, "server").DeployDigest()).To(Equal(imageOf(env, "server").Digest), "the templates run the fix")
	})
	ist = imageOf(env, "server")
	t.Logf("the fix serving %s after its push: %s (%s)", served.Round(time.Millisecond), ist.LastUpdate, ist.UpdateReason)
}

// liveServer is the bench server's tree pushed as a live-updated image:
// the pushed directory, the server's source and the binary's path in it.
type liveServer struct {
	dir, bin string
	server   []byte
}

// startLiveServer creates, in ns, the environment "live" whose image runs
// the bench server (version 0) with live update on its binary, and
// returns it once Ready.
func startLiveServer(t *testing.T, ns string) (*v1alpha1.DevEnvironment, liveServer) {
	t.Helper()
	dir := sourceDir(t, Files{"deploy/bench.yaml": benchManifests})
	live := liveServer{dir: dir, server: buildBenchServer(t), bin: filepath.Join(dir, "bin", "server")}
	writeBenchServer(t, live.bin, live.server, 0)
	env := newEnv(ns, "live").Registry().Components(Component("live",
		Images(Image("server", Program("bin/server", "/server"), LiveUpdate("/server"))), Manifests("deploy"))).Build()
	pushOnly(t, env, dir)
	NewWithT(t).Expect(need(t).Client.Create(context.Background(), env)).To(Succeed())
	return waitEnv(t, client.ObjectKeyFromObject(env), 5*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) { readyNow(g, env) }), live
}
