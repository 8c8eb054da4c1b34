package cli

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

const (
	normalDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	debugDigest  = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// webDeployment creates the Deployment web and a ReplicaSet it controls,
// as the deployment controller would, and returns the ReplicaSet.
func webDeployment(t *testing.T, ns string) *appsv1.ReplicaSet {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-6d5f",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	if err := k8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// webPod creates a pod of rs running registry.test/team/web@digest and
// writes its status: Running, Ready or not.
func webPod(t *testing.T, rs *appsv1.ReplicaSet, name, digest string, ready bool) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name, Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.test/team/web@" + digest}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	setPodReady(t, rs.Namespace, name, ready)
}

func setPodReady(t *testing.T, ns, name string, ready bool) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	testenv.MarkPodRunning(t, k8s, pod, ready)
}

// webImageStatus writes web's status as the operator would: the image
// at digest (a debug build or not), the Deployment in its inventory.
func webImageStatus(digest string, debug bool) func(env *v1alpha1.DevEnvironment) {
	return func(env *v1alpha1.DevEnvironment) {
		env.Status.ObservedGeneration = env.Generation
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseReady,
			Images:    []v1alpha1.ImageStatus{{Name: "web", Repository: "registry.test/team/web", Digest: digest, Debug: debug}},
			Inventory: []v1alpha1.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: env.Namespace, Name: "web"}},
		}}
	}
}

// TestDebugWaitsForTheDebugPodThenForwards: `debug` binds its local port,
// writes the annotation, waits while the image is not a debug build and
// while no Ready pod runs the debug digest (saying which), then forwards
// to the Deployment owning that pod and prints how to attach, until
// Ctrl-C. (envtest has no kubelet: the forward's connection to the pod
// fails, and the line saying so names the target and the pod.)
func TestDebugWaitsForTheDebugPodThenForwards(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", debugSpec())
	rs := webDeployment(t, ns)
	webPod(t, rs, "web-normal", normalDigest, true)
	playOperator(t, ns, "team", webImageStatus(normalDigest, false))

	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	wait := startPlugin(ctx, nil, &out, &errOut, testOptions(), "debug", "team", "web", "--port", strconv.Itoa(int(port)), "-n", ns)
	waitUntil(t, "waiting for the debug build", func() bool {
		return strings.Contains(out.String(), "waiting for the debug build of image web (component Ready)")
	})
	if got := getEnv(t, ns, "team").Annotations[v1alpha1.DebugAnnotation]; got != "web/web" {
		t.Fatalf("annotation %q, want web/web", got)
	}

	// The debug build lands; the rollout's pod is not Ready yet.
	playOperator(t, ns, "team", webImageStatus(debugDigest, true))
	waitUntil(t, "waiting for a pod running it", func() bool {
		return strings.Contains(out.String(), "debug image web@222222222222 built; waiting for a Ready pod running it (none of its 1 pods runs it yet)")
	})
	webPod(t, rs, "web-debug", debugDigest, false)
	waitUntil(t, "waiting for it to be Ready", func() bool {
		return strings.Contains(out.String(), "waiting for a Ready pod running it (no Ready pod among its 1 pods (web-debug is not Ready))")
	})
	if strings.Contains(out.String(), "dlv connect") {
		t.Fatalf("attach help printed before the debug pod is Ready:\n%s", out.String())
	}
	setPodReady(t, ns, "web-debug", true)
	local := "localhost:" + strconv.Itoa(int(port))
	for _, want := range []string{
		"pod web-debug runs it under delve",
		"dlv connect " + local,
		`"mode": "remote", "host": "127.0.0.1", "port": ` + strconv.Itoa(int(port)),
		"dlv    " + local + " waiting: deploy/web:40000: connecting to pod web-debug",
	} {
		waitUntil(t, want, func() bool { return strings.Contains(out.String(), want) })
	}
	// The port is open: a debugger's connection is accepted (and closed,
	// with no kubelet behind it).
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(int(port)), 5*time.Second)
	if err != nil {
		t.Fatalf("dialling the forwarded port: %v\n%s", err, out.String())
	}
	conn.Close()

	cancel()
	if code := wait(); code != 0 || !strings.Contains(out.String(), "stopped port-forwards") {
		t.Fatalf("after Ctrl-C: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if got := getEnv(t, ns, "team").Annotations[v1alpha1.DebugAnnotation]; got != "web/web" {
		t.Errorf("after Ctrl-C the annotation is %q; the image stays in debug mode until --off", got)
	}
}

// TestDebugRefusesABusyPortBeforeWriting: a local port in use fails the
// command naming the port and --port, and nothing is written; a wait that
// times out says what it waited for; leaving debug mode while waiting
// (another user's --off) ends the wait saying so.
func TestDebugRefusesABusyPortBeforeWriting(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", debugSpec())
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	r := plugin(t, "debug", "team", "web", "--port", port, "-n", ns)
	want := "local port " + port + " (port-forward dlv of component web) is already in use: stop what listens there or pick another with --port"
	if r.code != 1 || !strings.Contains(r.err, want) {
		t.Errorf("want exit 1 and %q\n%s", want, r)
	}
	if _, ok := getEnv(t, ns, "team").Annotations[v1alpha1.DebugAnnotation]; ok {
		t.Fatal("a refused debug wrote the annotation")
	}

	r = plugin(t, "debug", "team", "web", "--port", strconv.Itoa(int(freePort(t))), "--timeout", "1s", "-n", ns)
	if r.code != 1 || !strings.Contains(r.err, "timed out after") || !strings.Contains(r.err, "waiting for the debug build of image web") {
		t.Errorf("--timeout 1s without an operator: %s", r)
	}

	out, errOut, wait := pluginInBackground(t, testOptions(), "debug", "team", "api/server", "--port", strconv.Itoa(int(freePort(t))), "-n", ns)
	waitUntil(t, "waiting for the debug build", func() bool { return strings.Contains(out.String(), "waiting for the debug build of image server") })
	if r := plugin(t, "debug", "team", "api/server", "--off", "-n", ns); r.code != 0 {
		t.Fatal(r)
	}
	if code := wait(); code != 1 || !strings.Contains(errOut.String(), "api/server left debug mode (annotation devloop.dev/debug is now \"web/web\")") {
		t.Fatalf("after --off elsewhere: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

// TestStatusShowsDebugImages: status marks an image whose digest is a
// debug build.
func TestStatusShowsDebugImages(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", debugSpec())
	playOperator(t, ns, "team", webImageStatus(debugDigest, true))
	r := plugin(t, "status", "team", "-n", ns)
	if r.code != 0 || !strings.Contains(r.out, "image web  registry.test/team/web@222222222222  Debug build, delve on :40000") {
		t.Fatalf("status lacks the debug mark:\n%s", r)
	}
	playOperator(t, ns, "team", webImageStatus(normalDigest, false))
	if r = plugin(t, "status", "team", "-n", ns); r.code != 0 || strings.Contains(r.out, "Debug build") {
		t.Fatalf("a normal build is marked debug:\n%s", r)
	}
}
