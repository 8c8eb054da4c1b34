//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/cli"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// webManifests is a Deployment whose pods answer HTTP with their own name
// (busybox httpd on the port named http), behind svc/web:80.
var webManifests = Documents(Deployment("web", "web", "image: "+busybox,
	`command: [sh, -c, 'mkdir -p /tmp/www && echo "$POD_NAME" >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www']`,
	"env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]",
	"ports: [{name: http, containerPort: 8080}]",
	"readinessProbe: {httpGet: {path: /, port: http}, periodSeconds: 1}"),
	Service("web"))

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
	port := freeLocalPort(t)
	env := newEnv(ns, "pf").Components(Component("web", Manifests("deploy"), Forward("web", port, "svc/web:80"))).Build()
	pushDir(t, env, sourceDir(t, Files{"deploy/web.yaml": webManifests}))
	g.Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())
	waitEnv(t, client.ObjectKeyFromObject(env), 4*time.Minute, false, readyNow)

	pfCtx, stop := context.WithCancel(ctx)
	defer stop()
	var out, errOut lockedBuffer
	exited := runPluginWith(pfCtx, cli.Options{PollInterval: 200 * time.Millisecond}, c.Kubeconfig, ns, &out, &errOut, "port-forward", "pf")
	// No keep-alive: each GET is a new local connection, as a browser's
	// next page load after a rollout would be.
	local := getWith(poll.NewHTTPClient(5*time.Second), fmt.Sprintf("http://localhost:%d/", port))
	get := func(ctx context.Context) string { return strings.TrimSpace(local(ctx)) }

	var first string
	waitFor(t, poll.Wait{What: "a pod answers through the forward", Every: 500 * time.Millisecond, Within: 30 * time.Second},
		withOutput(poll.Answer(get, hasPrefix("web-"), &first), &out, &errOut))
	g.Expect(out.String()).To(ContainSubstring(fmt.Sprintf("http://localhost:%d -> svc/web:80 (pod %s)", port, first)))
	t.Logf("first answer from pod %s", first)

	// Roll the Deployment: an env var the operator does not own.
	started := time.Now()
	patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"ROLL","value":"2"}]}]}}}}`)
	g.Expect(c.Client.Patch(ctx, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, client.RawPatch(types.StrategicMergePatchType, patch))).To(Succeed())
	waitCheck(t, poll.Wait{What: "the old pod " + first + " goes away", Every: 500 * time.Millisecond, Within: 2 * time.Minute}, func(g Gomega) {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: first}, &corev1.Pod{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "get: %v", err)
	})
	t.Logf("old pod gone %s after the rollout started", time.Since(started).Round(time.Millisecond))

	// The forward moved when the old pod began terminating; allow it one
	// poll to notice, then the same local port reaches the new pod.
	var second string
	waitFor(t, poll.Wait{What: "another pod than " + first + " answers through the same local port", Every: 300 * time.Millisecond, Within: 10 * time.Second},
		withOutput(poll.Answer(get, func(a string) bool { return strings.HasPrefix(a, "web-") && a != first }, &second), &out, &errOut))
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
