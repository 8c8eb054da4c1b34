//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/internal/operatorimage"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// sharedClass is node2.sh's StorageClass whose volumes either node attaches.
const sharedClass = "local-shared"

// The operator's work directory and its team cache Service follow the
// leader across pods and nodes. A release of its own (two replicas, leader
// election, workDir.persistence on a volume either node attaches,
// reconciling no environment but its own label's, so the suite's operator
// is not disturbed) on node 2: both replicas share the claim, and the team
// cache Service reaches the leader only (every connection of a burst
// answered; with a Service selecting both replicas, a standby's closed
// port refuses some). The leader deleted: the standby leads, the Service
// follows it. The release moved to node 1 (an upgrade with another
// nodeSelector, Recreate): the same volume, what the store held still
// there, the Service at the new leader.
func TestMultiNodeOperatorStateFollowsTheLeader(t *testing.T) {
	c := needCluster(t)
	ctx := context.Background()
	twoNodes(t, c)
	if err := c.Client.Get(ctx, client.ObjectKey{Name: sharedClass}, &storagev1.StorageClass{}); err != nil {
		t.Skipf("no StorageClass %s (hack/cluster/node2.sh makes it): %v", sharedClass, err)
	}
	image := pushIsolatedOperator(t, c)
	ns := clusterNamespace(t, c, "opmove")
	release := "devloop-" + ns
	install := func(node string) {
		t.Helper()
		installIsolatedOperator(t, c, ns, release, image, node)
	}
	uninstallAtEnd(t, c, ns, release)
	start := time.Now()
	install("devloop-2")
	managers := waitManagers(t, c, ns, "devloop-2")
	t.Logf("two managers Ready on devloop-2 in %s: %v", time.Since(start).Round(time.Millisecond), managers)
	claim := release + "-work"
	volume := boundVolume(t, c, ns, claim)

	// What the leader's store holds: a file in the volume, written from
	// this host (the local cluster's volumes are directories here).
	marker := filepath.Join(volume, "e2e-marker")
	NewWithT(t).Expect(os.WriteFile(marker, []byte(ns), 0o644)).To(Succeed())

	service := release + "-build-cache." + ns + ".svc:5003"
	leader := waitLeaderEndpoint(t, c, ns, release, "")
	t.Logf("the build cache Service at the leader %s; work volume %s", leader, volume)
	cacheAnswersEveryTime(t, c, ns, "client-1", service)

	// The leader goes: the standby takes the Service over.
	start = time.Now()
	NewWithT(t).Expect(c.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: leader}})).To(Succeed())
	next := waitLeaderEndpoint(t, c, ns, release, leader)
	t.Logf("leader %s deleted: the Service at %s after %s", leader, next, time.Since(start).Round(time.Millisecond))
	cacheAnswersEveryTime(t, c, ns, "client-2", service)
	waitManagers(t, c, ns, "devloop-2")

	// The operator moves to node 1: the same volume and what it held.
	start = time.Now()
	install("devloop")
	waitManagers(t, c, ns, "devloop")
	NewWithT(t).Expect(boundVolume(t, c, ns, claim)).To(Equal(volume), "the work claim's volume after the move")
	NewWithT(t).Expect(os.ReadFile(marker)).To(Equal([]byte(ns)), "the store's file after the move")
	leader = waitLeaderEndpoint(t, c, ns, release, "")
	t.Logf("moved to devloop: leader %s serving in %s, same volume", leader, time.Since(start).Round(time.Millisecond))
	cacheAnswersEveryTime(t, c, ns, "client-3", service)
}

// pushIsolatedOperator compiles the manager of this tree and pushes it
// under a repository of its own (the suite's operator keeps its image).
func pushIsolatedOperator(t *testing.T, c *devcluster.Cluster) string {
	t.Helper()
	ctx := context.Background()
	out := t.TempDir()
	bins, sups, err := operatorimage.Compile(ctx, operatorimage.Compilation{Root: c.Root, OutDir: out,
		Platforms: []string{runtime.GOOS + "/" + runtime.GOARCH}, Flags: operatorimage.LocalBuildFlags})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	res, err := operatorimage.Push(ctx, operatorimage.Options{Binaries: bins, Supervisors: sups}, devcluster.Registry+"/e2e-multinode/manager:dev", true)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return res.Reference
}

