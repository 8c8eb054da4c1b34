package devcluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/message"
)

// Diagnose says, for an error message, where the namespace's pods stand
// (describePods) and what keeps pods off the nodes (nodeProblems).
func (c *Cluster) Diagnose(ns string) string {
	msg := c.describePods(ns)
	if nodes := c.nodeProblems(); nodes != "" {
		msg += "\n" + nodes
	}
	return msg
}

// describePods says, for an error message, where each of the namespace's
// pods stands: its phase, the conditions that are not true and why, each
// container's state and restarts, and the last lines of a container that
// runs but is not ready (a failing readiness probe shows nothing else).
// Bounded: a few lines per pod and container.
func (c *Cluster) describePods(ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	if len(pods.Items) == 0 {
		return "no pod in namespace " + ns
	}
	var out []string
	for i := range pods.Items {
		out = append(out, c.describePod(ctx, &pods.Items[i]))
	}
	return strings.Join(out, "\n")
}

func (c *Cluster) describePod(ctx context.Context, p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s: %s", p.Name, p.Status.Phase)
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			fmt.Fprintf(&b, "; %s=%s %s %s", cond.Type, cond.Status, cond.Reason, message.Truncate(cond.Message, 200))
		}
	}
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		fmt.Fprintf(&b, "\n  container %s: ready=%t restarts=%d %s", s.Name, s.Ready, s.RestartCount, containerState(s.State))
		if t := s.LastTerminationState.Terminated; t != nil {
			fmt.Fprintf(&b, "; last exit %d %s at %s", t.ExitCode, t.Reason, t.FinishedAt.Format(time.RFC3339))
		}
		if s.State.Running != nil && !s.Ready {
			b.WriteString(c.logTail(ctx, p, s.Name, 15))
		}
	}
	return b.String()
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return "waiting: " + s.Waiting.Reason + " " + message.Truncate(s.Waiting.Message, 200)
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.Format(time.RFC3339)
	case s.Terminated != nil:
		return fmt.Sprintf("terminated: exit %d %s", s.Terminated.ExitCode, s.Terminated.Reason)
	}
	return "no state yet"
}

// logTail returns the container's last lines, indented.
func (c *Cluster) logTail(ctx context.Context, p *corev1.Pod, container string, lines int64) string {
	limit := int64(16 << 10)
	raw, err := c.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: container, TailLines: &lines, LimitBytes: &limit,
	}).DoRaw(ctx)
	if err != nil {
		return "\n    (no log: " + message.Truncate(err.Error(), 200) + ")"
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		b.WriteString("\n    | " + message.Truncate(l, 300))
	}
	return b.String()
}

// nodeProblems names the nodes' taints and the conditions that keep pods
// off them (disk, memory or PID pressure; not Ready), or "" when none.
func (c *Cluster) nodeProblems() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes := &corev1.NodeList{}
	if err := c.Client.List(ctx, nodes); err != nil {
		return err.Error()
	}
	var out []string
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			bad := cond.Status == corev1.ConditionTrue
			if cond.Type == corev1.NodeReady {
				bad = cond.Status != corev1.ConditionTrue
			}
			if bad {
				out = append(out, fmt.Sprintf("node %s: %s=%s %s", n.Name, cond.Type, cond.Status, message.Truncate(cond.Message, 200)))
			}
		}
		for _, taint := range n.Spec.Taints {
			out = append(out, fmt.Sprintf("node %s: taint %s:%s", n.Name, taint.Key, taint.Effect))
		}
	}
	return strings.Join(out, "; ")
}
