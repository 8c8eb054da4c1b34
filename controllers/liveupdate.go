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
// labelled LabelLiveUpdate) to the environments that are to sync it: a
// pod started after a live update (rescheduled, scaled up, replaced) is
// synced as soon as it runs, and one of a template that runs the newest
// digest is told so, which starts its program without waiting out its
// supervisor's gate. The sync itself lists and execs as the tenant; this
// only says which environment to reconcile.
func (r *DevEnvironmentReconciler) livePodRequests(ctx context.Context, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !pod.DeletionTimestamp.IsZero() || pod.Labels[v1alpha1.LabelLiveUpdate] != v1alpha1.LiveUpdateSupervised {
		return nil
	}
	running := runningImages(pod)
	if len(running) == 0 {
		return nil
	}
	envs := &v1alpha1.DevEnvironmentList{}
	if err := r.List(ctx, envs); err != nil {
		log.FromContext(ctx).Error(err, "listing environments for a started pod", "pod", pod.Namespace+"/"+pod.Name)
		return nil
	}
	var out []reconcile.Request
	for i := range envs.Items {
		if envs.Items[i].Spec.Suspend || !slices.Contains(liveupdate.Namespaces(&envs.Items[i]), pod.Namespace) {
			continue
		}
		if mustSync(&envs.Items[i], pod, running) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&envs.Items[i])})
		}
	}
	return out
}

// mustSync reports whether env has a live-updatable image whose template
// one of the pod's running containers runs and whose digest the pod has
// not been synced to.
func mustSync(env *v1alpha1.DevEnvironment, pod *corev1.Pod, running map[string]bool) bool {
	for _, c := range env.Status.Components {
		for i := range c.Images {
			ist := &c.Images[i]
			want := ist.PodDigest()
			if want != "" && running[liveupdate.TemplateRef(env, ist)] && pod.Annotations[v1alpha1.LiveDigestAnnotation] != want {
				return true
			}
		}
	}
	return false
}

// runningImages are the images (as the pod spec names them) of the pod's
// running containers.
func runningImages(pod *corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil {
			continue
		}
		for _, c := range pod.Spec.Containers {
			if c.Name == cs.Name {
				out[c.Image] = true
			}
		}
	}
	return out
}
