//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// expectDelveUnreachableFromPeers is issue 31.2 on the real cluster: a pod
// of another namespace (another team's, anything in the cluster) dials the
// debugged pod's IP. The server's own port answers it — the pod network
// carries the peer's requests — while delve's port refuses the
// connection: delve listens on the pod's loopback, not its IP. (Before,
// with --listen=:40000, the peer connected to delve, whose API has no
// authentication.) The port-forward reaching delve is attachDelve's part.
func expectDelveUnreachableFromPeers(t *testing.T, debugPod *corev1.Pod, httpPort int32) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	podIP := debugPod.Status.PodIP
	g.Expect(podIP).NotTo(BeEmpty(), "debug pod %s has no IP", debugPod.Name)
	peerNS := namespace(t, "e2e-debug-peer")
	// busybox's wget: an HTTP answer from the server's port; from delve's
	// port, "Connection refused" when nothing listens on the pod IP
	// (delve, if it listened there, would take the connection and answer
	// no HTTP).
	script := fmt.Sprintf(`for port in %d %d; do echo "port $port:"; wget -q -T 5 -O - "http://%s:$port/?name=peer" 2>&1; echo "exit $?"; done`,
		httpPort, 40000, podIP)
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: peerNS, Name: "dial-debug-pod"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "dial", Image: busybox, Command: []string{"sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	g.Expect(dc.Client.Create(ctx, probe)).To(Succeed())
	probe = waitPod(t, poll.Wait{What: "the peer's dialing pod ran to completion", Every: 500 * time.Millisecond, Within: 2 * time.Minute},
		client.ObjectKeyFromObject(probe), func(g Gomega, pod *corev1.Pod) {
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded))
		})
	logs, err := dc.Clientset.CoreV1().Pods(peerNS).GetLogs(probe.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	out := string(logs)
	t.Logf("a pod of namespace %s dialing debug pod %s at %s:\n%s", peerNS, debugPod.Name, podIP, out)
	httpPart, delvePart, found := strings.Cut(out, "port 40000:")
	g.Expect(found).To(BeTrue(), "the probe dialed delve's port: %s", out)
	g.Expect(httpPart).To(ContainSubstring("hello, peer"), "the pod network carries the peer's requests to the pod IP")
	g.Expect(delvePart).To(ContainSubstring("Connection refused"), "delve must not be reachable on the pod IP")
}
