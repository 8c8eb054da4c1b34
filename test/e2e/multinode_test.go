//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// node2WIPTaint is the taint hack/cluster/node2.sh registers node 2 with
// until its checks pass; these pods tolerate it, to check a node still
// under work.
const node2WIPTaint = "devloop.dev/node2-wip"

// Two nodes of the local cluster (hack/cluster/node2.sh): a pod on each,
// each pulling an image pushed by this run (so the pull really crosses to
// the registry from both nodes), and from a client pod on each node, the
// other node's pod by its pod IP, through a Service by IP and by name, and
// cluster DNS. Skipped when the cluster has one node.
func TestMultiNodePodNetwork(t *testing.T) {
	c := needCluster(t)
	ctx := context.Background()
	nodes := twoNodes(t, c)
	nodes = nodes[:2]
	ns := clusterNamespace(t, c, "multinode")
	image, runID := pushRunImage(t)

	// A web pod on each node, serving the run's file, behind a Service.
	webs := map[string]*corev1.Pod{}
	for i, node := range nodes {
		name := fmt.Sprintf("web-%d", i+1)
		pod := pinnedPod(ns, name, node, image, "exec httpd -f -p 8080 -h /www")
		pod.Labels = map[string]string{"app": name}
		pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/run-id", Port: intstr.FromString("http")}}, PeriodSeconds: 1}
		NewWithT(t).Expect(c.Client.Create(ctx, pod)).To(Succeed())
		NewWithT(t).Expect(c.Client.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{Selector: pod.Labels, Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
		})).To(Succeed())
		webs[node] = pod
	}
	for node, pod := range webs {
		waitCheck(t, poll.Wait{What: "web pod " + pod.Name + " Ready on " + node, Every: 200 * time.Millisecond, Within: 3 * time.Minute}, func(g Gomega) {
			cur := &corev1.Pod{}
			g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod.Name}, cur)).To(Succeed())
			g.Expect(poll.IsReady(cur)).To(BeTrue(), "pod %s: %s", pod.Name, poll.DescribePods([]corev1.Pod{*cur}))
			g.Expect(cur.Spec.NodeName).To(Equal(node))
			*pod = *cur
		})
		// The image the kubelet ran is the one this run pushed, pulled by digest from the registry.
		NewWithT(t).Expect(pod.Status.ContainerStatuses[0].ImageID).To(ContainSubstring(image.digest),
			"pod %s on %s runs %s", pod.Name, node, pod.Status.ContainerStatuses[0].ImageID)
	}

	// A client on each node checks the web pod of the other node.
	clients := map[string]string{}
	for i, node := range nodes {
		other := webs[nodes[1-i]]
		svc := &corev1.Service{}
		NewWithT(t).Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: other.Name}, svc)).To(Succeed())
		script := strings.Join([]string{
			fmt.Sprintf("timeout 10 wget -q -O - http://%s:8080/run-id | grep -qx %s && echo pod-to-pod-ok", other.Status.PodIP, runID),
			fmt.Sprintf("timeout 10 wget -q -O - http://%s/run-id | grep -qx %s && echo service-ip-ok", svc.Spec.ClusterIP, runID),
			fmt.Sprintf("timeout 10 wget -q -O - http://%s/run-id | grep -qx %s && echo service-name-ok", other.Name, runID),
			fmt.Sprintf("nslookup %s.%s.svc.cluster.local | grep -q %s && echo dns-ok", other.Name, ns, svc.Spec.ClusterIP),
			"true",
		}, "\n")
		name := fmt.Sprintf("client-%d", i+1)
		pod := pinnedPod(ns, name, node, image, script)
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		NewWithT(t).Expect(c.Client.Create(ctx, pod)).To(Succeed())
		clients[node] = name
	}
	for node, name := range clients {
		waitCheck(t, poll.Wait{What: "client pod " + name + " done on " + node, Every: 200 * time.Millisecond, Within: 3 * time.Minute}, func(g Gomega) {
			cur := &corev1.Pod{}
			g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cur)).To(Succeed())
			g.Expect(cur.Status.Phase).To(Equal(corev1.PodSucceeded), "pod %s: %s", name, poll.DescribePods([]corev1.Pod{*cur}))
		})
		logs, err := c.Clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		for _, want := range []string{"pod-to-pod-ok", "service-ip-ok", "service-name-ok", "dns-ok"} {
			NewWithT(t).Expect(strings.Split(string(logs), "\n")).To(ContainElement(want), "the client on %s, to the other node's pod: %q", node, logs)
		}
	}
}

// needCluster is the cluster, without the operator: these cases check the
// cluster itself.
func needCluster(t *testing.T) *devcluster.Cluster {
	t.Helper()
	if dc == nil {
		t.Skip("no local cluster: run `make cluster-up` first (or `make e2e`)")
	}
	return dc
}

func readyNodes(t *testing.T, c *devcluster.Cluster) []string {
	t.Helper()
	list := &corev1.NodeList{}
	NewWithT(t).Expect(c.Client.List(context.Background(), list)).To(Succeed())
	var ready []string
	for _, n := range list.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = append(ready, n.Name)
			}
		}
	}
	return ready
}

// clusterNamespace is a restricted namespace deleted after the test
// unless it failed.
func clusterNamespace(t *testing.T, c *devcluster.Cluster, prefix string) string {
	t.Helper()
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

// pinnedPod is a restricted busybox pod of image on node running script,
// tolerating node 2's work-in-progress taint.
func pinnedPod(ns, name, node string, image runImage, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Tolerations:                   []corev1.Toleration{{Key: node2WIPTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65534),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "main", Image: image.ref, ImagePullPolicy: corev1.PullAlways,
				Command: []string{"sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

// runImage is an image this run pushed: by digest.
type runImage struct{ ref, digest string }

// pushRunImage pushes busybox with a layer holding /www/run-id, unique to
// this run, so no node has it before and every pod pulls it.
func pushRunImage(t *testing.T) (runImage, string) {
	t.Helper()
	runID := fmt.Sprintf("run-%d", time.Now().UnixNano())
	base, err := remote.Image(mustRef(t, devcluster.Registry+"/busybox:1.35"), remote.WithContext(context.Background()))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		_ = tw.WriteHeader(&tar.Header{Name: "www/", Typeflag: tar.TypeDir, Mode: 0o755})
		_ = tw.WriteHeader(&tar.Header{Name: "www/run-id", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(runID) + 1)})
		_, _ = tw.Write([]byte(runID + "\n"))
		_ = tw.Close()
		return io.NopCloser(&buf), nil
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	img, err := mutate.AppendLayers(base, layer)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ref := mustRef(t, devcluster.Registry+"/e2e-multinode/busybox:"+runID)
	NewWithT(t).Expect(remote.Write(ref, img)).To(Succeed())
	d, err := img.Digest()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return runImage{ref: ref.Context().Digest(d.String()).String(), digest: d.String()}, runID
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s, name.Insecure)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return ref
}

// twoNodes returns the cluster's Ready nodes, skipping the case when there
// are fewer than two (the multi-node cases run on hack/cluster/node2.sh's).
func twoNodes(t *testing.T, c *devcluster.Cluster) []string {
	t.Helper()
	nodes := readyNodes(t, c)
	if len(nodes) < 2 {
		t.Skipf("the cluster has %d Ready node(s) (%s); hack/cluster/node2.sh up adds a second", len(nodes), strings.Join(nodes, ", "))
	}
	return nodes
}
