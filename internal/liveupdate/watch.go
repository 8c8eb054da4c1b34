package liveupdate

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
)

// PodRequests maps an event of a pod that runs containers under the live
// update supervisor (the only pods the operator watches: those labelled
// LabelLiveUpdate) to the environments whose template one of its
// containers runs, when that environment has something to do: sync a pod
// started after a live update (rescheduled, scaled up, replaced) as soon
// as it runs, tell one of a template that runs the newest digest so (its
// program then starts without waiting out its supervisor's gate), or
// report a container that went down (a crash after a live update's
// restart is reported as any crash is, not at the next periodic
// reconcile). The sync itself lists and execs as the tenant; this only
// says which environment to reconcile. envs reads the operator's cache.
func PodRequests(ctx context.Context, envs client.Reader, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !pod.DeletionTimestamp.IsZero() || pod.Labels[v1alpha1.LabelLiveUpdate] != v1alpha1.LiveUpdateSupervised ||
		!slices.ContainsFunc(pod.Status.ContainerStatuses, runningOrDown) {
		return nil
	}
	list := &v1alpha1.DevEnvironmentList{}
	// Only read: the cache's objects need not be copied for every event.
	if err := envs.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing environments for a live-updatable pod", "pod", pod.Namespace+"/"+pod.Name)
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		env := &list.Items[i]
		if env.Spec.Suspend || !slices.Contains(Namespaces(env), pod.Namespace) {
			continue
		}
		if concerns(env, pod) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(env)})
		}
	}
	return out
}

// runningOrDown reports whether a container runs or is down
// (pods.NotRunning): one still starting has nothing to sync or report.
func runningOrDown(cs corev1.ContainerStatus) bool {
	return cs.State.Running != nil || pods.NotRunning(cs) != ""
}

// concerns reports whether env has a live-updatable image whose template
// one of the pod's containers runs (PodTargets, as the sync finds them)
// and which has something to do with the pod: a running container not
// synced to the digest the pod is to serve, or a container down.
func concerns(env *v1alpha1.DevEnvironment, pod *corev1.Pod) bool {
	for _, c := range env.Status.Components {
		for i := range c.Images {
			ist := &c.Images[i]
			if ist.TemplateDigest == "" {
				continue
			}
			want := ist.PodDigest()
			for _, t := range PodTargets(pod, TemplateRef(env, ist)) {
				if t.Down != "" || (t.Running && want != "" && t.LiveDigest != want) {
					return true
				}
			}
		}
	}
	return false
}