// installIsolatedOperator installs or upgrades release in ns: two
// replicas on node, the work directory on a claim of sharedClass, and a
// label selector no environment but this test's carries.
func installIsolatedOperator(t *testing.T, c *devcluster.Cluster, ns, release, image, node string) {
	t.Helper()
	ctx := context.Background()
	ch, err := loader.Load(filepath.Join(c.Root, "charts", "devloop"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	repo, digest, _ := strings.Cut(image, "@")
	_, err = helm.ReconcileRelease(ctx, helm.ReleaseRequest{
		Configs: helm.NewConfigFactory(c.Config, ""), ReleaseName: release, Namespace: ns, Chart: ch, Timeout: 2 * time.Minute,
		Values: map[string]any{
			"image":        map[string]any{"repository": repo, "digest": digest},
			"replicaCount": 2,
			"nodeSelector": map[string]any{"kubernetes.io/hostname": node},
			"workDir":      map[string]any{"sizeLimit": "1Gi", "persistence": map[string]any{"enabled": true, "size": "1Gi", "storageClass": sharedClass}},
			"rbac":         map[string]any{"aggregateToDefaultRoles": false},
			"manager": map[string]any{"logFormat": "console",
				"extraArgs": []any{"--watch-label-selector=devloop.dev/e2e-isolated=" + ns}},
		},
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// uninstallAtEnd uninstalls release when the test ends (its cluster-wide
// roles included).
func uninstallAtEnd(t *testing.T, c *devcluster.Cluster, ns, release string) {
	t.Cleanup(func() {
		cfg, err := helm.NewConfigFactory(c.Config, "")(ns)
		if err == nil {
			_, err = helm.Uninstall(cfg, helm.ActionOptions{ReleaseName: release, Namespace: ns, Timeout: 2 * time.Minute})
		}
		if err != nil {
			t.Logf("uninstalling %s: %v", release, err)
		}
	})
}

// waitManagers waits until the release's two manager pods run Ready on
// node and returns their names by pod IP.
func waitManagers(t *testing.T, c *devcluster.Cluster, ns, node string) map[string]string {
	t.Helper()
	byIP := map[string]string{}
	waitCheck(t, poll.Wait{What: "two managers Ready on " + node, Every: 500 * time.Millisecond, Within: 4 * time.Minute}, func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(c.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
		live := poll.Live(pods.Items)
		ready := poll.Ready(live)
		g.Expect(live).To(HaveLen(2), poll.DescribePods(pods.Items))
		g.Expect(ready).To(HaveLen(2), poll.DescribePods(pods.Items))
		byIP = map[string]string{}
		for _, p := range ready {
			g.Expect(p.Spec.NodeName).To(Equal(node), "pod %s", p.Name)
			byIP[p.Status.PodIP] = p.Name
		}
	})
	return byIP
}

// boundVolume is the host directory of the claim's volume.
func boundVolume(t *testing.T, c *devcluster.Cluster, ns, claim string) string {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	NewWithT(t).Expect(c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: claim}, pvc)).To(Succeed())
	pv := &corev1.PersistentVolume{}
	NewWithT(t).Expect(c.Client.Get(context.Background(), client.ObjectKey{Name: pvc.Spec.VolumeName}, pv)).To(Succeed())
	NewWithT(t).Expect(pv.Spec.HostPath).NotTo(BeNil(), "volume %s is no host directory", pv.Name)
	return pv.Spec.HostPath.Path
}

// waitLeaderEndpoint waits until the build cache Service's one endpoint
// is a running manager pod other than not; it returns that pod.
func waitLeaderEndpoint(t *testing.T, c *devcluster.Cluster, ns, release, not string) string {
	t.Helper()
	var leader string
	waitCheck(t, poll.Wait{What: "the build cache Service at the leader", Every: 300 * time.Millisecond, Within: 2 * time.Minute}, func(g Gomega) {
		slices := &discoveryv1.EndpointSliceList{}
		g.Expect(c.Client.List(context.Background(), slices, client.InNamespace(ns),
			client.MatchingLabels{discoveryv1.LabelServiceName: release + "-build-cache"})).To(Succeed())
		var ips []string
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				ips = append(ips, ep.Addresses...)
			}
		}
		g.Expect(ips).To(HaveLen(1), "the Service's endpoints")
		pods := &corev1.PodList{}
		g.Expect(c.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
		managers := map[string]string{}
		for _, p := range poll.Live(pods.Items) {
			managers[p.Status.PodIP] = p.Name
		}
		g.Expect(managers).To(HaveKey(ips[0]), "the endpoint %s is none of the managers %v", ips[0], managers)
		leader = managers[ips[0]]
		g.Expect(leader).NotTo(Equal(not), "the endpoint is still the pod that left")
	})
	return leader
}

// cacheAnswersEveryTime: from a pod, 20 connections in a row to the team
// cache's Service are all accepted.
func cacheAnswersEveryTime(t *testing.T, c *devcluster.Cluster, ns, name, service string) {
	t.Helper()
	host, port, _ := strings.Cut(service, ":")
	script := fmt.Sprintf("ok=0; for i in $(seq 1 20); do nc -w 3 %s %s </dev/null && ok=$((ok+1)); done; echo connected=$ok", host, port)
	pod := pinnedPod(ns, name, "", runImage{ref: devcluster.Registry + "/busybox:1.35"}, script)
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	NewWithT(t).Expect(c.Client.Create(context.Background(), pod)).To(Succeed())
	waitCheck(t, poll.Wait{What: "client " + name + " done", Every: 300 * time.Millisecond, Within: 3 * time.Minute}, func(g Gomega) {
		cur := &corev1.Pod{}
		g.Expect(c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cur)).To(Succeed())
		g.Expect(cur.Status.Phase).To(Equal(corev1.PodSucceeded), poll.DescribePods([]corev1.Pod{*cur}))
	})
	logs, err := c.Clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(strings.TrimSpace(string(logs))).To(Equal("connected=20"), "connections to %s accepted, of 20", service)
}
