package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// waitForDebugPod follows the environment until the debug build of t is
// the image's digest (status images[].debug) and a pod of the component
// running that digest is Ready, and returns that pod. It fails when the
// environment is Stalled or t leaves the debug annotation, and says what
// it waits for meanwhile.
func (a *app) waitForDebugPod(ctx context.Context, s *session, envName string, t v1alpha1.DebugTarget, timeout time.Duration) (*corev1.Pod, error) {
	p := newProgress(a.out(), a.opts.ProgressInterval)
	var found *corev1.Pod
	lt := &logsTarget{what: "component " + t.Component, component: t.Component}
	err := a.follow(ctx, s, envName, timeout, p, func(env *v1alpha1.DevEnvironment) (string, bool, error) {
		if c := stalled(env); c != nil {
			return "Stalled (" + c.Reason + ")", true, failed("devenvironment/%s is Stalled (%s): %s", env.Name, c.Reason, c.Message)
		}
		if !slices.Contains(env.DebugTargets(), t) {
			return "", true, failed("devenvironment/%s: %s left debug mode (annotation %s is now %q)", env.Name, t, v1alpha1.DebugAnnotation, env.Annotations[v1alpha1.DebugAnnotation])
		}
		cs := env.Status.Component(t.Component)
		ist := cs.Image(t.Image)
		if ist == nil || !ist.Debug || ist.Digest == "" {
			return "waiting for the debug build of image " + t.Image + componentNote(cs), false, nil
		}
		built := "debug image " + t.Image + "@" + shortDigest(ist.Digest) + " built"
		pods, err := a.targetPods(ctx, s, env, lt)
		if err != nil {
			return built + "; listing the pods of component " + t.Component + ": " + boundedLine(err.Error(), 300), false, nil
		}
		pod, why := podRunning(pods, ist.Digest)
		if pod == nil {
			return built + "; waiting for a Ready pod running it (" + why + ")" + componentNote(cs), false, nil
		}
		found = pod
		return built + "; pod " + pod.Name + " runs it under delve", true, nil
	})
	return found, err
}

// componentNote is the component's phase and message, for a waiting line.
func componentNote(cs *v1alpha1.ComponentStatus) string {
	if cs == nil || cs.Phase == "" {
		return ""
	}
	note := " (component " + string(cs.Phase)
	if m := firstLine(cs.Message); m != "" {
		note += ": " + boundedLine(m, 200)
	}
	return note + ")"
}

// podRunning picks the newest Ready pod among pods with a container
// running the image by digest (the deploy engine pins built images by
// digest). Without one, why says what the candidates are doing.
func podRunning(pods []corev1.Pod, digest string) (*corev1.Pod, string) {
	var running []corev1.Pod
	for _, p := range pods {
		if slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return strings.HasSuffix(c.Image, "@"+digest) }) {
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		return nil, fmt.Sprintf("none of its %d pods runs it yet", len(pods))
	}
	pod, err := readyPod(running)
	if err != nil {
		return nil, err.Error()
	}
	return pod, ""
}

// debugForwardTarget is what the delve forward follows: the Deployment or
// StatefulSet owning pod, so a later rollout (the next debug build) moves
// the forward to the new pod; a pod of another owner is forwarded as is.
func debugForwardTarget(ctx context.Context, c client.Client, pod *corev1.Pod) forwardTarget {
	port := strconv.Itoa(v1alpha1.DebugPort)
	t := forwardTarget{kind: "pod", name: pod.Name, port: port}
	owner := metav1.GetControllerOf(pod)
	switch {
	case owner == nil:
	case owner.Kind == "StatefulSet":
		t.kind, t.name = "sts", owner.Name
	case owner.Kind == "ReplicaSet":
		rs := &appsv1.ReplicaSet{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: owner.Name}, rs); err != nil {
			break // forward to the pod itself
		}
		if d := metav1.GetControllerOf(rs); d != nil && d.Kind == "Deployment" {
			t.kind, t.name = "deploy", d.Name
		}
	}
	return t
}

// attachHelp says how to attach to delve on local port port; forwarded
// says whether this command forwards it.
func attachHelp(port int, forwarded bool) string {
	how := fmt.Sprintf("Once the image is rebuilt and rolled out, forward the port (kubectl port-forward deploy/NAME %d:%d) and attach:", port, v1alpha1.DebugPort)
	if forwarded {
		how = "Attach with:"
	}
	return fmt.Sprintf(`%s
  dlv connect localhost:%d
VS Code (launch.json):
  {"name": "devloop", "type": "go", "request": "attach", "mode": "remote", "host": "127.0.0.1", "port": %d}
`, how, port, port)
}
