//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// expectDelveUnreachableOnPodIP is issue 31.2 on the real cluster: what
// any pod can reach, the debugged pod's IP, answers on the server's own
// port (the network carries the request) and refuses a connection on
// delve's: delve listens on the pod's loopback only. (With
// --listen=:40000, as before, the connection was accepted, and delve's API
// has no authentication.) The port-forward still reaching delve is
// attachDelve's part.
//
// The dial comes from the test process, on the cluster's one node, which
// reaches pod IPs over the node's bridge as another pod does. (A busybox
// pod was tried first: its wget ended with a segmentation fault under
// the restricted profile before dialing anything.)
func expectDelveUnreachableOnPodIP(t *testing.T, debugPod *corev1.Pod, httpPort int) {
	t.Helper()
	g := NewWithT(t)
	podIP := debugPod.Status.PodIP
	g.Expect(podIP).NotTo(BeEmpty(), "debug pod %s has no IP", debugPod.Name)

	httpc := &http.Client{Timeout: 20 * time.Second}
	resp, err := httpc.Get(fmt.Sprintf("http://%s/?name=peer", net.JoinHostPort(podIP, fmt.Sprint(httpPort))))
	g.Expect(err).NotTo(HaveOccurred(), "the server's port on the pod IP")
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	resp.Body.Close()
	g.Expect(strings.TrimSpace(string(body))).To(Equal("hello, peer"), "the pod IP is reachable")

	delve := net.JoinHostPort(podIP, "40000")
	conn, err := net.DialTimeout("tcp", delve, 10*time.Second)
	if err == nil {
		conn.Close()
	}
	t.Logf("dialing delve's port on the pod IP (%s): %v", delve, err)
	g.Expect(err).To(HaveOccurred(), "delve must not accept connections on the pod IP")
	g.Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeTrue(), "refused (nothing listens there), not lost: %v", err)
}
