package controllers

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/liveupdate"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/pods"
)

// liveUpdate runs between a component's build and its deploy: images
// whose newest digest changed only under liveUpdate.paths are synced
// into the running pods (their DeployDigest stays the templates'), the
// others are left for the deploy step to roll out, status saying why.
func (r *DevEnvironmentReconciler) liveUpdate(ctx context.Context, s *scope, c *v1alpha1.Component, st *v1alpha1.ComponentStatus) error {
	if r.LiveUpdate == nil || !hasLiveUpdate(c) {
		return nil
	}
	out, err := r.LiveUpdate.Update(ctx, liveupdate.Request{Env: s.env, Component: c, Status: st, Tenant: s.tenant, Registry: s.imageBuilds(r)})
	if len(out.Synced) > 0 && r.Recorder != nil {
		r.Recorder.Eventf(s.env, nil, corev1.EventTypeNormal, v1alpha1.ReasonLiveUpdated, "LiveUpdate", "%s",
			message.Truncate("component "+c.Name+": synced in place into "+strings.Join(out.Synced, ", "), message.MaxEventNote))
	}
	return err
}

// recordTemplates notes, once the deploy step applied the component, the
// digest its pod templates now run: a live update compares new builds
// with it.
func recordTemplates(c *v1alpha1.Component, st *v1alpha1.ComponentStatus) {
	for i := range c.Images {
		if ist := st.Image(c.Images[i].Name); ist != nil && c.Images[i].LiveUpdate != nil {
			ist.TemplateDigest = ist.DeployDigest()
			if ist.TemplateDigest == ist.Digest {
				ist.LiveDigest = ""
			}
		}
	}
}

func hasLiveUpdate(c *v1alpha1.Component) bool {
	for i := range c.Images {
		if c.Images[i].LiveUpdate != nil {
			return true
		}
	}
	return false
}

// liveSummary names the images serving a live update in place, for the
// Ready message: "; live update serving: web/server".
func liveSummary(env *v1alpha1.DevEnvironment) string {
	var names []string
	for _, c := range env.Status.Components {
		for _, img := range c.Images {
			if img.ServesLive() {
				names = append(names, c.Name+"/"+img.Name)
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "; live update serving: " + strings.Join(names, ", ")
}

// livePodRequests maps an event of a pod that runs containers under the
// live update supervisor (the only pods the operator watches: those
// labelled LabelLiveUpdate) to the environments whose template one of its
// containers runs, when that environment has something to do: sync a pod
// started after a live update (rescheduled, scaled up, replaced) as soon
// as it runs, tell one of a template that runs the newest digest so (its
// program then starts without waiting out its supervisor's gate), or
// report a container that went down (a crash after a live update's
// restart is reported as any crash is, not at the next periodic
// reconcile). The sync itself lists and execs as the tenant; this only
// says which environment to reconcile.
func (r *DevEnvironmentReconciler) livePodRequests(ctx context.Context, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !pod.DeletionTimestamp.IsZero() || pod.Labels[v1alpha1.LabelLiveUpdate] != v1alpha1.LiveUpdateSupervised ||
		!slices.ContainsFunc(pod.Status.ContainerStatuses, runningOrDown) {
		return nil
	}
	envs := &v1alpha1.DevEnvironmentList{}
	// Only read: the cache's objects need not be copied for every event.
	if err := r.List(ctx, envs, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing environments for a live-updatable pod", "pod", pod.Namespace+"/"+pod.Name)
		return nil
	}
	var out []reconcile.Request
	for i := range envs.Items {
		env := &envs.Items[i]
		if env.Spec.Suspend || !slices.Contains(liveupdate.Namespaces(env), pod.Namespace) {
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
// one of the pod's containers runs (liveupdate.PodTargets, as the sync
// finds them) and which has something to do with the pod: a running
// container not synced to the digest the pod is to serve, or a container
// down.
func concerns(env *v1alpha1.DevEnvironment, pod *corev1.Pod) bool {
	for _, c := range env.Status.Components {
		for i := range c.Images {
			ist := &c.Images[i]
			if ist.TemplateDigest == "" {
				continue
			}
			want := ist.PodDigest()
			for _, t := range liveupdate.PodTargets(pod, liveupdate.TemplateRef(env, ist)) {
				if t.Down != "" || (t.Running && want != "" && t.LiveDigest != want) {
					return true
				}
			}
		}
	}
	return false
}
