package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// forwardTarget is a parsed components[].ports[].target: kind/name:port.
type forwardTarget struct {
	kind string // svc, deploy, sts or pod
	name string
	port string // a number or a port name
}

func (t forwardTarget) String() string { return t.kind + "/" + t.name + ":" + t.port }

// targetKinds maps the accepted spellings to the short one.
var targetKinds = map[string]string{
	"svc": "svc", "service": "svc",
	"deploy": "deploy", "deployment": "deploy",
	"sts": "sts", "statefulset": "sts",
	"pod": "pod",
}

// parseForwardTarget reads kind/name:port (the API validates the form; this
// is what an older server or a hand-made object could still carry).
func parseForwardTarget(s string) (forwardTarget, error) {
	kindName, port, ok := strings.Cut(s, ":")
	kind, name, ok2 := strings.Cut(kindName, "/")
	short := targetKinds[kind]
	if !ok || !ok2 || short == "" || name == "" || port == "" {
		return forwardTarget{}, fmt.Errorf("target %q: want kind/name:port with kind svc, deploy, sts or pod, e.g. svc/grafana:80", s)
	}
	return forwardTarget{kind: short, name: name, port: port}, nil
}

// resolvedTarget is the pod and container port a forward goes to now.
type resolvedTarget struct {
	pod  string
	port int32
}

// resolveForwardTarget finds a Ready pod behind t in namespace ns and the
// pod's port that t's port means: a Service's port by number or name, then
// its targetPort (a number, or a container port name looked up in the
// pod); a workload's or pod's port by number or container port name.
func resolveForwardTarget(ctx context.Context, c client.Client, ns string, t forwardTarget) (resolvedTarget, error) {
	podPort := t.port // what to look up in the pod
	var sel labels.Selector
	switch t.kind {
	case "pod":
		pod := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.name}, pod); err != nil {
			return resolvedTarget{}, fmt.Errorf("%s in namespace %s: %w", t, ns, err)
		}
		if why := notServing(pod); why != "" {
			return resolvedTarget{}, fmt.Errorf("%s in namespace %s: pod %s", t, ns, why)
		}
		port, err := containerPort(pod, podPort)
		if err != nil {
			return resolvedTarget{}, fmt.Errorf("%s: %w", t, err)
		}
		return resolvedTarget{pod: pod.Name, port: port}, nil
	case "svc":
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.name}, svc); err != nil {
			return resolvedTarget{}, fmt.Errorf("%s in namespace %s: %w", t, ns, err)
		}
		sp, err := servicePort(svc, t.port)
		if err != nil {
			return resolvedTarget{}, fmt.Errorf("%s: %w", t, err)
		}
		switch {
		case sp.TargetPort.Type == intstr.String:
			podPort = sp.TargetPort.StrVal
		case sp.TargetPort.IntVal != 0:
			podPort = strconv.Itoa(int(sp.TargetPort.IntVal))
		default: // no targetPort: the Service's port
			podPort = strconv.Itoa(int(sp.Port))
		}
		if len(svc.Spec.Selector) == 0 {
			return resolvedTarget{}, fmt.Errorf("%s: the Service has no selector, so no pod to forward to", t)
		}
		sel = labels.SelectorFromSet(svc.Spec.Selector)
	case "deploy", "sts":
		var ls *metav1.LabelSelector
		if t.kind == "deploy" {
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.name}, d); err != nil {
				return resolvedTarget{}, fmt.Errorf("%s in namespace %s: %w", t, ns, err)
			}
			ls = d.Spec.Selector
		} else {
			s := &appsv1.StatefulSet{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.name}, s); err != nil {
				return resolvedTarget{}, fmt.Errorf("%s in namespace %s: %w", t, ns, err)
			}
			ls = s.Spec.Selector
		}
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(ls); err != nil || sel.Empty() {
			return resolvedTarget{}, fmt.Errorf("%s: no usable pod selector", t)
		}
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return resolvedTarget{}, fmt.Errorf("%s: listing its pods: %w", t, err)
	}
	pod, err := readyPod(pods.Items)
	if err != nil {
		return resolvedTarget{}, fmt.Errorf("%s in namespace %s: %w", t, ns, err)
	}
	port, err := containerPort(pod, podPort)
	if err != nil {
		return resolvedTarget{}, fmt.Errorf("%s: %w", t, err)
	}
	return resolvedTarget{pod: pod.Name, port: port}, nil
}

// servicePort is the Service's port with that number or name.
func servicePort(svc *corev1.Service, port string) (corev1.ServicePort, error) {
	var have []string
	for _, sp := range svc.Spec.Ports {
		if sp.Name == port || strconv.Itoa(int(sp.Port)) == port {
			return sp, nil
		}
		have = append(have, portLabel(sp.Name, sp.Port))
	}
	return corev1.ServicePort{}, fmt.Errorf("the Service has no port %s (its ports: %s)", port, portsOrNone(have))
}

// containerPort is port as a number: itself, or the pod's container port
// of that name.
func containerPort(pod *corev1.Pod, port string) (int32, error) {
	if n, err := strconv.ParseInt(port, 10, 32); err == nil {
		if n < 1 || n > 65535 {
			return 0, fmt.Errorf("port %s is out of range", port)
		}
		return int32(n), nil
	}
	var have []string
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port {
				return p.ContainerPort, nil
			}
			have = append(have, portLabel(p.Name, p.ContainerPort))
		}
	}
	return 0, fmt.Errorf("pod %s has no container port named %s (its ports: %s)", pod.Name, port, portsOrNone(have))
}

// readyPod picks the newest Ready pod not being deleted: after a rollout
// that is a pod of the new revision.
func readyPod(pods []corev1.Pod) (*corev1.Pod, error) {
	sort.Slice(pods, func(i, j int) bool {
		ti, tj := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return tj.Before(&ti)
		}
		return pods[i].Name < pods[j].Name
	})
	var why []string
	for i := range pods {
		w := notServing(&pods[i])
		if w == "" {
			return &pods[i], nil
		}
		if len(why) < 3 { // bounded: the first few say enough
			why = append(why, w)
		}
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("no pod matches its selector (yet)")
	}
	return nil, fmt.Errorf("no Ready pod among its %d pods (%s)", len(pods), strings.Join(why, "; "))
}

// notServing says why a pod cannot take a forward, or "" when it can.
func notServing(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return pod.Name + " is being deleted"
	}
	if pod.Status.Phase != corev1.PodRunning {
		return fmt.Sprintf("%s is %s", pod.Name, valueOr(string(pod.Status.Phase), "Pending"))
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return ""
		}
	}
	return pod.Name + " is not Ready"
}

func portLabel(name string, port int32) string {
	if name == "" {
		return strconv.Itoa(int(port))
	}
	return fmt.Sprintf("%s=%d", name, port)
}

func portsOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func valueOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
