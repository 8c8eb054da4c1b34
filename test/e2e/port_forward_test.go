//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/cli"
	"github.com/devloop-dev/devloop/internal/devcluster"
)

// webManifests is a Deployment whose pods answer HTTP with their own name
// (busybox httpd on the port named http), behind svc/web:80.
var webManifests = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      ` + restrictedPod + `
      terminationGracePeriodSeconds: 2
      containers:
      - name: web
        image: ` + devcluster.Registry + `/busybox:1.35
        command: [sh, -c, 'mkdir -p /tmp/www && echo "$POD_NAME" >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www']
        env:
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        ports: [{name: http, containerPort: 8080}]
        readinessProbe: {httpGet: {path: /, port: http}, periodSeconds: 1}
        ` + restrictedContainer + `
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
`

// lockedBuffer is the plugin's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPortForwardFollowsARollout on the real cluster: `kubectl devloop
// port-forward` (its Go entry point, in-process) forwards a free local port
// to svc/web:80, a GET through it is answered by the Ready pod; after the
// Deployment rolls (an env var changed) and the old pod is gone, a GET
// through the same local port is answered by the new pod.
func TestPortForwardFollowsARollout(t *testing.T) {
	c := need(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-pf")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"deploy/web.yaml": webManifests})
	srcRepo := registry + "/" + ns + "/src"
	_, err := devcluster.PushSource(ctx, dir, srcRepo+":dev")
	g.Expect(err).NotTo(HaveOccurred())

	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	env := &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pf"},
		Spec: v1alpha1.DevEnvironmentSpec{
			ServiceAccountName: "deployer",
			Sources:            []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{Repository: srcRepo, Tag: "dev", Insecure: true}}},
			Components: []v1alpha1.Component{{Name: "web",
				Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"deploy"}},
				Ports:     []v1alpha1.PortForward{{Name: "web", Local: int32(port), Target: "svc/web:80"}},
			}},
		},
	}
	g.Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())
	waitEnv(t, client.ObjectKeyFromObject(env), 4*time.Minute, false, readyNow)

	pfCtx, stop := context.WithCancel(ctx)
	defer stop()
	var out, errOut lockedBuffer
	exited := make(chan int, 1)
	go func() {
		streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
		exited <- cli.Run(pfCtx, []string{"--kubeconfig", c.Kubeconfig, "-n", ns, "port-forward", "pf"}, streams,
			cli.Options{PollInterval: 200 * time.Millisecond})
	}()
	// No keep-alive: each GET is a new local connection, as a browser's
	// next page load after a rollout would be.
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() (string, error) {
		resp, err := httpc.Get(fmt.Sprintf("http://localhost:%d/", port))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return strings.TrimSpace(string(b)), err
	}

	var first string
	g.Eventually(func() (string, error) { first, err = get(); return first, err }).
		WithTimeout(30*time.Second).WithPolling(500*time.Millisecond).Should(HavePrefix("web-"), "output:\n%s%s", &out, &errOut)
	g.Expect(out.String()).To(ContainSubstring(fmt.Sprintf("http://localhost:%d -> svc/web:80 (pod %s)", port, first)))
	t.Logf("first answer from pod %s", first)

	// Roll the Deployment: an env var the operator does not own.
	started := time.Now()
	patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"ROLL","value":"2"}]}]}}}}`)
	g.Expect(c.Client.Patch(ctx, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, client.RawPatch(types.StrategicMergePatchType, patch))).To(Succeed())
	g.Eventually(func() bool {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: first}, &corev1.Pod{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(2*time.Minute).WithPolling(500*time.Millisecond).Should(BeTrue(), "the old pod goes away")
	t.Logf("old pod gone %s after the rollout started", time.Since(started).Round(time.Millisecond))

	// The forward moved when the old pod began terminating; allow it one
	// poll to notice, then the same local port reaches the new pod.
	var second string
	g.Eventually(func() (string, error) { second, err = get(); return second, err }).
		WithTimeout(10*time.Second).WithPolling(300*time.Millisecond).Should(And(HavePrefix("web-"), Not(Equal(first))), "output:\n%s%s", &out, &errOut)
	g.Expect(out.String()).To(ContainSubstring(fmt.Sprintf("localhost:%d -> svc/web:80 now goes to pod %s", port, second)))
	t.Logf("after the rollout, pod %s answers", second)

	stop()
	select {
	case code := <-exited:
		g.Expect(code).To(Equal(0), "output:\n%s%s", &out, &errOut)
	case <-time.After(10 * time.Second):
		t.Fatalf("port-forward did not stop on Ctrl-C:\n%s", &out)
	}
	g.Expect(out.String()).To(ContainSubstring("stopped port-forwards"))
	t.Logf("port-forward output:\n%s", &out)
}
