package cli

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/builder"
)

// createPod creates a pod labelled app=APP with one container port (name
// =port) and, when ready, the status a kubelet writes for a Ready pod.
func createPod(t *testing.T, ns, name, app, portName string, port int32, ready bool) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.test/web:dev",
			Ports: []corev1.ContainerPort{{Name: portName, ContainerPort: port}}}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.MarkPodRunning(t, k8s, pod, ready)
}

func createService(t *testing.T, ns, name, app string, port int32, target intstr.IntOrString) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app},
			Ports: []corev1.ServicePort{{Name: "http", Port: port, TargetPort: target}}},
	}
	if err := k8s.Create(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
}

func resolveTarget(t *testing.T, ns, target string) (resolvedTarget, error) {
	t.Helper()
	ft, err := parseForwardTarget(target)
	if err != nil {
		t.Fatal(err)
	}
	return resolveForwardTarget(context.Background(), k8s, ns, ft)
}

func TestPortForwardResolvesServiceNamedTargetPort(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createService(t, ns, "grafana", "grafana", 80, intstr.FromString("web"))
	createPod(t, ns, "grafana-ready", "grafana", "web", 3000, true)
	createPod(t, ns, "grafana-starting", "grafana", "web", 3000, false)

	for _, target := range []string{"svc/grafana:80", "service/grafana:http"} {
		got, err := resolveTarget(t, ns, target)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if want := (resolvedTarget{pod: "grafana-ready", port: 3000}); got != want {
			t.Errorf("%s resolved to %+v, want %+v (the Ready pod, targetPort web = 3000)", target, got, want)
		}
	}
	_, err := resolveTarget(t, ns, "svc/grafana:81")
	if err == nil || !strings.Contains(err.Error(), "has no port 81 (its ports: http=80)") {
		t.Errorf("svc/grafana:81: got %v, want an error naming the Service's ports", err)
	}
}

func TestPortForwardResolvesDeploymentToReadyPod(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	labels := map[string]string{"app": "api"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.test/api:dev"}}}}},
	}
	if err := k8s.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	createPod(t, ns, "api-old", "api", "metrics", 9090, false)
	createPod(t, ns, "api-new", "api", "metrics", 9090, true)
	createPod(t, ns, "other", "other", "metrics", 9090, true)

	got, err := resolveTarget(t, ns, "deploy/api:metrics")
	if err != nil {
		t.Fatal(err)
	}
	if want := (resolvedTarget{pod: "api-new", port: 9090}); got != want {
		t.Errorf("deploy/api:metrics resolved to %+v, want %+v", got, want)
	}
	got, err = resolveTarget(t, ns, "deployment/api:8080")
	if err != nil || got.port != 8080 || got.pod != "api-new" {
		t.Errorf("deployment/api:8080 resolved to %+v, %v; want api-new:8080", got, err)
	}
	_, err = resolveTarget(t, ns, "deploy/api:debug")
	if err == nil || !strings.Contains(err.Error(), "pod api-new has no container port named debug (its ports: metrics=9090)") {
		t.Errorf("deploy/api:debug: got %v, want an error naming the pod's ports", err)
	}
}

func TestPortForwardNoReadyPodSaysWhy(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createService(t, ns, "web", "web", 80, intstr.FromInt32(8080))
	createPod(t, ns, "web-1", "web", "http", 8080, false)

	_, err := resolveTarget(t, ns, "svc/web:80")
	if err == nil || !strings.Contains(err.Error(), "no Ready pod among its 1 pods (web-1 is not Ready)") {
		t.Fatalf("got %v, want no Ready pod naming web-1", err)
	}

	// The command waits for a Ready pod, says why it is waiting, and
	// stops cleanly on Ctrl-C (the context ending).
	port := freePort(t)
	createEnv(t, ns, "team", fixtureEnv("", "").AppSource().
		Components(builder.Component("web", builder.Manifests("deploy"), builder.Forward("web", int(port), "svc/web:80"))).Spec())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	wait := startPlugin(ctx, nil, &out, &errOut, testOptions(), "port-forward", "team", "-n", ns)
	waitUntil(t, "the waiting line", func() bool {
		return strings.Contains(out.String(), "web    localhost:"+strconv.Itoa(int(port))+" waiting: svc/web:80 in namespace "+ns+": no Ready pod among its 1 pods (web-1 is not Ready)")
	})
	cancel()
	if code := wait(); code != 0 || !strings.Contains(out.String(), "stopped port-forwards") {
		t.Fatalf("after Ctrl-C: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

func TestPortForwardRefusesPortInUseAndUnknownComponents(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := int32(busy.Addr().(*net.TCPAddr).Port)
	spec := teamSpec()
	spec.Components[1].Ports = []v1alpha1.PortForward{{Name: "ui", Local: port, Target: "svc/web:80"}}
	createEnv(t, ns, "team", spec)

	r := plugin(t, "port-forward", "team", "-n", ns)
	want := "local port " + strconv.Itoa(int(port)) + " (port-forward ui of component web) is already in use"
	if r.code != 1 || !strings.Contains(r.err, want) {
		t.Errorf("want exit 1 and %q\n%s", want, r)
	}
	r = plugin(t, "port-forward", "team", "api", "-n", ns)
	if r.code != 1 || !strings.Contains(r.err, "devenvironment/team has no component api; those with ports: web") {
		t.Errorf("unknown component: %s", r)
	}
	r = plugin(t, "port-forward", "team", "crds", "-n", ns)
	if r.code != 1 || !strings.Contains(r.err, "components crds declare no ports; those with ports: web") {
		t.Errorf("component without ports: %s", r)
	}
}

// freePort is a local port nothing listens on (now).
func freePort(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// push --watch forwards the declared ports while it watches (here a push
// that fails, which the watch survives) and stops them on q;
// --port-forward=false leaves them alone.
func TestPushWatchForwardsDeclaredPorts(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	port := freePort(t)
	spec := teamSpec()
	spec.Components[1].Ports = []v1alpha1.PortForward{{Name: "ui", Local: port, Target: "svc/web:80"}}
	createEnv(t, ns, "team", spec)
	waiting := "ui     localhost:" + strconv.Itoa(int(port)) + " waiting: svc/web:80 in namespace " + ns
	for _, forward := range []bool{true, false} {
		stdin, typed := io.Pipe()
		var out, errOut syncBuffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		exited := startPlugin(ctx, stdin, &out, &errOut, testOptions(), "push", t.TempDir(), "--env", "team", "--source", "app",
			"--watch", "--port-forward="+strconv.FormatBool(forward), "-n", ns)
		waitUntil(t, "watching", func() bool { return strings.Contains(out.String(), "watching ") })
		if forward {
			waitUntil(t, "the forward's waiting line", func() bool { return strings.Contains(out.String(), waiting) })
		}
		if _, err := io.WriteString(typed, "q\n"); err != nil {
			t.Fatal(err)
		}
		code := exited()
		cancel()
		typed.Close()
		if code != 0 || strings.Contains(out.String(), "stopped port-forwards") != forward || strings.Contains(out.String(), waiting) != forward {
			t.Fatalf("--port-forward=%v: exit %d\n%s%s", forward, code, out.String(), errOut.String())
		}
	}
}
