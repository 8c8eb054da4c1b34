package deploy

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/pods"
)

// hookOutputBytes bounds the hook output a failure message carries: the
// component's message holds Helm's error too, within MaxComponentMessage.
const hookOutputBytes = 400

// hookOutputLines is how many of the log's last lines are read.
const hookOutputLines = 10

// hookFailureOutput says what the component's failed hook Job printed
// last, for the message of a Helm action that failed on a hook: Helm's
// own error says only the Job's reason (BackoffLimitExceeded). It is
// "\nhook job J (pod P, container C) printed: <end of its log>" for the
// environment's most recently failed hook Job in namespace, or "" when
// none is found. Everything is read as the tenant (cl, and its logs as
// t), so status shows nothing the tenant could not read itself.
func (e *Engine) hookFailureOutput(ctx context.Context, cl client.Client, t *identity.Tenant, namespace string, opts ApplyOptions) string {
	jobs := &batchv1.JobList{}
	if err := cl.List(ctx, jobs, client.InNamespace(namespace),
		client.MatchingLabels{v1alpha1.LabelEnvironment: opts.Environment, v1alpha1.LabelComponent: opts.Component}); err != nil {
		return ""
	}
	var failed *batchv1.Job
	var failedAt int64
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if _, hook := j.Annotations["helm.sh/hook"]; !hook || !ownedBy(j, opts) {
			continue
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && (failed == nil || c.LastTransitionTime.Unix() >= failedAt) {
				failed, failedAt = j, c.LastTransitionTime.Unix()
			}
		}
	}
	if failed == nil {
		return ""
	}
	podList := &corev1.PodList{}
	if err := cl.List(ctx, podList, client.InNamespace(namespace), client.MatchingLabels{batchv1.JobNameLabel: failed.Name}); err != nil {
		return fmt.Sprintf("\nhook job %s: its pods cannot be listed: %s", failed.Name, message.Truncate(err.Error(), 200))
	}
	pod := newestPodOf(podList.Items, failed)
	if pod == nil {
		return fmt.Sprintf("\nhook job %s has no pod left to read the output of", failed.Name)
	}
	container := failedContainer(pod)
	out := pods.TailFor(ctx, e.LogsFor, e.Logs, t, namespace, pod.Name, container, hookOutputLines)
	tail := &message.Tail{Max: hookOutputBytes}
	_, _ = tail.Write([]byte(out))
	printed := tail.String()
	if len(printed) < len(strings.TrimRight(out, "\n")) {
		// Cut: start at the first whole line kept, if any.
		if i := strings.IndexByte(printed, '\n'); i >= 0 {
			printed = printed[i+1:]
		}
	}
	if printed = message.Condense(printed); printed == "" {
		printed = "(nothing)"
	}
	// On a line of its own: Helm's error ends with a newline or two, and
	// the message is condensed to one line ("; " between lines) later.
	return fmt.Sprintf("\nhook job %s (pod %s, container %s) printed: %s", failed.Name, pod.Name, container, printed)
}

// newestPodOf is the most recently created of job's pods (controlled by
// it: a pod merely labelled with its name is not), or nil.
func newestPodOf(list []corev1.Pod, job *batchv1.Job) *corev1.Pod {
	var newest *corev1.Pod
	for i := range list {
		p := &list[i]
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != job.UID {
			continue
		}
		if newest == nil || newest.CreationTimestamp.Before(&p.CreationTimestamp) {
			newest = p
		}
	}
	return newest
}

// failedContainer is the container whose output explains the failure: the
// first (init containers first) that ended with a non-zero code, else
// the pod's first container.
func failedContainer(pod *corev1.Pod) string {
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return cs.Name
		}
	}
	if len(pod.Spec.Containers) > 0 {
		return pod.Spec.Containers[0].Name
	}
	return ""
}
