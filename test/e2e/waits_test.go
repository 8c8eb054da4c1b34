//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// Every wait of the suite goes through poll: a deadline, an interval, and
// on failure what was awaited and what was seen last.

// waitFor fails the test unless probe turns ok within w; it returns how
// long after w.Since (or the call) that was.
func waitFor(t *testing.T, w poll.Wait, probe poll.Probe) time.Duration {
	t.Helper()
	took, err := w.Until(context.Background(), probe)
	if err != nil {
		t.Fatal(err)
	}
	return took
}

// waitCheck waits until check's Gomega assertions all hold, as
// Eventually(func(g Gomega) {...}) would.
func waitCheck(t *testing.T, w poll.Wait, check func(g Gomega)) time.Duration {
	t.Helper()
	return waitFor(t, w, poll.Check(check))
}

// waitEnv polls the environment every 200 ms until check passes; a
// Stalled environment ends the wait at once unless allowStalled. What was
// seen last is check's failed assertion and the environment's summary.
func waitEnv(t *testing.T, key client.ObjectKey, timeout time.Duration, allowStalled bool, check func(g Gomega, env *v1alpha1.DevEnvironment)) *v1alpha1.DevEnvironment {
	t.Helper()
	c := need(t)
	env := &v1alpha1.DevEnvironment{}
	waitFor(t, poll.Wait{What: "DevEnvironment " + key.String(), Every: 200 * time.Millisecond, Within: timeout},
		func(ctx context.Context) (string, bool, error) {
			cur := &v1alpha1.DevEnvironment{}
			if err := c.Client.Get(ctx, key, cur); err != nil {
				return err.Error(), false, nil
			}
			env = cur
			seen := devcluster.Summary(cur)
			if !allowStalled && cur.Status.ObservedGeneration == cur.Generation {
				if s := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue {
					return seen, false, errors.New("stalled: " + s.Message)
				}
			}
			failure, ok := poll.Assertions(func(g Gomega) { check(g, cur) })
			if !ok {
				seen = failure + " | " + seen
			}
			return seen, ok, nil
		})
	return env
}

// waitPods polls the pods of ns with labels (all of them, terminating
// ones too: check picks with poll.Ready or poll.Live) until check passes,
// and returns them as they were then.
func waitPods(t *testing.T, w poll.Wait, ns string, labels map[string]string, check func(g Gomega, pods []corev1.Pod)) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitFor(t, w, func(ctx context.Context) (string, bool, error) {
		list := &corev1.PodList{}
		if err := dc.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return err.Error(), false, nil
		}
		pods = list.Items
		failure, ok := poll.Assertions(func(g Gomega) { check(g, list.Items) })
		return failure + " | pods: " + poll.DescribePods(list.Items), ok, nil
	})
	return pods
}

// waitPodLogging waits for a Ready pod of ns with labels whose container
// (the first one, or the one named container) runs an image image accepts
// and has logged line; its name. The real projects' cases wait for new
// code this way: the pod of the new image, saying the edited line.
func waitPodLogging(t *testing.T, w poll.Wait, ns string, labels map[string]string, container string, image func(string) bool, line string) string {
	t.Helper()
	var name string
	waitPods(t, w, ns, labels, func(g Gomega, pods []corev1.Pod) {
		var found []string
		for _, p := range poll.Ready(pods) {
			c := p.Spec.Containers[0]
			for _, cc := range p.Spec.Containers {
				if container != "" && cc.Name == container {
					c = cc
				}
			}
			if !image(c.Image) {
				continue
			}
			logs, err := dc.Clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(context.Background())
			g.Expect(err).NotTo(HaveOccurred())
			if strings.Contains(string(logs), line) {
				found = append(found, p.Name)
			}
		}
		g.Expect(found).NotTo(BeEmpty(), "a Ready pod logged %q", line)
		name = found[0]
	})
	return name
}

// imageByDigest accepts an image reference pinned to digest; any, when
// digest is "".
func imageByDigest(digest string) func(string) bool {
	return func(image string) bool { return digest == "" || strings.HasSuffix(image, "@"+digest) }
}

// waitPod polls one pod until check passes; the pod as it was then.
func waitPod(t *testing.T, w poll.Wait, key client.ObjectKey, check func(g Gomega, pod *corev1.Pod)) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	waitFor(t, w, func(ctx context.Context) (string, bool, error) {
		cur := &corev1.Pod{}
		if err := dc.Client.Get(ctx, key, cur); err != nil {
			return err.Error(), false, nil
		}
		pod = cur
		failure, ok := poll.Assertions(func(g Gomega) { check(g, cur) })
		return failure + " | pod: " + poll.DescribePods([]corev1.Pod{*cur}), ok, nil
	})
	return pod
}

// waitAnswer polls ask until want holds for its answer, and returns that
// answer and how long after w.Since it came.
func waitAnswer(t *testing.T, w poll.Wait, ask func(ctx context.Context) string, want func(answer string) bool) (string, time.Duration) {
	t.Helper()
	var last string
	took := waitFor(t, w, poll.Answer(ask, want, &last))
	return last, took
}

// contains, is and hasPrefix are the wants of waitAnswer.
func contains(s string) func(string) bool {
	return func(a string) bool { return strings.Contains(a, s) }
}
func is(s string) func(string) bool { return func(a string) bool { return a == s } }
func hasPrefix(s string) func(string) bool {
	return func(a string) bool { return strings.HasPrefix(a, s) }
}

// prober asks on a new connection each time, so every answer comes from
// an endpoint the Service has now.
var prober = poll.NewHTTPClient(time.Second)

// get is one GET of url through prober: the body, or the error.
func get(url string) func(ctx context.Context) string {
	return getWith(prober, url)
}

func getWith(hc *http.Client, url string) func(ctx context.Context) string {
	return func(ctx context.Context) string { return poll.Get(ctx, hc, url) }
}

// answer is what the sample service at ip answers on / (pod IPs are
// routed from this host through the CNI bridge).
func answer(ip string) string {
	return poll.Get(context.Background(), poll.NewHTTPClient(3*time.Second), "http://"+ip+":8080/")
}

// probe asks the pod's port 8080 through the API server's proxy.
func probe(ns, pod string) func(ctx context.Context) string {
	return func(ctx context.Context) string {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		b, err := dc.Clientset.CoreV1().Pods(ns).ProxyGet("http", pod, "8080", "/", nil).DoRaw(ctx)
		if err != nil {
			return "error: " + err.Error()
		}
		return strings.TrimSpace(string(b))
	}
}

// readyPods lists the Running, Ready pods with the label selector.
func readyPods(g Gomega, ns string, labels map[string]string) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(dc.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
	return poll.Ready(pods.Items)
}
