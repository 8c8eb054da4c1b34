package pods

import (
	"bufio"
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devloop-dev/devloop/internal/identity"
)

// LogReader reads the end of a container's log, or counts its lines.
type LogReader interface {
	TailLog(ctx context.Context, namespace, pod, container string, lines int64) (string, error)
	// CountLines reads the container's whole log and counts the lines
	// match says yes to, without keeping them.
	CountLines(ctx context.Context, namespace, pod, container string, match func(line string) bool) (int, error)
}

// Logs reads container logs through the API server.
type Logs struct {
	Clientset kubernetes.Interface
}

// maxTail bounds a log tail read.
const maxTail = 64 << 10

// TailLog returns the last lines of a container's log, at most 64 KiB.
// The log is the tenant's program's output: the kubelet is asked for no
// more (LimitBytes), and no more is read whatever it sends, so a log
// cannot grow the operator's heap.
func (p Logs) TailLog(ctx context.Context, namespace, pod, container string, lines int64) (string, error) {
	limit := int64(maxTail)
	rc, err := p.Clientset.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{
		Container: container, TailLines: &lines, LimitBytes: &limit,
	}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(io.LimitReader(rc, maxTail))
	return string(b), err
}

// maxCounted bounds what CountLines reads of a log: a build printing one
// line per package compiled writes a few hundred kilobytes in a long
// compile; past the bound the count is what was read.
const maxCounted = 16 << 20

// CountLines counts the lines of a container's log that match, reading
// the log as a stream (at most maxCounted bytes, asked of the kubelet as
// LimitBytes) and keeping none of it.
func (p Logs) CountLines(ctx context.Context, namespace, pod, container string, match func(string) bool) (int, error) {
	limit := int64(maxCounted)
	rc, err := p.Clientset.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{
		Container: container, LimitBytes: &limit,
	}).Stream(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = rc.Close() }()
	return CountMatching(io.LimitReader(rc, maxCounted), match)
}

// CountMatching counts the lines of r that match; a line longer than 64
// KiB is skipped, not an error.
func CountMatching(r io.Reader, match func(string) bool) (int, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	n := 0
	for {
		line, isPrefix, err := br.ReadLine()
		if isPrefix {
			// Too long to be what is counted: skip to its end.
			for isPrefix && err == nil {
				_, isPrefix, err = br.ReadLine()
			}
		} else if err == nil && match(string(line)) {
			n++
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// WaitingReason is ": <container> <reason>" of the first container that
// waits for something other than starting (ImagePullBackOff, say), or "".
func WaitingReason(pod *corev1.Pod) string {
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && !starting(w.Reason) {
			return fmt.Sprintf(": %s %s", cs.Name, w.Reason)
		}
	}
	return ""
}

// NotRunning says why a container is down rather than running or still
// starting: its waiting reason (CrashLoopBackOff, ImagePullBackOff,
// CreateContainerError...), or "exited with code N" between a crash and
// the kubelet's restart; "" while it runs or starts.
func NotRunning(cs corev1.ContainerStatus) string {
	switch {
	case cs.State.Running != nil:
		return ""
	case cs.State.Terminated != nil:
		return fmt.Sprintf("exited with code %d", cs.State.Terminated.ExitCode)
	case cs.State.Waiting != nil && !starting(cs.State.Waiting.Reason):
		return cs.State.Waiting.Reason
	}
	return ""
}

// starting reports whether a waiting reason is a container on its way up.
func starting(reason string) bool {
	return reason == "" || reason == "PodInitializing" || reason == "ContainerCreating"
}

// TailFor reads the last lines of a container's log for status: as the
// tenant t through logsFor when it is set (the operator), else with logs
// (tests without a kubelet); "" when neither is set, and "(log not
// available: <why>)" when the log cannot be read.
func TailFor(ctx context.Context, logsFor func(*identity.Tenant) (LogReader, error), logs LogReader,
	t *identity.Tenant, namespace, pod, container string, lines int64) string {
	logs, err := ReaderFor(logsFor, logs, t)
	if err != nil {
		return "(log not available: " + err.Error() + ")"
	}
	if logs == nil {
		return ""
	}
	out, err := logs.TailLog(ctx, namespace, pod, container, lines)
	if err != nil {
		return "(log not available: " + err.Error() + ")"
	}
	return out
}

// ReaderFor is the log reader an engine reads a container's log with for
// status: t's own (logsFor, the operator) when it is set, else logs
// (tests without a kubelet); nil when neither is. The one choice, for
// tails (TailFor) and counts (a build's progress) alike.
func ReaderFor(logsFor func(*identity.Tenant) (LogReader, error), logs LogReader, t *identity.Tenant) (LogReader, error) {
	if logsFor != nil && t != nil {
		return logsFor(t)
	}
	return logs, nil
}

// TenantLogs reads container logs as t's user (its ServiceAccount,
// impersonated): what the operator's engines read log tails shown in
// status with, so status holds nothing the tenant could not read itself.
// The ServiceAccount needs get on pods/log in its namespace; without it a
// tail says the log is not available, naming the refusal.
func TenantLogs(t *identity.Tenant) (LogReader, error) {
	cfg, err := t.RESTConfig()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return Logs{Clientset: cs}, nil
}
